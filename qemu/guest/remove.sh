# SPDX-License-Identifier: GPL-2.0
# A PCI function removed through sysfs while I/O runs on it, and found again by a bus
# rescan, on rnvme beside the C driver on an identical controller: what C's
# `delete_controller` does for a fabrics controller (C offers no such attribute on a PCI
# function, nor does rnvme). For each driver: the function and its disk go, the reads and
# writes in flight end with an error within seconds (reads alone would not: a dead disk's
# size is 0 and a read there returns 0 bytes, no error, on both drivers), the removal
# deletes every I/O submission queue and notifies a shutdown (QEMU's trace, between marks
# read through the other driver's disk), the rescan binds the function to the same driver
# again, and data written before the removal reads back.
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
RP=$(bound_to rnvme | head -1)
CP=$(bound_to nvme | head -1)
[ -n "$RP" ] && [ -n "$CP" ] || abort insmod "not one controller per driver ('$RP' '$CP')"

# disk_of DRIVER PCI: namespace 1's disk of the controller DRIVER has on PCI (none if none).
disk_of() {
	local c
	case $1 in
	rnvme) c=$(rnvme_of "$2") && [ -n "$c" ] && echo "/dev/rnvme${c}n1" ;;
	nvme) for c in /sys/bus/pci/devices/"$2"/nvme/nvme[0-9]*; do
		[ -e "$c" ] && echo "/dev/${c##*/}n1"
	done ;;
	esac
}
# io_queues DRIVER PCI: how many I/O queues the controller has (its queue_count less the
# admin queue).
io_queues() {
	local c
	case $1 in
	rnvme) c=/sys/class/misc/rnvme$(rnvme_of "$2") ;;
	nvme) c=$(ls -d /sys/bus/pci/devices/"$2"/nvme/nvme[0-9]* | head -1) ;;
	esac
	echo $(($(cat "$c/queue_count") - 1))
}
reads_done() { awk '{ print $1 }' "/sys/block/${1#/dev/}/stat"; }
# rescan_to DRIVER PCI: a bus rescan that finds PCI again and binds it to DRIVER (both
# drivers take every NVMe controller: autoprobe is off while the function gets its
# driver_override).
rescan_to() {
	echo 0 >/sys/bus/pci/drivers_autoprobe
	echo 1 >/sys/bus/pci/rescan
	wait_for 10 test -e "/sys/bus/pci/devices/$2"
	echo "$1" >"/sys/bus/pci/devices/$2/driver_override"
	echo 1 >/sys/bus/pci/drivers_autoprobe
	echo "$2" >/sys/bus/pci/drivers_probe
}

# remove_rescan TAG DRIVER PCI OTHER: the steps above on DRIVER's function PCI, the trace
# marks read through OTHER (the other driver's disk, which stays).
remove_rescan() {
	local tag=$1 drv=$2 pci=$3 other=$4 disk nq r0 pid rc start took back
	disk=$(disk_of "$drv" "$pci")
	require_disk "${tag}_disk" "$disk"
	nq=$(io_queues "$drv" "$pci")
	dd if=/dev/urandom of="/tmp/$tag.data" bs=1M count=1 2>/dev/null
	check "${tag}_data_written" dd if="/tmp/$tag.data" of="$disk" bs=1M seek=8 count=1 oflag=direct
	r0=$(reads_done "$disk")
	# Clear of the 1 MiB at 8 MiB.
	fio --name="$tag" --filename="$disk" --rw=randrw --bs=4k --direct=1 --ioengine=io_uring \
		--iodepth=16 --offset=16M --size=32M --time_based --runtime=120 \
		--output="/tmp/$tag.fio.log" &
	pid=$!
	# Reads reaching the disk before the removal (fio starts slowly on the debug kernel).
	wait_for 30 sh -c "[ \$(awk '{print \$1}' /sys/block/${disk#/dev/}/stat) -gt $((r0 + 100)) ]"
	trace_mark "${tag}_begin" "$other"
	echo 1 >"/sys/bus/pci/devices/$pci/remove"
	trace_mark "${tag}_end" "$other"
	start=$(date +%s)
	wait $pid
	rc=$?
	took=$(($(date +%s) - start))
	if [ -e "/sys/bus/pci/devices/$pci" ] || [ -b "$disk" ]; then
		fail "${tag}_function_and_disk_gone" "$pci or $disk still there"
	else
		pass "${tag}_function_and_disk_gone"
	fi
	if [ $rc = 0 ]; then
		fail "${tag}_io_fails" "fio exited 0 on the removed disk"
	elif [ $took -gt 10 ]; then
		fail "${tag}_io_fails" "fio took $took s to end"
	else
		pass "${tag}_io_fails"
	fi
	trace_expect "${tag}_deletes_io_sqs" "${tag}_begin" "${tag}_end" eq "$nq" \
		'pci_nvme_del_sq deleting submission queue sqid=[0-9]+$'
	trace_expect "${tag}_notifies_shutdown" "${tag}_begin" "${tag}_end" eq 1 \
		'pci_nvme_mmio_shutdown_set'
	rescan_to "$drv" "$pci"
	expect_eq "${tag}_rescan_binds_same_driver" "$drv" \
		"$(basename "$(readlink "/sys/bus/pci/devices/$pci/driver")")"
	back=$(disk_of "$drv" "$pci")
	require_disk "${tag}_disk_back" "${back:-/dev/none}"
	expect_eq "${tag}_data_after_rescan" "$(sha256sum <"/tmp/$tag.data")" \
		"$(dd if="$back" bs=1M skip=8 count=1 iflag=direct 2>/dev/null | sha256sum)"
}

remove_rescan rnvme_remove rnvme "$RP" "$(disk_of nvme "$CP")"
remove_rescan c_remove nvme "$CP" "$(disk_of rnvme "$RP")"
image_write host_image "$(disk_of rnvme "$RP")" 0 1
kmemleak_plant
check rmmod sh -c 'rmmod nvme && rmmod nvme-core && rmmod rnvme'
finish
