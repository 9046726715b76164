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
# want MODE: that completion, as C's nvme_ns_uring_cmd and the block layer give it (so that
# the same failure on both does not pass): a too long read does not fit MDTS (512 KiB), the
# block layer's map refuses it; QEMU answers an opcode it lacks with Invalid Command Opcode
# and Do Not Retry (0x4001, 16385).
want() {
	case $1 in
	small) echo "res=-95 res2=0" ;;
	nsid | long) echo "res=-22 res2=0" ;;
	op | admin) echo "res=-25 res2=0" ;;
	badaddr) echo "res=-14 res2=0" ;;
	badop) echo "res=16385 res2=0" ;;
	*) echo "res=0 res2=0" ;;
	esac
}
for m in read small nsid op admin long badaddr badop vec; do
	w=$(want $m)
	expect_eq "uring_${m}_as_c" "$w|$w" "$(uring-cmd $CG $m 2>&1)|$(uring-cmd $G $m 2>&1)"
done
expect_eq uring_read_completes "res=0 res2=0" "$(uring-cmd $G read 2>&1)"
# A vectored read reads what a plain one does (fio wrote the first block).
expect_eq uring_vec_reads_as_plain_read "$(uring-cmd $G read sum 2>&1)" "$(uring-cmd $G vec sum 2>&1)"
# A polled ring (hipri) without polled queues: the commands complete by interrupt.
job uring_polled_ring_verify $G $URING --rw=randwrite --bs=4k --iodepth=8 --hipri=1
expect_eq state_live_after_uring live "$(cat /sys/class/misc/rnvme0/state)"

# Registered buffers (IORING_URING_CMD_FIXED): fio's, verified; one read, plain and
# vectored, reads what a plain read does; the same completions as C's.
job uring_fixedbufs_verify $G $URING --rw=randwrite --bs=4k --iodepth=16 --fixedbufs=1
job c_uring_fixedbufs_verify $CG $URING --rw=randwrite --bs=4k --iodepth=16 --fixedbufs=1
plain=$(uring-cmd $G read sum 2>&1)
expect_eq uring_fixed_read_as_plain "$plain" "$(uring-cmd -f $G read sum 2>&1)"
expect_eq uring_fixed_vec_read_as_plain "$plain" "$(uring-cmd -f $G vec sum 2>&1)"
for m in read vec write badop; do
	w=$(want $m)
	expect_eq "uring_fixed_${m}_as_c" "$w|$w" "$(uring-cmd -f $CG $m 2>&1)|$(uring-cmd -f $G $m 2>&1)"
done
# NVME_IOCTL_IO64_CMD_VEC: a vectored read through the ioctl reads the same.
expect_eq ioctl_vec_read_as_plain "$plain" "$(uring-cmd -i $G vec sum 2>&1)"
expect_eq ioctl_vec_as_c "res=0 res2=0|res=0 res2=0" \
	"$(uring-cmd -i $CG vec 2>&1)|$(uring-cmd -i $G vec 2>&1)"

# Admin commands through io_uring on the controller's device (NVME_URING_CMD_ADMIN, _VEC),
# plain, vectored, registered: the Identify data the ioctl reads, completions as C's.
idc=$(uring-cmd -i -c /dev/rnvme0 $G idctrl sum 2>&1)
case "$idc" in "res=0 res2=0 sum="*) pass ioctl_identify_reads ;;
	*) fail ioctl_identify_reads "$idc" ;; esac
expect_eq uring_admin_identify_as_ioctl "$idc" "$(uring-cmd -c /dev/rnvme0 $G idctrl sum 2>&1)"
expect_eq uring_admin_vec_as_ioctl "$idc" "$(uring-cmd -c /dev/rnvme0 $G admvec sum 2>&1)"
expect_eq uring_admin_fixed_as_ioctl "$idc" "$(uring-cmd -f -c /dev/rnvme0 $G idctrl sum 2>&1)"
expect_eq uring_admin_fixed_vec_as_ioctl "$idc" \
	"$(uring-cmd -f -c /dev/rnvme0 $G admvec sum 2>&1)"
# Each completes; Arbitration reads QEMU's default, no limit on the burst (7).
for m in idctrl admvec getlog getfeat; do
	w="res=0 res2=0"
	[ $m = getfeat ] && w="res=0 res2=7"
	expect_eq "uring_admin_${m}_as_c" "$w|$w" \
		"$(uring-cmd -c /dev/nvme0 $CG $m 2>&1)|$(uring-cmd -c /dev/rnvme0 $G $m 2>&1)"
done

# Who may send what (C's nvme_cmd_allowed), through io_uring and the ioctls, as root and
# without CAP_SYS_ADMIN, through files opened read-write and read-only: every outcome as
# C's, and the rules themselves on rnvme (reads open to a reader, writes to a writer,
# Identify open, logs privileged, features the driver keeps refused to all).
chmod 0666 $G $CG /dev/rnvme0 /dev/nvme0
# access_want MODE WHO OPEN: the outcome C's nvme_cmd_allowed and QEMU give (so that the
# same failure on both does not pass): features the driver keeps refused to all (EACCES);
# vendor commands, the namespace list, logs and features need CAP_SYS_ADMIN, and root's
# vendor command reaches QEMU, which lacks it (Invalid Command Opcode, DNR: 16385); Write,
# Flush and Write Zeroes change blocks (QEMU's effects log: LBCC), refused to a user
# through a read-only file; everything else completes (Arbitration: QEMU's default, 7).
access_want() {
	case $1:$2 in
	setkato:* | setnq:*) echo "res=-13 res2=0" ;;
	vendor:root) echo "res=16385 res2=0" ;;
	vendor:user | idlist:user | getlog:user | getfeat:user) echo "res=-13 res2=0" ;;
	write:user | flush:user | wzeroes:user)
		if [ $3 = ro ]; then echo "res=-13 res2=0"; else echo "res=0 res2=0"; fi ;;
	getfeat:root) echo "res=0 res2=7" ;;
	*) echo "res=0 res2=0" ;;
	esac
}
for via in uring ioctl; do
	for who in root user; do
		for open in rw ro; do
			f=""
			[ $via = ioctl ] && f="$f -i"
			[ $who = user ] && f="$f -u"
			[ $open = ro ] && f="$f -r"
			for m in read write flush wzeroes vendor idctrl idns idlist getlog getfeat \
				setkato setnq; do
				w=$(access_want $m $who $open)
				expect_eq "access_${m}_${via}_${who}_${open}_as_c" "$w|$w" \
					"$(uring-cmd $f -c /dev/nvme0 $CG $m 2>&1)|$(uring-cmd $f -c /dev/rnvme0 $G $m 2>&1)"
			done
		done
	done
done
R="-c /dev/rnvme0 $G"
expect_eq access_user_reads "res=0 res2=0" "$(uring-cmd -u -r $R read 2>&1)"
expect_eq access_user_ro_write_refused "res=-13 res2=0" "$(uring-cmd -u -r $R write 2>&1)"
expect_eq access_user_rw_writes "res=0 res2=0" "$(uring-cmd -u $R write 2>&1)"
expect_eq access_user_ro_wzeroes_refused "res=-13 res2=0" "$(uring-cmd -u -r $R wzeroes 2>&1)"
expect_eq access_user_vendor_refused "res=-13 res2=0" "$(uring-cmd -u $R vendor 2>&1)"
expect_eq access_user_identify "res=0 res2=0" "$(uring-cmd -u -r $R idctrl 2>&1)"
expect_eq access_user_ns_list_refused "res=-13 res2=0" "$(uring-cmd -u $R idlist 2>&1)"
expect_eq access_user_log_refused "res=-13 res2=0" "$(uring-cmd -u $R getlog 2>&1)"
expect_eq access_root_log "res=0 res2=0" "$(uring-cmd $R getlog 2>&1)"
expect_eq access_root_kato_refused "res=-13 res2=0" "$(uring-cmd $R setkato 2>&1)"
expect_eq access_root_nq_refused "res=-13 res2=0" "$(uring-cmd -i $R setnq 2>&1)"
# A partition's block device: passthrough there is privileged (it would escape the
# partition), the whole disk's is not. One MBR partition, LBA 2048 on, 4096 sectors.
mbr() {
	dd if=/dev/zero of=$1 bs=512 count=1 conv=notrunc 2>/dev/null
	printf '\000\000\000\000\203\000\000\000\000\010\000\000\000\020\000\000' |
		dd of=$1 bs=1 seek=446 conv=notrunc 2>/dev/null
	printf '\125\252' | dd of=$1 bs=1 seek=510 conv=notrunc 2>/dev/null
	blockdev --rereadpt $1
}
mbr /dev/rnvme0n1 && mbr /dev/nvme0n1
require_disk partition /dev/rnvme0n1p1
require_disk c_partition /dev/nvme0n1p1
chmod 0666 /dev/rnvme0n1 /dev/rnvme0n1p1 /dev/nvme0n1 /dev/nvme0n1p1
# A read completes, but a user's through the partition (EACCES).
for d in n1 n1p1; do
	for who in root user; do
		f="-i" w="res=0 res2=0"
		[ $who = user ] && f="-i -u"
		[ $d$who = n1p1user ] && w="res=-13 res2=0"
		expect_eq "access_block_${d}_${who}_as_c" "$w|$w" \
			"$(uring-cmd $f /dev/nvme0$d read 2>&1)|$(uring-cmd $f /dev/rnvme0$d read 2>&1)"
	done
done
expect_eq access_user_partition_refused "res=-13 res2=0" "$(uring-cmd -i -u /dev/rnvme0n1p1 read 2>&1)"
expect_eq access_user_whole_disk_reads "res=0 res2=0" "$(uring-cmd -i -u /dev/rnvme0n1 read 2>&1)"

check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'

# Polled queues: on a polled ring io_uring polls the commands (uring_cmd_iopoll) and they
# go to the polled queue, which has no interrupt: fio's hipri jobs verify on both drivers,
# rnvme's queues take no interrupt meanwhile and its polled completions count them.
assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko poll_queues=1
check insmod_poll_queues insmod /lib/rnvme.ko poll_queues=1
require_disk polled_rnvme_disk /dev/rnvme0n1
require_disk polled_c_driver_disk /dev/nvme0n1
cpus=$(grep -c ^processor /proc/cpuinfo)
irqs() {
	grep -E 'rnvme0q[1-9]' /proc/interrupts |
		awk -v n=$cpus '{for (i = 2; i <= n + 1; i++) s += $i} END {print s + 0}'
}
before=$(irqs) polled_before=$(stat_sum 0 polled)
job uring_iopoll_verify $G $URING --rw=randwrite --bs=4k --iodepth=16 --hipri=1
# Commands fio issued (a generic device has no disk statistics): "issued rwts: total=R,W,T,A".
ios=$(sed -nE 's|.*issued rwts: total=([0-9]+),([0-9]+),([0-9]+).*|\1 \2 \3|p' \
	/tmp/uring_iopoll_verify.log | head -1 | awk '{print $1 + $2 + $3}')
after=$(irqs) polled=$(($(stat_sum 0 polled) - polled_before))
echo "polled io_uring_cmd: $ios I/Os, queue interrupts $before -> $after, $polled polled"
[ "${ios:-0}" -gt 1000 ] && [ $((after - before)) -eq 0 ] && pass uring_iopoll_without_interrupts ||
	fail uring_iopoll_without_interrupts "$ios I/Os, $((after - before)) interrupts"
[ "$polled" -ge "${ios:-1}" ] && pass uring_iopoll_completions_polled ||
	fail uring_iopoll_completions_polled "$polled polled completions for $ios I/Os"
job uring_iopoll_fixedbufs_verify $G $URING --rw=randwrite --bs=4k --iodepth=16 --hipri=1 \
	--fixedbufs=1
job c_uring_iopoll_verify $CG $URING --rw=randwrite --bs=4k --iodepth=16 --hipri=1
expect_eq uring_iopoll_read_as_c "res=0 res2=0|res=0 res2=0" \
	"$(uring-cmd -p $CG read 2>&1)|$(uring-cmd -p $G read 2>&1)"
expect_eq uring_iopoll_read_as_plain "$(uring-cmd $G read sum 2>&1)" \
	"$(uring-cmd -p $G read sum 2>&1)"
# An admin command on a polled ring (the controller's device polls nothing): it completes
# by interrupt, Arbitration QEMU's default (7).
expect_eq uring_iopoll_admin_as_c "res=0 res2=7|res=0 res2=7" \
	"$(uring-cmd -p -c /dev/nvme0 $CG getfeat 2>&1)|$(uring-cmd -p -c /dev/rnvme0 $G getfeat 2>&1)"
image_write host_image /dev/rnvme0n1 0 1
check rmmod_polled sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
