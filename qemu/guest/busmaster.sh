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
	fio_write_verify "${drv}_io_after_reset" "$3" 16M 11
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

# --- a controller that hiccups ---------------------------------------------------------
# Memory Space Enable cleared for a second (a stray setpci, a PCI error) while an I/O
# passthrough waits and a driver admin command is sent (a hwmon temperature read): neither
# reaches the device. The admin command times out (admin_timeout 5 s) and the driver
# resets the controller, which takes the passthrough back: it fails with EINTR, as C's
# cancelled commands, and everything works afterwards. rnvme used to wedge for good: its
# reset waited for the disk list the passthrough held while it waited for its I/O, whose
# timeout only re-armed while the controller was resetting. QEMU's trace: the controller
# enabled once (the reset). The same on the C driver's controller.
hiccup() {
	local drv=$1 disk=$2 state=$3 pci cmd hw pt hr rc took
	pci=$(bound_to "$drv" | head -1)
	cmd=$(pci_command "$pci")
	hw=$(hwmon_of "$pci")
	trace_mark "${drv}_hiccup_begin" "$disk"
	pci_command "$pci" $((cmd & ~2))
	local t0
	t0=$(now_s)
	nvme io-passthru "$disk" --opcode=2 --namespace-id=1 --data-len=4096 --read \
		--cdw10=2048 --cdw12=7 >"/tmp/pt-$drv.out" 2>&1 &
	pt=$!
	sleep 0.5
	cat "$hw/temp1_input" >"/tmp/hw-$drv.out" 2>&1 &
	hr=$!
	sleep 1
	pci_command "$pci" "$cmd"
	if wait_for 90 sh -c "! kill -0 $pt 2>/dev/null"; then
		wait $pt
		rc=$?
		took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
		pass "${drv}_hiccup_passthrough_returns"
		echo "$drv: the passthrough returned after ${took}s, exit $rc: $(tail -1 "/tmp/pt-$drv.out")"
		if [ "$rc" = 0 ]; then
			fail "${drv}_hiccup_passthrough_fails" "it succeeded: $(tail -1 "/tmp/pt-$drv.out")"
		elif grep -q 'Interrupted system call' "/tmp/pt-$drv.out"; then
			pass "${drv}_hiccup_passthrough_fails"
		else
			fail "${drv}_hiccup_passthrough_fails" "not EINTR: $(tail -1 "/tmp/pt-$drv.out")"
		fi
	else
		fail "${drv}_hiccup_passthrough_returns" "still waiting after 90 s, state $(cat "$state")"
		fail "${drv}_hiccup_passthrough_fails" "it never returned"
		kill $pt 2>/dev/null
	fi
	wait $hr
	echo "$drv: the temperature read during the hiccup: $(tail -1 "/tmp/hw-$drv.out")"
	if wait_for 30 grep -q live "$state"; then pass "${drv}_live_after_hiccup"
	else fail "${drv}_live_after_hiccup" "state $(cat "$state")"; fi
	expect_eq "${drv}_hwmon_after_hiccup" 49850 "$(cat "$hw/temp1_input" 2>&1)"
	fio_write_verify "${drv}_io_after_hiccup" "$disk" 4M 13
	trace_mark "${drv}_hiccup_end" "$disk"
	trace_expect "${drv}_hiccup_resets_once" "${drv}_hiccup_begin" "${drv}_hiccup_end" eq 1 \
		"pci_nvme_mmio_start_success"
}
hiccup rnvme /dev/rnvme0n1 /sys/class/misc/rnvme0/state
hiccup nvme /dev/nvme0n1 /sys/class/nvme/nvme0/state

# --- memory decoding off at a reset ----------------------------------------------------
# Memory Space Enable cleared and left so, then a controller reset from user space
# (`nvme reset`): the reset turns memory decoding back on, as C's does in every reset
# (pci_enable_device_mem), stops the controller it could not reach and brings it back:
# live, Memory Space Enable set, data verified, one enable in QEMU's trace. rnvme used to
# find the registers out of reach and declare the controller dead (fio EIO).
decode_off_reset() {
	local drv=$1 ctrl=$2 disk=$3 state=$4 pci cmd
	pci=$(bound_to "$drv" | head -1)
	cmd=$(pci_command "$pci")
	trace_mark "${drv}_decode_off_begin" "$disk"
	pci_command "$pci" $((cmd & ~2))
	check "${drv}_reset_with_decode_off" nvme reset "$ctrl"
	if wait_for 30 grep -q live "$state"; then pass "${drv}_live_after_decode_off_reset"
	else fail "${drv}_live_after_decode_off_reset" "state $(cat "$state")"; fi
	expect_eq "${drv}_memory_decode_restored" 2 $(($(pci_command "$pci") & 2))
	fio_write_verify "${drv}_io_after_decode_off_reset" "$disk" 4M 15
	trace_mark "${drv}_decode_off_end" "$disk"
	trace_expect "${drv}_decode_off_reset_enables_once" "${drv}_decode_off_begin" \
		"${drv}_decode_off_end" eq 1 "pci_nvme_mmio_start_success"
	pci_command "$pci" "$cmd"
}
decode_off_reset rnvme /dev/rnvme0 /dev/rnvme0n1 /sys/class/misc/rnvme0/state
decode_off_reset nvme /dev/nvme0 /dev/nvme0n1 /sys/class/nvme/nvme0/state

# --- a reset beside a command whose doorbell was lost -----------------------------------
# A user admin command (Identify, 30 s timeout) sent while a reset holds its restart (debugfs
# restart_delay_ms, 8 s: the controller answers admin commands, its I/O queues are not back)
# and Memory Space is off for a second: the controller misses its doorbell. The reset goes
# on beside it and is done in seconds, as C's, whose admin commands are tags of a blk-mq
# queue that wait for nobody; its next doorbell write covers the command's entry too, which
# then completes with its data. rnvme used to run one admin command at a time: the reset
# waited out the stalled command's whole timeout, which then failed. (C has no hold: rnvme
# only.)
lost_user_command() {
	local pci cmd dbg=/sys/kernel/debug/rnvme0 state=/sys/class/misc/rnvme0/state
	local rpid upid rc t0 took
	pci=$(bound_to rnvme | head -1)
	cmd=$(pci_command "$pci")
	echo 8000 >$dbg/restart_delay_ms
	t0=$(now_s)
	nvme reset /dev/rnvme0 >/tmp/lr.out 2>&1 &
	rpid=$!
	check restart_held_for_lost_command wait_for 10 \
		sh -c "[ \"\$(cat $dbg/restart_delay_ms)\" = 0 ]"
	pci_command "$pci" $((cmd & ~2))
	nvme admin-passthru /dev/rnvme0 --opcode=6 --cdw10=1 --data-len=4096 --read \
		--timeout=30000 >/tmp/lu.out 2>&1 &
	upid=$!
	sleep 1
	# Still waiting: the controller did not see it (else the test shows nothing).
	if kill -0 $upid 2>/dev/null; then pass lost_command_waits
	else fail lost_command_waits "it ended with Memory Space off: $(tail -1 /tmp/lu.out)"; fi
	pci_command "$pci" "$cmd"
	wait $rpid
	rc=$?
	took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%d", b - a }')
	expect_eq reset_beside_lost_command "0 " "$rc $(cat /tmp/lr.out)"
	if [ "$took" -lt 20 ]; then pass reset_not_behind_lost_command
	else fail reset_not_behind_lost_command "the reset took ${took}s (its hold: 8 s; the command's timeout: 30 s)"; fi
	wait $upid
	rc=$?
	# Identify Controller's data starts with the PCI vendor id (QEMU's: 1b36).
	if [ "$rc" = 0 ] && grep -q '^0000: 36 1b' /tmp/lu.out; then pass lost_command_completes
	else fail lost_command_completes "exit $rc: $(head -3 /tmp/lu.out | tr '\n' ' ')"; fi
	if wait_for 30 grep -q live "$state"; then pass live_after_lost_command
	else fail live_after_lost_command "state $(cat "$state")"; fi
	fio_write_verify io_after_lost_command /dev/rnvme0n1 4M 17
}
lost_user_command
image_write host_image /dev/rnvme0n1 0 1
check rmmod rmmod rnvme
finish
