# SPDX-License-Identifier: GPL-2.0
# I/O path tests on rnvme disks: fio verify over block sizes, depths, engines, direct and
# buffered I/O; dd round trips; ext4; discard and write zeroes; two namespaces.
# Environment: NS (namespaces of controller 0), LBA (logical block size), QUICK=1 for the
# short matrix (debug kernel, special controllers), HOSTCHECK=1 to leave data for the host.
. /guest/lib.sh

# util-linux's, not busybox's applet (which has no -z): busybox sh prefers its applets.
BLKDISCARD=/usr/bin/blkdiscard
NS=${NS:-1}
LBA=${LBA:-512}
CPUS=$(grep -c ^processor /proc/cpuinfo)
DEV=/dev/rnvme0n1

check insmod insmod /lib/rnvme.ko ${RNVME_ARGS:-}
require_disk disk_appears $DEV
trace_mark io_begin $DEV
expect_eq logical_block_size "$LBA" "$(blockdev --getss $DEV)"
# The disk's capacity is the namespace's size as the device reports it (Identify Namespace
# NSZE, through the passthrough ioctl).
nsze=$(nvme id-ns $DEV | sed -n 's/^nsze *: *//p')
expect_eq capacity_matches_device "$((${nsze:-0} * LBA))" "$(blockdev --getsize64 $DEV)"
expect_eq disks_for_namespaces "$NS" "$(ls /dev | grep -cE '^rnvme0n[0-9]+$')"
if [ -n "${EXPECT_QUEUES:-}" ]; then
	if dmesg | grep -qE "rnvme0: $EXPECT_QUEUES"; then pass queue_setup_fallback; else
		fail queue_setup_fallback "want '$EXPECT_QUEUES', got: $(dmesg | grep -oE 'rnvme0: [0-9]+ I/O queues.*')"
	fi
fi

# fio_verify NAME FIO-ARGS...: writes with verification headers, drops the page cache, then
# reads everything back from the device and verifies it in a second run.
fio_verify() {
	name=$1 why=""
	shift
	log=/tmp/fio-$name.log
	# Each phase takes seconds: one that waits for I/O timeouts (30 s each) ends the
	# scenario (bounded) instead of running into the VM's cap.
	if ! bounded "fio_$name" 120 fio --name="$name" --filename=$DEV --output=$log \
		--do_verify=0 "$@" || grep -q "err=[ ]*[1-9]" $log; then
		fail "fio_$name" "write phase: $(grep -iE 'err|error' $log | head -3 | tr '\n' ' ')"
		return
	fi
	sync
	echo 3 >/proc/sys/vm/drop_caches
	if bounded "fio_$name" 120 fio --name="$name" --filename=$DEV --output=$log.v \
		--verify_only --verify_fatal=1 "$@" && why=$(fio_verified $log.v); then
		bytes=$(sed -nE 's/.*io=([0-9.]+[KMG]i?B).*/\1/p' $log.v | head -1)
		echo "fio $name verified ${bytes:-?}"
		[ -n "$bytes" ] && mark "RNVME-VERIFIED $bytes"
		pass "fio_$name"
	else
		fail "fio_$name" "verify phase: ${why:-$(grep -iE 'verify|err' $log.v | head -3 | tr '\n' ' ')}"
	fi
}

# DEEP=N: the driver was loaded with a deep io_queue_depth (above the old contiguous list
# pages' limit of 1024); the controller must have been given queues of N entries and N - 1
# requests must be usable at once, each with a PRP list page of its own (64 KiB writes).
if [ -n "${DEEP:-}" ]; then
	trace_mark deep_begin $DEV
	echo none >/sys/block/rnvme0n1/queue/scheduler
	expect_eq deep_nr_requests "$((DEEP - 1))" "$(cat /sys/block/rnvme0n1/queue/nr_requests)"
	fio_verify deep_uring_64k_qd$((DEEP - 1)) --ioengine=io_uring --direct=1 --rw=randwrite \
		--bs=64k --iodepth=$((DEEP - 1)) --iodepth_batch_submit=64 --size=128M --randseed=7 \
		--verify=crc32c
	trace_mark deep_end $DEV
	# QEMU's trace of Create I/O Submission Queue (QSIZE is 0's based).
	trace_expect deep_sq_created start deep_begin ge 1 \
		"pci_nvme_create_sq .*qsize=$((DEEP - 1)),"
fi

S=${FIO_SIZE:-24M}
common="--size=$S --numjobs=$CPUS --offset_increment=$S --group_reporting --randseed=42"
if [ "${QUICK:-0}" = 1 ]; then
	fio_verify uring_rand_4k_qd32 --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
		--iodepth=32 --verify=crc32c $common
	fio_verify psync_seq_1m --ioengine=psync --direct=1 --rw=write --bs=1M \
		--verify=crc32c $common
	fio_verify uring_mixed_bs --ioengine=io_uring --direct=1 --rw=randwrite \
		--bsrange=$LBA-256k --iodepth=16 --verify=crc32c $common
else
	# Block sizes 512 B..1 MiB, depths 1..64, both engines, direct and buffered, random and
	# sequential, crc32c and a fixed pattern.
	fio_verify psync_rand_lba --ioengine=psync --direct=1 --rw=randwrite --bs=$LBA \
		--verify=crc32c --size=4M --numjobs=$CPUS --offset_increment=4M --group_reporting
	fio_verify uring_rand_4k_qd64 --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
		--iodepth=64 --verify=crc32c $common
	fio_verify uring_seq_1m_qd8 --ioengine=io_uring --direct=1 --rw=write --bs=1M \
		--iodepth=8 --verify=crc32c $common
	fio_verify psync_seq_128k_pattern --ioengine=psync --direct=1 --rw=write --bs=128k \
		--verify=pattern --verify_pattern=0x5aa5c33c $common
	fio_verify uring_rand_64k_qd16_pattern --ioengine=io_uring --direct=1 --rw=randwrite \
		--bs=64k --iodepth=16 --verify=pattern --verify_pattern=0x0f1e2d3c $common
	# Block sizes that are not page multiples: buffers after the first start inside pages.
	fio_verify uring_unaligned_bs --ioengine=io_uring --direct=1 --rw=randwrite \
		--bs=$((LBA * 7)) --iodepth=16 --verify=crc32c $common
	fio_verify uring_mixed_bs --ioengine=io_uring --direct=1 --rw=randwrite \
		--bsrange=$LBA-1M --iodepth=16 --verify=crc32c $common
	fio_verify psync_buffered_seq --ioengine=psync --direct=0 --rw=write --bs=256k \
		--verify=crc32c $common
	fio_verify uring_buffered_rand --ioengine=io_uring --direct=0 --rw=randwrite --bs=4k \
		--iodepth=32 --verify=crc32c $common
fi
# Submissions in batches (io_uring_enter with 16 at a time: a plug's list, blk-mq's
# queue_rqs): verified, and each batch ends with one commit of the SQ tail per hardware
# queue (without queue_rqs, blk-mq commits a batch apart only after an error).
# (An I/O scheduler would take the plug's requests instead: none, whatever the kernel's default.)
echo none >/sys/block/${DEV#/dev/}/queue/scheduler
# One batch of 16 reads reaches the device at once (its doorbell rung by the commit), with
# no Abort or reset while it runs: a batch left without a doorbell waits for a timeout (the
# batch is given 20 s, a fraction of the 30 s I/O timeout, to fail before it).
trace_mark commit_begin $DEV
within batch_completes 20 fio --name=commit --filename=$DEV --ioengine=io_uring --direct=1 \
	--rw=randread --bs=4k --iodepth=16 --iodepth_batch_submit=16 \
	--iodepth_batch_complete_min=16 --number_ios=16 --size=1M --output=/dev/null
trace_mark commit_end $DEV
trace_expect batch_reaches_device commit_begin commit_end ge 16 \
	"pci_nvme_read cid [0-9]+ nsid 1 nlb [0-9]+ count 4096 lba "
trace_absent batch_without_abort commit_begin commit_end \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ " start io_begin
trace_absent batch_without_reset commit_begin commit_end "pci_nvme_mmio_start_success" \
	"pci_nvme_mmio_start_success" start io_begin
k0=$(stat_sum 0 commits)
fio_verify uring_batch_4k_qd32 --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
	--iodepth=32 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16 \
	--verify=crc32c --size=4M --numjobs=$CPUS --offset_increment=4M --group_reporting \
	--randseed=42
expect_eq batches_committed 1 "$(($(stat_sum 0 commits) - k0 >= 10))"

# --- dd round trips, direct both ways ---------------------------------------------------
# 128 KiB: the largest page-aligned transfer whose PRP list fits a small list (31 entries);
# 256 KiB: one that needs a list page.
dd if=/dev/urandom of=/tmp/rand bs=1M count=8 2>/dev/null
for bs in $(printf '%s\n' $LBA 4096 65536 131072 262144 1048576 | sort -nu); do
	count=$((8 * 1048576 / bs))
	if dd if=/tmp/rand of=$DEV bs=$bs count=$count oflag=direct 2>/dev/null &&
		dd if=$DEV of=/tmp/back bs=$bs count=$count iflag=direct 2>/dev/null &&
		cmp -s /tmp/rand /tmp/back; then
		mark "RNVME-VERIFIED 8MiB"
		pass "dd_direct_roundtrip_bs$bs"
	else
		fail "dd_direct_roundtrip_bs$bs" "data differs or dd failed"
	fi
done

# --- discard and write zeroes ------------------------------------------------------------
# The device says (Identify Namespace DLFEAT, read through the passthrough ioctl: the
# device's own bytes) that deallocated blocks read as zeroes: QEMU's namespaces do.
dlfeat=$(nvme id-ns $DEV | sed -n 's/^dlfeat *: *//p')
expect_eq device_says_deallocated_blocks_read_zeroes 1 "$((${dlfeat:-0} & 7))"
zeroes() { [ "$(dd if=$DEV bs=1M skip=$1 count=$2 iflag=direct 2>/dev/null | tr -d '\0' | wc -c)" = 0 ]; }
dd if=/tmp/rand of=$DEV bs=1M seek=16 count=8 oflag=direct 2>/dev/null
if $BLKDISCARD -o $((16 << 20)) -l $((8 << 20)) $DEV; then
	pass blkdiscard
	if zeroes 16 8; then pass discard_reads_zeroes; else
		fail discard_reads_zeroes "the device says deallocated blocks read as zeroes; they do not"
	fi
else
	fail blkdiscard "blkdiscard failed"
	fail discard_reads_zeroes "blkdiscard failed"
fi
expect_eq discard_limit_advertised yes \
	"$([ "$(cat /sys/block/rnvme0n1/queue/discard_max_bytes)" -gt 0 ] && echo yes || echo no)"
dd if=/tmp/rand of=$DEV bs=1M seek=32 count=8 oflag=direct 2>/dev/null
# blkdiscard -z falls back to writing zero pages when the disk has no Write Zeroes: the
# host checks QEMU saw Write Zeroes commands covering the range, and no write.
trace_mark zeroes_begin $DEV
if $BLKDISCARD -z -o $((32 << 20)) -l $((8 << 20)) $DEV && zeroes 32 8; then
	pass write_zeroes_reads_zeroes
else
	fail write_zeroes_reads_zeroes "$BLKDISCARD -z failed or data left"
fi
trace_mark zeroes_end $DEV
trace_expect write_zeroes_cover_the_range zeroes_begin zeroes_end sumeq $((8 * 1048576 / LBA)) \
	"pci_nvme_write cid [0-9]+ opname 'NVME_NVM_CMD_WRITE_ZEROES' nsid 1 nlb ([0-9]+) "
# Control: the Write Zeroes commands are pci_nvme_write lines too.
trace_absent write_zeroes_no_data_writes zeroes_begin zeroes_end \
	"pci_nvme_write cid [0-9]+ opname 'NVME_NVM_CMD_WRITE' " \
	"pci_nvme_write cid [0-9]+ opname 'NVME_NVM_CMD_[A-Z_]+' "
# Data around the discarded range is untouched.
dd if=/tmp/rand of=/tmp/rand-head bs=1M count=4 2>/dev/null
dd if=/tmp/rand of=/tmp/rand-tail bs=1M skip=5 count=3 2>/dev/null
if dd if=/tmp/rand of=$DEV bs=1M seek=48 count=8 oflag=direct 2>/dev/null &&
	$BLKDISCARD -o $((52 << 20)) -l $((1 << 20)) $DEV &&
	dd if=$DEV bs=1M skip=48 count=4 iflag=direct 2>/dev/null | cmp -s - /tmp/rand-head &&
	dd if=$DEV bs=1M skip=53 count=3 iflag=direct 2>/dev/null | cmp -s - /tmp/rand-tail; then
	pass discard_keeps_neighbours
else
	fail discard_keeps_neighbours "data next to the discarded range changed"
fi

# Non-contiguous discards submitted together (one io_uring batch) are merged by the block
# layer into one request: it must become one multi-range Dataset Management command (the
# host checks the QEMU trace) and discard exactly those ranges.
dd if=/tmp/rand of=$DEV bs=1M count=8 oflag=direct 2>/dev/null
trace_mark batch_begin $DEV
out=$(discard-batch $DEV 8 65536 1048576 2>&1)
rc=$?
trace_mark batch_end $DEV
# In QEMU's trace: one Dataset Management command, with 8 ranges, exactly these.
trace_expect discard_batch_one_command batch_begin batch_end eq 1 "pci_nvme_dsm nr"
trace_expect discard_batch_8_ranges batch_begin batch_end eq 1 "pci_nvme_dsm nr 8 "
i=0
while [ $i -lt 8 ]; do
	trace_expect "discard_batch_range_$i" batch_begin batch_end eq 1 \
		"pci_nvme_dsm_deallocate slba $((i * 1048576 / LBA)) nlb $((65536 / LBA))\$"
	i=$((i + 1))
done
if [ $rc = 0 ]; then
	# Ranges: 64 KiB at 0, 1 MiB, ..., 7 MiB. Each must read back as zeroes and the 64 KiB
	# after each must be untouched.
	ok=1
	i=0
	while [ $i -lt 8 ]; do
		if [ "$(dd if=$DEV bs=64k skip=$((i * 16)) count=1 iflag=direct 2>/dev/null | tr -d '\0' | wc -c)" != 0 ]; then
			fail discard_batch_ranges "range $i not deallocated"
			ok=0
		fi
		a=$(dd if=$DEV bs=64k skip=$((i * 16 + 1)) count=1 iflag=direct 2>/dev/null | md5sum)
		b=$(dd if=/tmp/rand bs=64k skip=$((i * 16 + 1)) count=1 2>/dev/null | md5sum)
		if [ "$a" != "$b" ]; then
			fail discard_batch_ranges "data after range $i changed"
			ok=0
		fi
		i=$((i + 1))
	done
	[ $ok = 1 ] && pass discard_batch_ranges
else
	fail discard_batch_ranges "discard-batch: $out"
fi

# --- write cache and FUA are advertised when the controller has a volatile cache --------
expect_eq write_cache_advertised "write back" "$(cat /sys/block/rnvme0n1/queue/write_cache)"
expect_eq fua_advertised 1 "$(cat /sys/block/rnvme0n1/queue/fua)"

# --- ext4: mkfs, copy a tree, umount, fsck, compare --------------------------------------
mkdir -p /mnt/t /tmp/tree
i=0
while [ $i -lt 40 ]; do
	mkdir -p /tmp/tree/d$((i % 7))
	dd if=/dev/urandom of=/tmp/tree/d$((i % 7))/f$i bs=$((i * 3000 + 1)) count=1 2>/dev/null
	i=$((i + 1))
done
cp -r /guest /bin /tmp/tree/ 2>/dev/null
if mkfs.ext4 -q -F $DEV && mount $DEV /mnt/t && cp -a /tmp/tree /mnt/t/ && umount /mnt/t; then
	pass ext4_mkfs_copy_umount
	out=$(fsck.ext4 -fn $DEV 2>&1)
	if [ $? = 0 ]; then pass ext4_fsck_clean; else fail ext4_fsck_clean "$(echo "$out" | tail -3)"; fi
	echo 3 >/proc/sys/vm/drop_caches
	if mount -o ro $DEV /mnt/t && diff -r /tmp/tree /mnt/t/tree >/dev/null; then
		pass ext4_contents_match
	else
		fail ext4_contents_match "files differ after remount"
	fi
	umount /mnt/t 2>/dev/null
	# Free scattered extents and trim them: merged discards become multi-range DSMs.
	mount $DEV /mnt/t && rm -f /mnt/t/tree/d[0246]/* && sync
	check ext4_fstrim /usr/bin/fstrim /mnt/t
	umount /mnt/t 2>/dev/null
	out=$(fsck.ext4 -fn $DEV 2>&1)
	if [ $? = 0 ]; then pass ext4_fsck_clean_after_trim; else
		fail ext4_fsck_clean_after_trim "$(echo "$out" | tail -3)"
	fi
else
	fail ext4_mkfs_copy_umount "mkfs/mount/cp/umount failed"
fi

# --- two namespaces, each its own disk with its own data --------------------------------
if [ "$NS" -ge 2 ]; then
	dd if=/dev/urandom of=/tmp/n1 bs=1M count=4 2>/dev/null
	dd if=/dev/urandom of=/tmp/n2 bs=1M count=4 2>/dev/null
	dd if=/tmp/n1 of=/dev/rnvme0n1 bs=1M oflag=direct 2>/dev/null
	dd if=/tmp/n2 of=/dev/rnvme0n2 bs=1M oflag=direct 2>/dev/null
	if dd if=/dev/rnvme0n1 bs=1M count=4 iflag=direct 2>/dev/null | cmp -s - /tmp/n1 &&
		dd if=/dev/rnvme0n2 bs=1M count=4 iflag=direct 2>/dev/null | cmp -s - /tmp/n2; then
		pass namespaces_keep_their_own_data
	else
		fail namespaces_keep_their_own_data "data crossed namespaces"
	fi
fi

# --- data for the host to verify from the image after the VM exits ------------------------
if [ "${HOSTCHECK:-0}" = 1 ]; then
	tgt=/dev/rnvme0n$NS
	if fio --name=hostcheck --filename=$tgt --rw=randwrite --bs=64k --size=32M \
		--ioengine=io_uring --iodepth=16 --direct=1 --verify=crc32c --do_verify=0 \
		--randseed=1234 --output=/tmp/hostcheck.log; then
		mark "RNVME-HOSTCHECK-WRITTEN"
		pass hostcheck_written
	else
		fail hostcheck_written "fio failed"
	fi
else
	# Without the 32 MiB the host verifies, 1 MiB it finds in the image.
	image_write host_image /dev/rnvme0n$NS 0 $NS
fi

# Nothing in this script may time out: after the probe, QEMU saw no controller enable (a
# reset) and no Abort. Controls: the boot's enables (an enable after io_begin would be the
# failure), and the admin commands after io_begin (nvme id-ns, rmmod's queue deletions).
trace_absent no_reset_during_io io_begin end "pci_nvme_mmio_start_success" \
	"pci_nvme_mmio_start_success" start end
trace_absent no_abort_during_io io_begin end "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
check rmmod rmmod rnvme
finish
