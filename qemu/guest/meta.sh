# SPDX-License-Identifier: GPL-2.0
# Metadata and protection information (issue 17 item 2): two identical controllers, rnvme's
# and the C driver's, each with eight namespaces of different metadata formats (QEMU ms=,
# mset=, pi=, pil=, pif=; 512-byte blocks):
#   1 ms=8 type 1   2 ms=8 type 3   3 ms=16 type 1 64-bit guard   4 ms=16 type 1 (PI last)
#   5 ms=16 type 2 (PI first)   6 ms=8 without PI   7 ms=8 interleaved type 1 (PRACT only)
#   8 ms=8 interleaved without PI (no block I/O).
# For each: the integrity profile and capacity as C's; fio writes and verifies (the block
# layer generating and checking the PI, the device checking it too); the metadata the
# device stored for blocks written through the block device, read through each generic
# device (passthrough with a metadata buffer), is C's, byte for byte; Write Zeroes leaves
# readable blocks; a block written through passthrough with a bad guard reads back as an
# integrity error (EILSEQ), not as data, as through C's.
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
wait_for 20 test -c /dev/rng0n8
require_disk rnvme_disk /dev/rnvme0n1
# C names its disks (and generic devices) in scan order: by nsid.
for n in 1 2 3 4 5 6 7 8; do wait_for 20 sh -c "grep -qx $n /sys/block/nvme0n*/nsid"; done
cdisk() { for f in /sys/block/nvme0n*/nsid; do [ "$(cat $f)" = $1 ] && basename ${f%/nsid}; done; }
ms_of() { case $1 in 3 | 4 | 5) echo 16 ;; *) echo 8 ;; esac; }
# as_c NAME C-ANSWER RNVME-ANSWER PATTERN: rnvme's answer is C's, and matches PATTERN (a
# case pattern: what the device must give), so that the same failure on both does not pass.
as_c() {
	case "$3" in
	$4) expect_eq "$1" "$2" "$3" ;;
	*) fail "$1" "got '$3' (C: '$2'), not $4" ;;
	esac
}
# meta_want N ATTR: what namespace N's disk shows (C's nvme_init_integrity, the 7.3 block
# layer), so that two equal wrong answers do not pass: PI of type 1 or 2 has a 2-byte tag,
# of type 3 a 6-byte one (64-bit guard: EXT-DIF); metadata without PI: nop; namespace 7's
# interleaved PI (PRACT) gives no integrity profile (format none, no generate/verify).
# 64 MiB of 512-byte blocks of 8 or 16 bytes of metadata: QEMU's NSZE is 64 MiB / (512 + ms).
meta_want() {
	case $2 in
	format)
		case $1 in
		1 | 4 | 5) echo T10-DIF-TYPE1-CRC ;;
		2) echo T10-DIF-TYPE3-CRC ;;
		3) echo EXT-DIF-TYPE1-CRC64 ;;
		6) echo nop ;;
		*) echo none ;;
		esac ;;
	tag_size) case $1 in 2) echo 6 ;; 6 | 7) echo 0 ;; *) echo 2 ;; esac ;;
	protection_interval_bytes) if [ $1 = 7 ]; then echo 0; else echo 512; fi ;;
	read_verify | write_generate) if [ $1 = 7 ]; then echo 0; else echo 1; fi ;;
	size) echo $((67108864 / (512 + $(ms_of $1)))) ;;
	logical_block_size) echo 512 ;;
	esac
}

for n in 1 2 3 4 5 6 7; do
	R=rnvme0n$n C=$(cdisk $n)
	require_disk "rnvme_ns${n}_disk" /dev/$R
	for a in integrity/format integrity/tag_size integrity/protection_interval_bytes \
		integrity/read_verify integrity/write_generate size queue/logical_block_size; do
		w=$(meta_want $n ${a##*/})
		expect_eq "ns${n}_${a##*/}_as_c" "$w|$w" "$(cat /sys/block/$C/$a 2>&1)|$(cat /sys/block/$R/$a 2>&1)"
	done
done
expect_eq ns1_format T10-DIF-TYPE1-CRC "$(cat /sys/block/rnvme0n1/integrity/format)"
expect_eq ns3_format EXT-DIF-TYPE1-CRC64 "$(cat /sys/block/rnvme0n3/integrity/format)"
expect_eq ns6_format nop "$(cat /sys/block/rnvme0n6/integrity/format)"
expect_eq ns7_format none "$(cat /sys/block/rnvme0n7/integrity/format)"
# Namespace 8: no block I/O (C's disk has capacity 0, rnvme has none), the generic device
# on both: passthrough reads the interleaved blocks (data and metadata) as C's.
C8=$(cdisk 8)
expect_eq c_ns8_capacity 0 "$(cat /sys/block/$C8/size)"
check ns8_no_block_device sh -c '! test -e /dev/rnvme0n8'
check ns8_generic_device test -c /dev/rng0n8
rd8() { nvme read $1 -s 0 -c 1 -z 1040 -d /tmp/ext-$2 >/dev/null 2>&1 && sha256sum </tmp/ext-$2; }
# Never written: two blocks of zeroes, data and metadata (2 x 520 bytes).
z8=$(head -c 1040 /dev/zero | sha256sum)
expect_eq ns8_passthrough_read_as_c "$z8|$z8" "$(rd8 /dev/ng${C8#nvme} c)|$(rd8 /dev/rng0n8 r)"

# fio: 4-64 KiB random writes verified, 16 deep, on every namespace with block I/O. The
# debug kernel writes a quarter as much: its checkers see every path in the first MiBs, and
# generating and checking the protection information under KASAN is what takes the time.
meta_mib=16
[ "${RNVME_FLAVOUR:-}" = debug ] && meta_mib=4
for n in 1 2 3 4 5 6 7; do
	for d in rnvme nvme; do
		dev=/dev/rnvme0n$n
		[ $d = nvme ] && dev=/dev/$(cdisk $n)
		fio --name=meta --filename=$dev --ioengine=libaio --direct=1 --rw=randwrite \
			--bssplit=4k/50:16k/25:64k/25 --iodepth=16 --size=${meta_mib}M --verify=crc32c \
			--verify_fatal=1 --randseed=$n --output=/tmp/meta-$d.log 2>>/tmp/meta-$d.log
		rc=$?
		if why=$(fio_verified /tmp/meta-$d.log) && [ $rc = 0 ]; then
			pass "${d}_ns${n}_fio_verify"
		else
			fail "${d}_ns${n}_fio_verify" "fio exited $rc: $why"
		fi
	done
done

# The metadata the device keeps: 8 blocks written through each block device at LBA 0 (the
# block layer's PI: guard, application tag 0, reference tag the LBA), read through the
# generic devices with a metadata buffer: NVME_IOCTL_SUBMIT_IO (nvme-cli -y/-M),
# NVME_IOCTL_IO64_CMD and io_uring (uring-cmd -m), each as C's, all three alike.
head -c 4096 /dev/urandom >/tmp/blk8
for n in 1 2 3 4 5 6; do
	ms=$(ms_of $n) C=$(cdisk $n)
	for d in r c; do
		case $d in r) dev=/dev/rnvme0n$n g=/dev/rng0n$n ;; c) dev=/dev/$C g=/dev/ng${C#nvme} ;; esac
		dd if=/tmp/blk8 of=$dev bs=4k oflag=direct 2>/dev/null
		rm -f /tmp/m-$d /tmp/d-$d
		nvme read $g -s 0 -c 7 -z 4096 -y $((8 * ms)) -d /tmp/d-$d -M /tmp/m-$d >/dev/null 2>&1
		od -An -v -tx1 /tmp/m-$d 2>/dev/null | tr -d ' \n' >/tmp/mh-$d
		uring-cmd -i -m $((8 * ms)) $g read sum >/tmp/io-$d 2>&1
		uring-cmd -m $((8 * ms)) $g read sum >/tmp/ur-$d 2>&1
	done
	check "ns${n}_data_read_through_passthrough" cmp -s /tmp/blk8 /tmp/d-r
	expect_eq "ns${n}_metadata_bytes" $((8 * ms)) "$(wc -c </tmp/m-r)"
	# The metadata of 8 blocks (2 hex digits a byte), and completions that read it: not
	# the same failure on both.
	expect_eq "ns${n}_metadata_as_c" "$((16 * ms)) $(cat /tmp/mh-c)" "$(wc -c </tmp/mh-r) $(cat /tmp/mh-r)"
	as_c "ns${n}_io_cmd_metadata_as_c" "$(cat /tmp/io-c)" "$(cat /tmp/io-r)" "res=0 res2=0 sum=* meta=*"
	as_c "ns${n}_uring_metadata_as_c" "$(cat /tmp/ur-c)" "$(cat /tmp/ur-r)" "res=0 res2=0 sum=* meta=*"
	expect_eq "ns${n}_io_cmd_metadata_as_submit_io" "meta=$(cat /tmp/mh-r)" "$(sed -n 's/.* meta=/meta=/p' /tmp/io-r)"
	expect_eq "ns${n}_uring_metadata_as_submit_io" "meta=$(cat /tmp/mh-r)" "$(sed -n 's/.* meta=/meta=/p' /tmp/ur-r)"
done
# Type 1: each block's reference tag is its LBA (the last 4 bytes of its 8 of PI).
nvme read /dev/rng0n1 -s 0 -c 7 -z 4096 -y 64 -d /tmp/d1 -M /tmp/m1 >/dev/null 2>&1
expect_eq ns1_reference_tags "00 00 00 00 00 00 00 07" \
	"$(od -An -tx1 -j4 -N4 /tmp/m1 | xargs) $(od -An -tx1 -j60 -N4 /tmp/m1 | xargs)"
# A metadata buffer shorter than the blocks' metadata is refused (EINVAL; beyond C, which
# lets the device write past it).
expect_eq short_metadata_refused "res=-22 res2=0" "$(uring-cmd -i -m 32 /dev/rng0n1 read | sed 's/ meta=.*//')"
# A metadata buffer for a namespace without metadata buffers (7: PRACT only) is refused
# with EINVAL, as C's.
C7=$(cdisk 7)
# (C's nvme_map_user_request: a metadata buffer and no integrity profile, EINVAL.)
c=$(uring-cmd -i -m 64 /dev/ng${C7#nvme} read | sed 's/ meta=.*//')
expect_eq ns7_metadata_refused_as_c "res=-22 res2=0|res=-22 res2=0" \
	"$c|$(uring-cmd -i -m 64 /dev/rng0n7 read | sed 's/ meta=.*//')"
expect_eq ns7_metadata_refused "res=-22 res2=0" "$(uring-cmd -i -m 64 /dev/rng0n7 read | sed 's/ meta=.*//')"

# Write Zeroes on PI namespaces: the controller writes the PI (PRACT), the blocks read back
# (checked) as zeroes. (-f: blkdiscard's probe reads blocks never written, whose PI QEMU
# leaves invalid.)
head -c 65536 /dev/zero >/tmp/z64
for n in 1 3 7; do
	for d in r c; do
		dev=/dev/rnvme0n$n
		[ $d = c ] && dev=/dev/$(cdisk $n)
		/usr/bin/blkdiscard -f -z -o 1048576 -l 65536 $dev >/tmp/wzs-$d 2>&1
		echo "zeroout $?, wz $(cat /sys/block/${dev#/dev/}/queue/write_zeroes_max_bytes)" >>/tmp/wzs-$d
		dd if=$dev of=/tmp/wz-$d bs=64k skip=16 count=1 iflag=direct 2>&1 |
			grep -oE 'Invalid or incomplete multibyte or wide character|Input/output error|[0-9]+ bytes' | head -1 >>/tmp/wzs-$d
	done
	# QEMU 7.2 writes zeroes with a 64-bit guard its own read check refuses (ns 3: a
	# protection error on both drivers): only compared with C there.
	if [ $n = 3 ]; then
		:
	elif cmp -s /tmp/z64 /tmp/wz-r; then
		pass "ns${n}_write_zeroes_reads_zeroes"
	else
		fail "ns${n}_write_zeroes_reads_zeroes" "$(cat /tmp/wzs-r | tr '\n' ' ')"
	fi
	# Zeroed with Write Zeroes (a limit above 0) and read back without an error (a byte
	# count, which only some dd print, and -f's warning set aside); ns 3's read a protection
	# error (EILSEQ), as said above.
	c=$(grep -v -e '^65536 bytes$' -e 'Operation forced' /tmp/wzs-c)
	r=$(grep -v -e '^65536 bytes$' -e 'Operation forced' /tmp/wzs-r)
	want="zeroout 0, wz [1-9]*[0-9]"
	[ $n = 3 ] && want="$want
Invalid or incomplete multibyte or wide character"
	as_c "ns${n}_write_zeroes_as_c" "$c" "$r" "$want"
done

# A bad guard: a block written through passthrough with zeroed PI and no checks, then read
# through the block device: an integrity error (EILSEQ), as C's; never the data.
head -c 512 /dev/urandom >/tmp/blk1
head -c 16 /dev/zero >/tmp/zmeta
for n in 1 3; do
	ms=$(ms_of $n) C=$(cdisk $n)
	for d in r c; do
		case $d in r) dev=/dev/rnvme0n$n g=/dev/rng0n$n ;; c) dev=/dev/$C g=/dev/ng${C#nvme} ;; esac
		nvme write $g -s 2000 -c 0 -z 512 -y $ms -d /tmp/blk1 -M /tmp/zmeta -p 0 >/dev/null 2>&1
		dd if=$dev of=/tmp/bad-$d bs=512 skip=2000 count=1 iflag=direct 2>&1 |
			grep -oE 'Invalid or incomplete multibyte or wide character|Input/output error|[0-9]+ bytes' | head -1 >/tmp/err-$d
	done
	w="Invalid or incomplete multibyte or wide character"
	expect_eq "ns${n}_bad_guard_as_c" "$w|$w" "$(cat /tmp/err-c)|$(cat /tmp/err-r)"
	expect_eq "ns${n}_bad_guard_is_integrity_error" "Invalid or incomplete multibyte or wide character" "$(cat /tmp/err-r)"
done
# Namespace 1 (PI type 1, separate metadata: QEMU keeps the data of LBA n at n * 512 in
# the image, the metadata after all of it); the block layer generates the PI.
image_write host_image /dev/rnvme0n1 0 1
check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
