# SPDX-License-Identifier: GPL-2.0
# io_uring passthrough (NVME_URING_CMD_IO) on the namespaces' generic devices: fio's
# io_uring_cmd engine writes and verifies through /dev/rng0n1, the block device reads the
# same data back, and the same jobs run on the C driver's /dev/ng<N>n1 of an identical
# controller. Environment: SIZE (fio's size per job, default 16M).
. /guest/lib.sh
SIZE=${SIZE:-16M}

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1
G=/dev/rng0n1 CG=/dev/ng0n1
check generic_device test -c $G
check c_generic_device test -c $CG

# job NAME DEV EXTRA...: a fio job through DEV; passes if it verified everything.
job() {
	name=$1 dev=$2
	shift 2
	if fio --name="$name" --filename="$dev" --size="$SIZE" --verify=crc32c --verify_fatal=1 \
		--randseed=11 --output="/tmp/$name.log" "$@" &&
		! grep -qE 'err=[ ]*[1-9]|verify: bad' "/tmp/$name.log"; then
		pass "$name"
		mark "RNVME-VERIFIED ${SIZE}iB"
	else
		fail "$name" "$(grep -iE 'err|verify|fio:' "/tmp/$name.log" 2>/dev/null | head -3) $(tail -2 "/tmp/$name.log" 2>/dev/null)"
	fi
}
URING='--ioengine=io_uring_cmd --cmd_type=nvme'

# 4 KiB random writes 32 deep, verified through io_uring, then read back through the block
# device (same job, verify only, libaio).
job uring_4k_qd32_verify $G $URING --rw=randwrite --bs=4k --iodepth=32
job block_reads_uring_4k_writes /dev/rnvme0n1 --ioengine=libaio --direct=1 --rw=randwrite \
	--bs=4k --iodepth=32 --verify_only
# Sequential 128 KiB writes, and a mix of sizes.
job uring_128k_verify $G $URING --rw=write --bs=128k --iodepth=8
job uring_mixed_sizes_verify $G $URING --rw=randwrite --bssplit=4k/40:16k/30:64k/20:128k/10 \
	--iodepth=16
# Written through the block device, read and verified through io_uring.
job block_writes_4k /dev/rnvme0n1 --ioengine=libaio --direct=1 --rw=randwrite --bs=4k \
	--iodepth=16 --randseed=12 --do_verify=0
job uring_reads_block_writes $G $URING --rw=randwrite --bs=4k --iodepth=16 --randseed=12 \
	--verify_only
# The same on the C driver's generic device.
job c_uring_4k_qd32_verify $CG $URING --rw=randwrite --bs=4k --iodepth=32
job c_uring_128k_verify $CG $URING --rw=write --bs=128k --iodepth=8
# One command at a time (qemu/helpers/uring-cmd.c): the completion of each case as through
# the C driver's generic device: a read; a ring without 128-byte SQEs and 32-byte CQEs
# (EOPNOTSUPP); a vectored read; another namespace's id (EINVAL); an unknown operation and an admin command
# on a namespace (ENOTTY); a transfer beyond the limit (EINVAL); an unmapped buffer
# (EFAULT); an opcode the controller lacks (its NVMe status).
for m in read small nsid op admin long badaddr badop vec; do
	expect_eq "uring_${m}_as_c" "$(uring-cmd $CG $m 2>&1)" "$(uring-cmd $G $m 2>&1)"
done
expect_eq uring_read_completes "res=0 res2=0" "$(uring-cmd $G read 2>&1)"
# A vectored read reads what a plain one does (fio wrote the first block).
expect_eq uring_vec_reads_as_plain_read "$(uring-cmd $G read sum 2>&1)" "$(uring-cmd $G vec sum 2>&1)"
# A polled ring (hipri): io_uring completes the commands by interrupt, rnvme offering no
# polling of them yet (as io_uring does for any device without uring_cmd_iopoll).
job uring_polled_ring_verify $G $URING --rw=randwrite --bs=4k --iodepth=8 --hipri=1
expect_eq state_live_after_uring live "$(cat /sys/class/misc/rnvme0/state)"

check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
