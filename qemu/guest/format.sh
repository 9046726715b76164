# SPDX-License-Identifier: GPL-2.0
# Format NVM changes a namespace's LBA format under its disk. Two controllers share one
# namespace (one NVM subsystem): controller 0 on rnvme, controller 1 on the C driver, so
# either can format it and each reads what the other wrote. The namespace starts with
# 4096-byte blocks.
#
# Through rnvme, with I/O running: the format's effects (Commands Supported and Effects)
# freeze the disk's I/O around it and revalidate it before I/O resumes, so the disk has
# 512-byte blocks at once and data written in the new format is where a command in LBA
# units finds it (it used to keep 4096 and send SLBA/NLB in the old units: wrong data).
# Formatted behind rnvme's back (through the C driver), a rescan revalidates the disk.
# Formatted with metadata, the disk is made anew with an integrity profile; formatted to a
# format rnvme cannot serve (interleaved metadata without PI), the disk goes (the generic
# device stays); back, it returns.
. /guest/lib.sh

R=/dev/rnvme0 C=/dev/nvme0
assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
require_disk rnvme_disk ${R}n1
require_disk c_driver_disk ${C}n1
expect_eq block_size_before "4096 4096" "$(blockdev --getss ${R}n1) $(blockdev --getss ${C}n1)"
# A queue limit set through sysfs (the block layer takes limits_lock, then freezes) before
# the formats below change the limits of the frozen disk: lockdep (debug kernel) sees both
# orders, and the kernel log must stay clean.
echo 128 >/sys/block/$(basename ${R}n1)/queue/max_sectors_kb
expect_eq max_sectors_kb_set 128 "$(cat /sys/block/$(basename ${R}n1)/queue/max_sectors_kb)"

# pattern NAME: 64 KiB of random data in /tmp/NAME.
pattern() { dd if=/dev/urandom of=/tmp/$1 bs=64k count=1 2>/dev/null; }
# same NAME FILE-A FILE-B: the two files hold the same bytes.
same() {
	if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 and $3 differ"; fi
}

# The namespace is shared: what rnvme writes, the C driver reads.
pattern a
dd if=/tmp/a of=${R}n1 bs=4k seek=4 count=16 oflag=direct 2>/dev/null
dd if=${C}n1 of=/tmp/a.c bs=4k skip=4 count=16 iflag=direct 2>/dev/null
same shared_namespace_written_by_rnvme_read_by_c /tmp/a /tmp/a.c

# --- format through rnvme while fio reads it ----------------------------------------------
fio --name=during --filename=${R}n1 --rw=randread --bs=4k --iodepth=8 --ioengine=io_uring \
	--direct=1 --time_based --runtime=6 --size=32M --output=/tmp/fio-during.log &
fio_pid=$!
sleep 2
trace_mark format_begin ${R}n1
# A raw Format NVM (LBA format 0), not nvme-cli's format, which rescans afterwards: the
# command's effects alone must revalidate the disk.
check format_to_512 nvme admin-passthru $R --opcode=0x80 --namespace-id=1 --cdw10=0
trace_mark format_end ${R}n1
expect_eq block_size_after_format "512" "$(blockdev --getss ${R}n1)"
if wait $fio_pid && ! grep -qE "err=[ ]*[1-9]" /tmp/fio-during.log; then
	pass io_during_format_no_errors
else
	fail io_during_format_no_errors "$(grep -E 'err=|error' /tmp/fio-during.log | head -2)"
fi
trace_expect format_reached_device format_begin format_end eq 1 \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x80 "
# 64 MiB (--size 64M) on both: rnvme's disk revalidated in 512-byte blocks, C's not yet.
expect_eq capacity_kept_after_format "67108864 67108864" \
	"$(blockdev --getsize64 ${C}n1) $(blockdev --getsize64 ${R}n1)"

# The issue's reproducer: 64 KiB written at byte 16 KiB, read back with LBA units.
pattern b
check write_after_format dd if=/tmp/b of=${R}n1 bs=4k seek=4 count=16 oflag=direct
check nvme_read_after_format nvme read ${R}n1 -s 32 -c 127 -z 65536 -d /tmp/b.nvme
same data_at_lba_after_format /tmp/b /tmp/b.nvme
# The block size is the one the device reports in use (Identify Namespace).
lbads=$(nvme id-ns ${R}n1 | sed -nE 's/.*lbads:([0-9]+).*\(in use\).*/\1/p')
expect_eq block_size_as_identify "$((1 << ${lbads:-0}))" "$(blockdev --getss ${R}n1)"
# The C driver learns of the format with a rescan, then reads the same bytes. (Its
# multipath head disk keeps 4096-byte blocks: stacked limits only grow.) The rescan only
# queues C's scan: the read waits until C's path disk has 512-byte blocks (C sets them with
# its LBA shift, under one freeze), or reads in the old units.
check c_driver_rescan nvme ns-rescan $C
c_path_bs() { cat /sys/block/nvme*c*n1/queue/logical_block_size 2>/dev/null; }
wait_for 30 sh -c "cat /sys/block/nvme*c*n1/queue/logical_block_size | grep -qx 512"
if [ "$(c_path_bs)" = 512 ]; then
	dd if=${C}n1 of=/tmp/b.c bs=4k skip=4 count=16 iflag=direct 2>/dev/null
	same data_after_format_as_c_driver_reads /tmp/b /tmp/b.c
else
	fail data_after_format_as_c_driver_reads "C's path disk still has $(c_path_bs)-byte blocks 30 s after its rescan"
fi

# --- formatted behind rnvme's back: a rescan revalidates ---------------------------------
check format_through_c_to_4096 nvme format $C -n 1 -l 4 -f
check rnvme_rescan nvme ns-rescan $R
expect_eq rescan_revalidates_block_size "4096" "$(blockdev --getss ${R}n1)"
pattern c
dd if=/tmp/c of=${C}n1 bs=4k seek=8 count=16 oflag=direct 2>/dev/null
dd if=${R}n1 of=/tmp/c.r bs=4k skip=8 count=16 iflag=direct 2>/dev/null
same data_after_rescan /tmp/c /tmp/c.r

# --- metadata: a new disk with its profile; one rnvme cannot serve removes the disk ------
check format_with_metadata nvme format $R -n 1 -l 1 -f
require_disk disk_with_metadata ${R}n1
expect_eq metadata_disk_profile nop "$(cat /sys/block/rnvme0n1/integrity/format 2>&1)"
pattern m
dd if=/tmp/m of=${R}n1 bs=4k seek=4 count=16 oflag=direct 2>/dev/null
dd if=${R}n1 of=/tmp/m.r bs=4k skip=4 count=16 iflag=direct 2>/dev/null
same data_with_metadata /tmp/m /tmp/m.r
check format_interleaved_metadata nvme format $R -n 1 -l 1 -m 1 -f
if wait_for 10 test ! -b ${R}n1; then pass unservable_format_removes_disk; else
	fail unservable_format_removes_disk "${R}n1 still there, $(blockdev --getss ${R}n1)-byte blocks"
fi
check unservable_keeps_generic_device test -c /dev/rng0n1
check format_back_to_512 nvme format $R -n 1 -l 0 -f
require_disk disk_back_after_format ${R}n1
expect_eq block_size_back "512" "$(blockdev --getss ${R}n1)"
pattern d
dd if=/tmp/d of=${R}n1 bs=4k seek=12 count=16 oflag=direct 2>/dev/null
check nvme_read_back nvme read ${R}n1 -s 96 -c 127 -z 65536 -d /tmp/d.nvme
same data_after_format_back /tmp/d /tmp/d.nvme
# After the last format (512-byte blocks, no metadata); the shared namespace is stored with
# controller 0.
image_write host_image ${R}n1 0 1

check rmmod rmmod rnvme
finish
