# SPDX-License-Identifier: GPL-2.0
# Logical blocks larger than a page (issue 17 item 3): two identical controllers, rnvme's
# and the C driver's, each with one namespace of 16 KiB blocks (QEMU logical_block_size=
# 16384). Both drivers make a disk of it (the 7.3 block layer takes blocks up to 64 KiB with
# large folios): its block sizes and capacity as C's; fio writes and verifies 16-64 KiB
# random writes; direct I/O smaller than a block is refused as C's; XFS with 16 KiB blocks
# (and ext4 where C's disk takes it) keeps files across a remount.
. /guest/lib.sh
R=/dev/rnvme0n1 C=/dev/nvme0n1

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_disk $R
require_disk c_driver_disk $C
# As C's, and as the QEMU options make them (scripts/test.sh): 16 KiB blocks, physical
# ones too (NPWG and AWUPF 0: C's physical block size and minimum I/O are the block size);
# QEMU's default MDTS 7: 512 KiB; 512 MiB.
for av in logical_block_size=16384 physical_block_size=16384 minimum_io_size=16384 \
	max_hw_sectors_kb=512; do
	a=${av%=*} v=${av#*=}
	expect_eq "${a}_as_c" "$v $v" \
		"$(cat /sys/block/nvme0n1/queue/$a) $(cat /sys/block/rnvme0n1/queue/$a)"
done
expect_eq logical_block_size 16384 "$(cat /sys/block/rnvme0n1/queue/logical_block_size)"
expect_eq size_as_c "536870912 536870912" "$(blockdev --getsize64 $C) $(blockdev --getsize64 $R)"

# fio: 16-64 KiB random writes verified, 16 deep, then read back by a second job.
for d in rnvme nvme; do
	dev=/dev/${d}0n1
	if fio --name=lbs --filename=$dev --ioengine=libaio --direct=1 --rw=randwrite \
		--bssplit=16k/50:32k/25:64k/25 --iodepth=16 --size=32M --verify=crc32c \
		--verify_fatal=1 --randseed=5 --output=/tmp/lbs-$d.log &&
		! grep -qE 'err=[ ]*[1-9]|verify: bad' /tmp/lbs-$d.log; then
		pass "${d}_fio_verify_16k_to_64k"
		[ $d = rnvme ] && mark "RNVME-VERIFIED 32MiB"
	else
		fail "${d}_fio_verify_16k_to_64k" "$(grep -iE 'err|verify' /tmp/lbs-$d.log | head -3)"
	fi
done
# dd: a 16 KiB direct round trip; 4 KiB direct I/O (smaller than a block) refused as C's.
head -c 65536 /dev/urandom >/tmp/pat
for d in rnvme nvme; do
	dev=/dev/${d}0n1
	dd if=/tmp/pat of=$dev bs=16k count=4 seek=100 oflag=direct 2>/dev/null &&
		dd if=$dev of=/tmp/back-$d bs=16k count=4 skip=100 iflag=direct 2>/dev/null &&
		cmp -s /tmp/pat /tmp/back-$d && pass "${d}_dd_16k_roundtrip" ||
		fail "${d}_dd_16k_roundtrip" "data differs or dd failed"
done
small() { /usr/bin/dd if=$1 of=/dev/null bs=4k count=1 iflag=direct 2>&1 | grep -oE 'Invalid argument|[0-9]+ bytes' | head -1; }
# Smaller than the logical block: the block layer refuses it (EINVAL) on both.
expect_eq small_direct_io_as_c "Invalid argument Invalid argument" "$(small $C) $(small $R)"
expect_eq small_direct_io_refused "Invalid argument" "$(small $R)"

# Filesystems with 16 KiB blocks (XFS wants 300 MB at least): a tree of files written, the filesystem remounted, the
# files compared. XFS must work on both; ext4 only as far as C's disk takes it.
mkdir -p /mnt
fs_roundtrip() { # DEV MKFS...
	dev=$1
	shift
	"$@" $dev >/tmp/mkfs.log 2>&1 || { echo "mkfs failed: $(tail -1 /tmp/mkfs.log)"; return; }
	mount $dev /mnt 2>/dev/null || { echo "mount failed"; return; }
	cp -r /guest /mnt/g && head -c 3000000 /dev/urandom >/mnt/big && cp /mnt/big /tmp/big &&
		umount /mnt && mount $dev /mnt && diff -r /guest /mnt/g >/dev/null &&
		cmp -s /mnt/big /tmp/big && echo ok || echo "contents differ"
	umount /mnt 2>/dev/null
}
expect_eq xfs_16k_blocks ok "$(fs_roundtrip $R mkfs.xfs -q -f -b size=16384)"
expect_eq c_xfs_16k_blocks ok "$(fs_roundtrip $C mkfs.xfs -q -f -b size=16384)"
c_ext4=$(fs_roundtrip $C mkfs.ext4 -q -F -b 16384)
echo "ext4 with 16 KiB blocks on the C driver's disk: $c_ext4"
# The 7.3 kernel's ext4 takes blocks larger than a page: C's disk keeps the files too.
expect_eq ext4_16k_blocks_as_c "ok ok" "$c_ext4 $(fs_roundtrip $R mkfs.ext4 -q -F -b 16384)"
# After the last mkfs (which discards and writes all over the disk), unmounted.
image_write host_image $R 0 1
check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
