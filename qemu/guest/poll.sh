# SPDX-License-Identifier: GPL-2.0
# Polled queues: with poll_queues=1, io_uring IOPOLL (fio hipri) I/O goes to a queue created
# without an interrupt and completes through blk-mq's poll; data written that way reads
# back, and the interrupt counts of the other queues do not grow with it.
# Then read queues (write_queues=1), on rnvme and on the C driver with the same parameters
# (two identical controllers): the same split of queues and the same blk-mq maps, and
# QEMU's trace shows every write on the default queue and every read on a read queue.
. /guest/lib.sh

assign_drivers rnvme nvme
check insmod_poll_queues insmod /lib/rnvme.ko poll_queues=1
require_disk disk_ready /dev/rnvme0n1
dmesg | grep -qE 'rnvme0: [0-9]+ I/O queues of depth [0-9]+ on [0-9]+ MSI-X vector\(s\), 1 polled' &&
	pass one_polled_queue || fail one_polled_queue "$(dmesg | grep 'I/O queues')"
expect_eq io_poll_enabled 1 "$(cat /sys/block/rnvme0n1/queue/io_poll)"
# On the device: the polled queue (after the interrupt-driven ones) was created without
# interrupts, the others with (QEMU's trace; SeaBIOS's boot queues, cqid 1 without
# interrupts, are in this window too: hence the cqid).
nio=$(dmesg | sed -nE 's/.*rnvme0: ([0-9]+) I\/O queues .*, 1 polled.*/\1/p' | tail -1)
trace_mark poll_loaded /dev/rnvme0n1
trace_expect polled_cq_without_interrupts start poll_loaded eq 1 \
	"pci_nvme_create_cq create completion queue, addr=0x[0-9a-f]+, cqid=$((${nio:-0} + 1)), vector=[0-9]+, qsize=[0-9]+, qflags=1, ien=0\$"
trace_expect io_cqs_with_interrupts start poll_loaded eq "${nio:-0}" \
	"pci_nvme_create_cq create completion queue, addr=0x[0-9a-f]+, cqid=[0-9]+, vector=[0-9]+, qsize=[0-9]+, qflags=3, ien=1\$"
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

# --- read queues (write_queues) ------------------------------------------------------------
# With W write queues, C asks for one queue per CPU plus W (plus the polled ones) and splits
# those with interrupts into W default queues (writes, flushes, everything but reads) and the
# rest for reads, each set spread over every CPU; on this VM: 1 default, one read queue per
# CPU, 1 polled. Queue ids follow in that order: 1, then 2..cpus+1, then the polled one.
check insmod_write_queues insmod /lib/rnvme.ko write_queues=1 poll_queues=1
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko write_queues=1 poll_queues=1
require_disk write_queues_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1
# default/read/poll, as the C driver logs it.
c_split=$(dmesg | sed -nE 's|.*nvme0: ([0-9]+/[0-9]+/[0-9]+) default/read/poll queues.*|\1|p' | tail -1)
r_split=$(dmesg | sed -nE 's|.*rnvme0: ([0-9]+) I/O queues .*, ([0-9]+) polled, ([0-9]+) for reads only.*|\1 \2 \3|p' |
	tail -1 | awk '{print $1 - $3 "/" $3 "/" $2}')
expect_eq c_split_has_read_queues "1/$cpus/1" "$c_split"
expect_eq queue_split_as_c "${c_split:-none}" "${r_split:-none}"
# blk-mq's maps: each hardware context's type, counted.
grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
hctx_types() { cat /sys/kernel/debug/block/"$1"/hctx*/type 2>/dev/null | sort | uniq -c | tr -s ' \n' ' '; }
echo "hctx types: rnvme0n1 [$(hctx_types rnvme0n1)], nvme0n1 [$(hctx_types nvme0n1)]"
expect_eq hctx_types_as_c "$(hctx_types nvme0n1)" "$(hctx_types rnvme0n1)"
poll_qid=$((cpus + 2))
for drv in rnvme nvme; do
	disk=/dev/${drv}0n1
	trace_mark "${drv}_wq_begin" "$disk"
	# One writer per CPU (each its own 8 MiB), each reading back what it wrote; then polled
	# reads.
	out=$(fio --name=wq --filename="$disk" --ioengine=io_uring --direct=1 --rw=randwrite \
		--bs=4k --iodepth=4 --size=8M --numjobs=$cpus --offset_increment=8M \
		--cpus_allowed=0-$((cpus - 1)) --cpus_allowed_policy=split --verify=crc32c \
		--verify_fatal=1 --randseed=7 2>&1)
	rc=$?
	fio --name=wqpoll --filename="$disk" --ioengine=io_uring --hipri=1 --direct=1 \
		--rw=randread --bs=4k --iodepth=4 --size=4M --output=/dev/null || rc=1
	trace_mark "${drv}_wq_end" "$disk"
	[ $rc -eq 0 ] && pass "${drv}_write_queues_write_verify" ||
		fail "${drv}_write_queues_write_verify" "$(echo "$out" | tail -5)"
	[ $drv = rnvme ] && [ $rc -eq 0 ] && mark "RNVME-VERIFIED $((8 * cpus))MiB"
	io="pci_nvme_io_cmd cid [0-9]+ nsid 0x1 sqid"
	# Controls: the writes on the default queue, the reads on the others.
	trace_absent "${drv}_writes_only_on_the_default_queue" "${drv}_wq_begin" "${drv}_wq_end" \
		"$io ([2-9]|[1-9][0-9]+) opc 0x1 " "$io 1 opc 0x1 "
	trace_expect "${drv}_writes_on_the_default_queue" "${drv}_wq_begin" "${drv}_wq_end" \
		ge 1000 "$io 1 opc 0x1 "
	trace_absent "${drv}_no_read_on_the_default_queue" "${drv}_wq_begin" "${drv}_wq_end" \
		"$io 1 opc 0x2 " "$io ([2-9]|[1-9][0-9]+) opc 0x2 "
	for qid in $(seq 2 $((cpus + 1))); do
		trace_expect "${drv}_reads_on_read_queue_$((qid - 1))" "${drv}_wq_begin" "${drv}_wq_end" \
			ge 100 "$io $qid opc 0x2 "
	done
	trace_expect "${drv}_polled_reads_on_the_polled_queue" "${drv}_wq_begin" "${drv}_wq_end" \
		ge 100 "$io $poll_qid opc 0x2 "
done
image_write host_image /dev/rnvme0n1 0 1
check rmmod_write_queues rmmod rnvme
finish
