# SPDX-License-Identifier: GPL-2.0
# Every field of the commands a driver submits, as the device fetches them: after each
# driver's requests the host saves the submission queues from guest memory (lib.sh's
# sq_dump, scripts/sqe.py), and each command is checked against the values the request and
# the NVMe specification give, then against the C driver's command for the same request on
# an identical controller. QEMU's trace names none of these fields but a read's LBA.
#
# Two controllers, each with namespace 1 of 8 TiB in 512-byte blocks (an LBA past 2^32
# needs the upper dword of SLBA), namespace 2 with protection information type 1 (PRINFO,
# the reference tag) and namespace 3 answering every command after 5 s (a timeout, and the
# Abort that follows it); rnvme on the first, then the C driver on the second, one at
# a time (a dump takes the rings of the controller enabled last).
. /guest/lib.sh

assign_drivers rnvme nvme
# Blocks past 2^32, 4 KiB apart; on namespace 2 the same blocks (the reference tag is the
# LBA's low 32 bits: 8192).
HI=$(((1 << 32) + 4096))
FUA=$((HI + 8))
BIG=$((HI + 2048))
WZ=$((HI + 4096))
PI=$(((1 << 32) + 8192))
dd if=/dev/urandom of=/tmp/blk bs=4k count=1 2>/dev/null
dd if=/dev/urandom of=/tmp/big bs=512k count=1 2>/dev/null

# requests DISK PI-DISK: the same requests through either driver's disks.
requests() {
	# A 4 KiB write, the same with O_DSYNC (the block layer sends it as FUA: the disks
	# advertise a volatile write cache and FUA; coreutils' dd, busybox's has no dsync), a
	# read of the first, a 512 KiB write
	# (NLB above 255; QEMU's MDTS is 512 KiB), a 64 KiB Write Zeroes.
	dd if=/tmp/blk of=$1 bs=4k seek=$((HI / 8)) count=1 oflag=direct 2>/dev/null ||
		echo "write to $1 failed"
	/usr/bin/dd if=/tmp/blk of=$1 bs=4k seek=$((FUA / 8)) count=1 oflag=direct,dsync 2>/dev/null ||
		echo "dsync write to $1 failed"
	dd if=$1 of=/tmp/r bs=4k skip=$((HI / 8)) count=1 iflag=direct 2>/dev/null ||
		echo "read of $1 failed"
	cmp -s /tmp/blk /tmp/r || echo "read back through $1 differs"
	dd if=/tmp/big of=$1 bs=512k seek=$((BIG / 1024)) count=1 oflag=direct 2>/dev/null ||
		echo "512k write to $1 failed"
	/usr/bin/blkdiscard -z -o $((WZ * 512)) -l 65536 $1 2>&1 || echo "write zeroes on $1 failed"
	# Protection information: a write and a read, the block layer generating and checking
	# the guard and reference tag.
	dd if=/tmp/blk of=$2 bs=4k seek=$((PI / 8)) count=1 oflag=direct 2>/dev/null ||
		echo "write to $2 failed"
	dd if=$2 of=/tmp/r bs=4k skip=$((PI / 8)) count=1 iflag=direct 2>/dev/null ||
		echo "read of $2 failed"
	cmp -s /tmp/blk /tmp/r || echo "read back through $2 differs"
}

# timed_out_read DISK: a read of namespace 3 (every command takes 5 s) with a 3 s timeout:
# the driver aborts it, and it completes before a second timeout would reset the
# controller. The command that follows the timeout, the Abort, stays in the admin queue.
timed_out_read() {
	echo 3000 >/sys/block/${1#/dev/}/queue/io_timeout
	dd if=$1 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
}

# expect_all DRV DUMP: the fields each request must have, whichever driver sent it.
expect_all() {
	sqe_expect ${1}_write_above_2e32 $2 opc=1 nsid=1 slba=$HI -- nlb=7 fua=0 prinfo=0 fuse=0
	sqe_expect ${1}_dsync_write_is_fua $2 opc=1 nsid=1 slba=$FUA -- nlb=7 fua=1
	sqe_expect ${1}_read_above_2e32 $2 opc=2 nsid=1 slba=$HI -- nlb=7 fua=0 prinfo=0
	sqe_expect ${1}_512k_write_nlb $2 opc=1 nsid=1 slba=$BIG -- nlb=1023
	sqe_expect ${1}_write_zeroes $2 opc=8 nsid=1 slba=$WZ -- nlb=127
	# PRCHK guard and reference tag (PRINFO 0101b), the reference tag the LBA's low dword.
	sqe_expect ${1}_pi_write_prinfo $2 opc=1 nsid=2 slba=$PI -- prinfo=5 ilbrt=8192 nlb=7
	sqe_expect ${1}_pi_read_prinfo $2 opc=2 nsid=2 slba=$PI -- prinfo=5 ilbrt=8192 nlb=7
}

# --- rnvme ---------------------------------------------------------------------------------
check insmod insmod /lib/rnvme.ko
require_disk rnvme_disk /dev/rnvme0n1
require_disk rnvme_pi_disk /dev/rnvme0n2
expect_eq rnvme_sectors_above_2e32 1 "$(($(blockdev --getsz /dev/rnvme0n1) > (1 << 32)))"
out=$(requests /dev/rnvme0n1 /dev/rnvme0n2)
expect_eq rnvme_requests_read_back "" "$out"
# The data of a write past 2^32 blocks where the host expects it in the image.
image_write host_image_above_2e32 /dev/rnvme0n1 0 1
timed_out_read /dev/rnvme0n3
sq_dump rnvme
sqe_aborts rnvme_abort_names_timed_out_read rnvme 3
expect_all rnvme rnvme
check rmmod rmmod rnvme

# --- the C driver, on the identical second controller ----------------------------------------
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
require_disk c_disk /dev/nvme0n1
require_disk c_pi_disk /dev/nvme0n2
# C names its disks in the order its parallel scan found the namespaces: by namespace id.
c_disk() {
	local d
	for d in /sys/block/nvme0n*; do
		[ "$(cat $d/nsid)" = $1 ] && echo /dev/${d##*/}
	done
}
C1=$(c_disk 1) C2=$(c_disk 2)
out=$(requests "$C1" "$C2")
expect_eq c_requests_read_back "" "$out"
timed_out_read "$(c_disk 3)"
sq_dump c
sqe_aborts c_abort_names_timed_out_read c 3
expect_all c c
# The same command from both drivers: every dword but the command id and data pointers.
for r in "write opc=1 nsid=1 slba=$HI" "dsync_write opc=1 nsid=1 slba=$FUA" \
	"read opc=2 nsid=1 slba=$HI" "512k_write opc=1 nsid=1 slba=$BIG" \
	"write_zeroes opc=8 nsid=1 slba=$WZ" "pi_write opc=1 nsid=2 slba=$PI" \
	"pi_read opc=2 nsid=2 slba=$PI"; do
	set -- $r
	name=$1
	shift
	sqe_same ${name}_as_c rnvme c "$@" -- "$@" -- opc fuse nsid cdw10 cdw11 cdw12 cdw13 cdw14 cdw15
done
check rmmod_c rmmod nvme
finish
