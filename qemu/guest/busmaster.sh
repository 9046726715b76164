# SPDX-License-Identifier: GPL-2.0
# Bus mastering lost: the guest clears Bus Master Enable in the controller's PCI command
# register (as a PCI error or a stray setpci can), then resets the controller. Without bus
# mastering the controller cannot fetch a command: the reset must restore it (as the C
# driver's does in every reset), not enable the controller, wait for its first admin
# command to time out and declare it dead (it used to). Then fio writes and verifies
# 16 MiB. The same on an identical controller under the C driver. Then a function-level
# reset under I/O, on both.
. /guest/lib.sh

assign_drivers rnvme nvme
# The C driver needs its first admin command after the enable to time out here (60 s by
# default: a hung-task report on the debug kernel), then recovers.
insmod /lib/c/nvme-core.ko admin_timeout=5 && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko admin_timeout=5
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1

# bme_loss DRIVER CHARDEV DISK: the test on one controller.
bme_loss() {
	local drv=$1 pci cmd
	pci=$(bound_to "$drv" | head -1)
	cmd=$(pci_command "$pci")
	pci_command "$pci" $((cmd & ~4))
	check "${drv}_reset_without_bus_master" nvme reset "$2"
	expect_eq "${drv}_reset_restores_bus_master" 1 $((($(pci_command "$pci") >> 2) & 1))
	local why
	if fio --name=bme --filename="$3" --rw=randwrite --bs=4k --iodepth=16 \
		--ioengine=io_uring --direct=1 --size=16M --verify=crc32c --randseed=11 \
		--output="/tmp/fio-$drv.log" && why=$(fio_verified "/tmp/fio-$drv.log"); then
		pass "${drv}_io_after_reset"
	else
		fail "${drv}_io_after_reset" "$why"
	fi
	pci_command "$pci" "$cmd"
}

bme_loss rnvme /dev/rnvme0 /dev/rnvme0n1
expect_eq rnvme_state_live live "$(cat /sys/class/misc/rnvme0/state)"
bme_loss nvme /dev/nvme0 /dev/nvme0n1

# --- function-level reset under I/O ---------------------------------------------------
# An FLR (`echo 1 >/sys/bus/pci/devices/<BDF>/reset`) while fio writes and verifies 32
# deep: the driver stops the controller before the reset and brings it back after
# (reset_prepare/reset_done, as C's), so I/O pauses and resumes at once. fio verifies, no
# Abort reaches the device (no I/O timeout fired), the controller is enabled once (QEMU's
# trace), and the reset takes seconds, not the 61 s of two I/O timeouts and a reset it
# took before. The same on the C driver's controller.
flr() {
	local drv=$1 pci t0 t1 t2 rc why
	pci=$(bound_to "$drv" | head -1)
	trace_mark "${drv}_flr_begin" "$2"
	t0=$(date +%s)
	# verify_backlog: fio reads back and checks every 64 writes as it goes, across the FLR.
	fio --name=flr --filename="$2" --rw=randwrite --bs=4k --iodepth=32 --ioengine=io_uring \
		--direct=1 --size=32M --time_based --runtime=6 --verify=crc32c --verify_backlog=64 \
		--verify_fatal=1 --randseed=12 --output="/tmp/flr-$drv.log" 2>"/tmp/flr-$drv.err" &
	local fio=$!
	sleep 2
	echo 1 >"/sys/bus/pci/devices/$pci/reset"
	t1=$(date +%s)
	wait $fio
	rc=$?
	t2=$(date +%s)
	trace_mark "${drv}_flr_end" "$2"
	echo "$drv: FLR done $((t1 - t0)) s after fio started, fio took $((t2 - t0)) s"
	cat "/tmp/flr-$drv.err" >>"/tmp/flr-$drv.log"
	if why=$(fio_verified "/tmp/flr-$drv.log") && [ $rc -eq 0 ]; then
		pass "${drv}_io_verifies_across_flr"
	else
		fail "${drv}_io_verifies_across_flr" "fio exited $rc: $why"
	fi
	# The C driver's reset after an FLR takes about 1 s on the base kernel, 27 s on the
	# debug kernel (as its other resets there): its times are reported, not judged.
	if [ "$drv" = rnvme ]; then
		[ $((t1 - t0)) -le 5 ] && pass "${drv}_flr_returns_promptly" ||
			fail "${drv}_flr_returns_promptly" "$((t1 - t0 - 2)) s"
		[ $((t2 - t0)) -le 30 ] && pass "${drv}_io_resumes_after_flr" ||
			fail "${drv}_io_resumes_after_flr" "fio took $((t2 - t0)) s for 6 s of writes"
	fi
	# The reset after the FLR sends admin commands (Identify, Create I/O Queues) in the
	# window: the positive control that admin commands are recorded there.
	trace_absent "${drv}_no_abort_across_flr" "${drv}_flr_begin" "${drv}_flr_end" \
		"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " \
		"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
	trace_expect "${drv}_enabled_once_after_flr" "${drv}_flr_begin" "${drv}_flr_end" eq 1 \
		"pci_nvme_mmio_start_success"
}
flr rnvme /dev/rnvme0n1
expect_eq rnvme_live_after_flr live "$(cat /sys/class/misc/rnvme0/state)"
flr nvme /dev/nvme0n1
image_write host_image /dev/rnvme0n1 0 1
check rmmod rmmod rnvme
finish
