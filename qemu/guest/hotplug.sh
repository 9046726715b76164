# SPDX-License-Identifier: GPL-2.0
# Removal of a controller while I/O runs on it, driven by the host over QMP (scripts/test.sh):
# every outstanding I/O ends with an error within seconds, the disk goes away, nothing oopses,
# and a controller added back later is probed. Controller 1 (nvme1) is the one removed.
. /guest/lib.sh

check insmod insmod /lib/rnvme.ko
# Both probed side by side: the instances are those of each PCI function (nvme1 is the
# second in PCI order), not their order.
O=$(rnvme_of "$(nvme_pci_devices | sort | sed -n 1p)")
V=$(rnvme_of "$(nvme_pci_devices | sort | sed -n 2p)")
[ -n "$O" ] && [ -n "$V" ] || abort disk_present "no rnvme controller on each PCI function (instances '$O' '$V')"
require_disk disk_present "/dev/rnvme${V}n1"
# The controller added back: the one bound to rnvme that is not rnvme$O.
readded() {
	local p i
	for p in $(bound_to rnvme); do
		i=$(rnvme_of "$p")
		[ -n "$i" ] && [ "$i" != "$O" ] && echo "$i"
	done
}
readded_live() {
	local i
	i=$(readded)
	[ -n "$i" ] && disk_live "/dev/rnvme${i}n1"
}
# rmmod while a disk is open is refused (the open disk holds the module: the kernel says
# EWOULDBLOCK to busybox's non-blocking unload), and harmless: the disk is held open, and
# rmmod is tried once fio's reads are reaching it (fio starts slowly on the debug kernel).
exec 3</dev/rnvme${O}n1
r0=$(awk '{print $1}' /sys/block/rnvme${O}n1/stat)
fio --name=hold --filename=/dev/rnvme${O}n1 --rw=randread --bs=4k --direct=1 --ioengine=io_uring \
	--iodepth=8 --time_based --runtime=4 --output=/tmp/hold.log &
hold=$!
wait_for 30 sh -c "[ \$(awk '{print \$1}' /sys/block/rnvme${O}n1/stat) -gt $((r0 + 100)) ]"
if out=$(rmmod rnvme 2>&1); then
	fail rmmod_refused_while_in_use "rmmod succeeded with I/O running"
elif echo "$out" | grep -q 'Resource temporarily unavailable' && lsmod | grep -q '^rnvme '; then
	pass rmmod_refused_while_in_use
else
	fail rmmod_refused_while_in_use "refused for another reason, or unloaded: $out"
fi
wait $hold
exec 3<&-
expect_eq io_unharmed_by_refused_rmmod 0 "$(grep -cE 'err=[ ]*[1-9]' /tmp/hold.log)"

fio --name=victim --filename=/dev/rnvme${V}n1 --rw=randrw --bs=4k --direct=1 --ioengine=io_uring \
	--iodepth=32 --time_based --runtime=120 --output=/tmp/victim.log &
fio_pid=$!
sleep 2
mark "RNVME-HOTPLUG-READY"
# The host now removes nvme1 (QMP device_del).
if wait_for 60 sh -c "! test -b /dev/rnvme${V}n1"; then pass disk_removed_with_controller; else
	fail disk_removed_with_controller "/dev/rnvme${V}n1 still there after 60 s"
fi
start=$(date +%s)
wait $fio_pid
rc=$?
took=$(($(date +%s) - start))
echo "fio on the removed disk exited $rc after $took s"
[ $rc != 0 ] && pass io_fails_on_removed_controller ||
	fail io_fails_on_removed_controller "fio exited 0"
[ $took -le 10 ] && pass outstanding_io_ends_within_seconds ||
	fail outstanding_io_ends_within_seconds "fio took $took s to end"
expect_eq other_controller_still_bound 1 "$(bound_to rnvme | count)"
check other_disk_still_works dd if=/dev/rnvme${O}n1 of=/dev/null bs=64k count=16 iflag=direct
mark "RNVME-HOTPLUG-REMOVED"
# The host adds the controller back (QMP device_add).
if wait_for 60 readded_live; then pass readded_controller_probed; else
	fail readded_controller_probed "no live disk of a second controller 60 s after device_add"
fi
check readded_disk_works dd if="/dev/rnvme$(readded)n1" of=/dev/null bs=64k count=16 iflag=direct
check rmmod rmmod rnvme
finish
