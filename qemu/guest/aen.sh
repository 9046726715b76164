# SPDX-License-Identifier: GPL-2.0
# Asynchronous events: namespace 2 of an NVM subsystem starts detached. Attaching and
# detaching it (Namespace Attachment) makes QEMU post a namespace-changed event; rnvme
# must add and remove the disk on its own, before and after a controller reset (which
# must send a new Asynchronous Event Request).
. /guest/lib.sh
R=/dev/rnvme0

# ns_attach SEL [NSID]: attach (SEL 0) or detach (1) namespace NSID (default 2) through a
# raw admin command: nvme-cli's attach-ns may also ask for a rescan, which would hide a
# missing event.
ns_attach() {
	printf '\001\000\000\000' >/tmp/cl
	dd if=/dev/zero bs=4092 count=1 >>/tmp/cl 2>/dev/null
	nvme admin-passthru $R -o 0x15 -n "${2:-2}" --cdw10="$1" -l 4096 -w -i /tmp/cl >/dev/null
}
events() { dmesg | grep -c 'asynchronous event: namespace attribute changed'; }

# Without native multipath, each namespace is a disk of the controller's own, whose queue a
# scan adds to the controller's tag set (head disks attached and detached: mpath-*, storm-*).
check insmod insmod /lib/rnvme.ko multipath=0
require_disk disk_ready ${R}n1
check detached_namespace_has_no_disk test ! -e ${R}n2
check detached_namespace_has_no_generic_device test ! -e /dev/rng0n2
expect_eq allocated_namespaces_listed "$(printf '[   0]:0x1\n[   1]:0x2\n[   2]:0x3')" \
	"$(nvme list-ns $R -a)"

check attach_command ns_attach 0
check event_adds_disk wait_for 10 disk_live ${R}n2
check event_adds_generic_device test -c /dev/rng0n2
expect_eq one_event_logged 1 "$(events)"
dd if=/dev/urandom of=/tmp/p bs=1M count=4 2>/dev/null
check write_attached dd if=/tmp/p of=${R}n2 bs=1M oflag=direct

# Detach while the disk and its generic device are open: the disk goes, the open files get
# errors, nothing leaks.
exec 3<${R}n2 4</dev/rng0n2
check detach_ns nvme detach-ns $R -n 2 -c 0
check event_removes_open_disk wait_for 10 test ! -e ${R}n2
check event_removes_generic_device test ! -e /dev/rng0n2
if dd if=${R}n2 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; then
	fail removed_disk_unreadable "read of a removed namespace succeeded"
else
	pass removed_disk_unreadable
fi

# After a reset the controller has forgotten the request: rnvme must send a new one.
check nvme_reset nvme reset $R
check attach_after_reset ns_attach 0
check event_after_reset_adds_disk wait_for 10 disk_live ${R}n2
# The removed disk's handles, still open, stay bound to the disk they opened, as C's: with
# a new disk for the same namespace id, a command through them fails with ENODEV instead
# of reaching the new one (through which the same command reads).
expect_eq removed_disk_ioctl_enodev "res=-19 res2=0" "$(uring-cmd -i fd:3 read 2>&1)"
expect_eq removed_generic_uring_enodev "res=-19 res2=0" "$(uring-cmd fd:4 read 2>&1)"
expect_eq new_disk_ioctl_reads "res=0 res2=0" "$(uring-cmd -i ${R}n2 read 2>&1)"
exec 3<&- 4<&-
expect_eq three_events_logged 3 "$(events)"
check data_kept_while_detached sh -c "dd if=${R}n2 bs=1M count=4 iflag=direct 2>/dev/null | cmp - /tmp/p"
check ns_rescan_keeps_disks sh -c "nvme ns-rescan $R && test -b ${R}n1 -a -b ${R}n2"

# A namespace found while a reset brings the controller back: debugfs restart_delay_ms holds
# the restart 3 s once the controller is enabled (the admin queue works), before its I/O
# queues exist; namespace 2 is attached meanwhile, and the attach command's own rescan (its
# effects) adds its disk. The new queue must stay quiesced with the others until the reset
# is done: its first read (the partition table) must not reach a queue the controller does
# not have yet, and the reset's unquiesce must find it quiesced (blk-mq warns otherwise).
dbg=/sys/kernel/debug/rnvme0
check detach_before_restart nvme detach-ns $R -n 2 -c 0
check detached_before_restart wait_for 10 test ! -e ${R}n2
restart_waiting() { [ "$(cat $dbg/restart_delay_ms)" = 0 ]; }
echo 3000 >$dbg/restart_delay_ms
nvme reset $R >/tmp/reset.out 2>&1 &
rpid=$!
check restart_held wait_for 10 restart_waiting
check attach_during_restart ns_attach 0
wait $rpid
expect_eq reset_beside_attach "0 " "$? $(cat /tmp/reset.out)"
check disk_found_during_restart_live wait_for 10 disk_live ${R}n2
check disk_found_during_restart_reads sh -c "dd if=${R}n2 bs=1M count=4 iflag=direct 2>/dev/null | cmp - /tmp/p"
check disk_found_during_restart_writes dd if=/tmp/p of=${R}n2 bs=1M oflag=direct conv=fsync
expect_eq no_unquiesce_warning 0 "$(dmesg | grep -c 'blk_mq_unquiesce_queue')"

# A scan waiting for I/O holds up no lookup. Namespace 3 answers each read after 3 s
# (null-co latency): adding its disk (the partition table's reads) keeps the scan lock for
# seconds. Meanwhile a passthrough read of namespace 1 through its block device (which
# looks its disk up) and a command naming a namespace that has no disk answer at once, as
# C's, which reads its namespace list under SRCU. rnvme used to wait for the whole scan.
ns_attach 0 3 >/tmp/attach3.out 2>&1 &
apid=$!
check slow_disk_being_added wait_for 20 test -e /sys/block/rnvme0n3
t0=$(now_s)
r1=$(uring-cmd -i ${R}n1 read 2>&1)
t1=$(now_s)
r2=$(uring-cmd -i $R nsid 2>&1)
t2=$(now_s)
if kill -0 $apid 2>/dev/null; then scan=running; else scan=over; fi
expect_eq lookup_beside_slow_scan "res=0 res2=0" "$r1"
expect_eq missing_ns_beside_slow_scan "res=-22 res2=0" "$r2"
# The control: both ran inside the scan (the attach command returns after its rescan).
expect_eq lookups_inside_slow_scan running "$scan"
took=$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
if awk -v t="$took" 'BEGIN { exit !(t < 1.5) }'; then pass lookups_not_behind_scan
else fail lookups_not_behind_scan "the two commands took ${took}s beside the scan"; fi
wait $apid
expect_eq slow_ns_attached 0 "$?"
check slow_disk_added wait_for 60 disk_live ${R}n3
check slow_ns_detach ns_attach 1 3
check slow_disk_removed wait_for 60 test ! -e ${R}n3

image_write host_image ${R}n1 0 1
check rmmod rmmod rnvme
finish
