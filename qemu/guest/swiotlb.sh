# SPDX-License-Identifier: GPL-2.0
# Every DMA bounced (swiotlb=force on the kernel command line), as on machines whose
# devices cannot reach all memory or with confidential-computing guests. rnvme must tell
# bounce buffering to keep each buffer's offset in its page (PRP entries after the first
# address whole pages) and keep transfers within what one bounce mapping holds, as the
# C driver does: its max_hw_sectors_kb equals the C driver's on an identical controller,
# and direct I/O of odd sizes, buffered I/O and ext4 verify.
. /guest/lib.sh

grep -qw "swiotlb=force" /proc/cmdline && pass swiotlb_forced ||
	fail swiotlb_forced "not on the command line: $(cat /proc/cmdline)"
assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1
# What one bounce mapping holds: 128 slots of 2 KiB, less the 4 KiB the minimum alignment
# mask (NVME_CTRL_PAGE_SIZE - 1) may skip (swiotlb_max_mapping_size): 252 KiB, under MDTS.
expect_eq max_hw_sectors_kb_as_c_driver "252 252" \
	"$(cat /sys/block/nvme0n1/queue/max_hw_sectors_kb) $(cat /sys/block/rnvme0n1/queue/max_hw_sectors_kb)"

# verify NAME FIO-ARGS...: writes, drops the page cache, reads back and verifies.
verify() {
	local name=$1
	shift
	if fio --name="$name" --filename=/dev/rnvme0n1 --output=/tmp/$name.log --do_verify=0 \
		--verify=crc32c --size=32M --randseed=5 "$@" && sync &&
		echo 3 >/proc/sys/vm/drop_caches &&
		fio --name="$name" --filename=/dev/rnvme0n1 --output=/tmp/$name.v.log --verify_only \
			--verify_fatal=1 --verify=crc32c --size=32M --randseed=5 "$@" &&
		! grep -qE "err=[ ]*[1-9]|verify: bad" /tmp/$name.log /tmp/$name.v.log; then
		pass "fio_$name"
		mark "RNVME-VERIFIED 32MiB"
	else
		fail "fio_$name" "$(grep -hiE 'verify|err=' /tmp/$name.log /tmp/$name.v.log | head -2 | tr '\n' ' ')"
	fi
}
verify bounce_direct_mixed_bs --ioengine=io_uring --direct=1 --rw=randwrite --bsrange=512-1M \
	--iodepth=16
verify bounce_direct_odd_bs --ioengine=io_uring --direct=1 --rw=randwrite --bs=3584 \
	--iodepth=16
# Buffered writes: requests of several page cache pages, each its own segment.
verify bounce_buffered_8k --ioengine=psync --direct=0 --rw=randwrite --bs=8k
verify bounce_buffered_seq_1m --ioengine=psync --direct=0 --rw=write --bs=1M

# ext4: metadata and data through the page cache, read back after a remount.
dd if=/dev/urandom of=/tmp/file bs=1M count=16 2>/dev/null
if mkfs.ext4 -q -F /dev/rnvme0n1 && mkdir -p /mnt/fs && mount /dev/rnvme0n1 /mnt/fs &&
	cp /tmp/file /mnt/fs/file && umount /mnt/fs && mount /dev/rnvme0n1 /mnt/fs &&
	cmp /tmp/file /mnt/fs/file; then
	pass ext4_file_round_trip
else
	fail ext4_file_round_trip "mkfs, mount, copy or compare failed"
fi
umount /mnt/fs 2>/dev/null
# After mkfs and the unmount: nothing writes the disk afterwards.
image_write host_image /dev/rnvme0n1 0 1
check rmmod rmmod rnvme
finish
