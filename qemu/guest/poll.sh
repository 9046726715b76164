# SPDX-License-Identifier: GPL-2.0
# Polled queues: with poll_queues=1, io_uring IOPOLL (fio hipri) I/O goes to a queue created
# without an interrupt and completes through blk-mq's poll; data written that way reads
# back, and the interrupt counts of the other queues do not grow with it.
. /guest/lib.sh

check insmod_poll_queues insmod /lib/rnvme.ko poll_queues=1
require_disk disk_ready /dev/rnvme0n1
dmesg | grep -qE 'rnvme0: [0-9]+ I/O queues of depth [0-9]+ on [0-9]+ MSI-X vector\(s\), 1 polled' &&
	pass one_polled_queue || fail one_polled_queue "$(dmesg | grep 'I/O queues')"
expect_eq io_poll_enabled 1 "$(cat /sys/block/rnvme0n1/queue/io_poll)"
# Interrupts of every rnvme0 I/O queue, summed over every CPU's column.
cpus=$(grep -c ^processor /proc/cpuinfo)
irqs() {
	grep -E 'rnvme0q[1-9]' /proc/interrupts |
		awk -v n=$cpus '{for (i = 2; i <= n + 1; i++) s += $i} END {print s + 0}'
}
before=$(irqs)
out=$(fio --name=poll --filename=/dev/rnvme0n1 --ioengine=io_uring --hipri=1 --direct=1 \
	--rw=randwrite --bs=4k --iodepth=8 --size=16M --verify=crc32c --verify_fatal=1 \
	--randseed=42 2>&1)
rc=$?
# Commands the disk completed (fio's disk stats, ios=reads/writes).
ios=$(echo "$out" | sed -nE 's|.*ios=([0-9]+)/([0-9]+).*|\1 \2|p' | head -1 | awk '{print $1 + $2}')
after=$(irqs)
echo "polled fio: exit $rc, $ios I/Os, queue interrupts $before -> $after"
[ $rc -eq 0 ] && pass polled_write_verify || fail polled_write_verify "$(echo "$out" | tail -5)"
# No interrupt at all, on any queue: the polled queue has none, and no I/O went elsewhere.
[ "${ios:-0}" -gt 1000 ] && [ $((after - before)) -eq 0 ] && pass polled_io_without_interrupts ||
	fail polled_io_without_interrupts "$ios I/Os, $((after - before)) interrupts"
[ $rc -eq 0 ] && mark "RNVME-VERIFIED 16MiB"
# debugfs counts them as polled completions (writes and verify reads: at least ios).
polled=$(stat_sum 0 polled)
echo "debugfs polled completions: $polled"
[ "$polled" -ge "${ios:-1}" ] && pass debugfs_polled_counted ||
	fail debugfs_polled_counted "$polled polled completions for $ios I/Os"
# Interrupt-driven I/O still works next to it.
check interrupt_io dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=64 iflag=direct
check rmmod rmmod rnvme
# A bad value is refused with a message.
if insmod /lib/rnvme.ko poll_queues=5000 2>/dev/null; then
	fail bad_poll_queues_refused "insmod succeeded"; rmmod rnvme
else
	dmesg | grep -q 'poll_queues' && pass bad_poll_queues_refused ||
		fail bad_poll_queues_refused "no message"
fi
finish
