# SPDX-License-Identifier: GPL-2.0
# Quirks: the table and the quirks= parameter, beside the C driver, on two identical
# controllers under QEMU's old Intel ID (use-intel-id=on: 8086:5845, to which both drivers'
# tables give identify_cns, disable_write_zeroes and bogus_nid). Controller 0 is rnvme's,
# controller 1 the C driver's; namespace 1 of each has a UUID and an EUI64.
# Each quirk's effect is checked where the device or the block layer shows it (QEMU's
# trace, queue limits, sysfs, data read back, time), and against the C driver given the
# same quirks.
. /guest/lib.sh
S=/sys/class/misc/rnvme0 CS=/sys/class/nvme/nvme0 R=/dev/rnvme0n1 C=/dev/nvme0n1
RB=/sys/block/rnvme0n1 CB=/sys/block/nvme0n1

hex() { printf %s "$1" | od -An -tx1 | tr -d ' \n'; }
lines() { tr '\n' ' ' | sed 's/ $//'; }

# load_rnvme ARGS / load_c ARGS: (re)load a driver with ARGS; its disk must come.
load_rnvme() {
	rmmod rnvme 2>/dev/null
	insmod /lib/rnvme.ko "$@" && wait_for 20 disk_live $R
}
load_c() {
	rmmod nvme 2>/dev/null
	insmod /lib/c/nvme.ko "$@" && wait_for 20 disk_live $C
}

# ids_as_c PREFIX WWID EUI: the disks' identifier files as C's (same files hidden), and
# what they must be: the wwid WWID, the eui EUI (or absent), no uuid or nguid (QEMU 7.2 has
# no NGUID; its UUID comes from the descriptor list alone). C's wwid carries its
# controller's serial, put in rnvme's place.
ids_as_c() {
	for a in wwid uuid nguid eui; do
		c=$(cat $CB/$a 2>/dev/null || echo absent)
		c=$(echo "$c" | sed "s/$(hex rnvme-s1)/$(hex rnvme-s0)/")
		case $a in wwid) w=$2 ;; eui) w=$3 ;; *) w=absent ;; esac
		expect_eq "${1}_${a}_as_c" "$w|$w" "$c|$(cat $RB/$a 2>/dev/null || echo absent)"
	done
}

# reset_cs SYSFS-DIR: centiseconds a write to its reset_controller took.
reset_cs() {
	t0=$(uptime_cs)
	echo 1 >"$1/reset_controller"
	echo $(($(uptime_cs) - t0))
}

# fill_1m DEV / zero_1m DEV / nonzero_1m DEV: random data in its first MiB; that MiB
# zeroed with BLKZEROOUT; the number of non-zero bytes it reads back.
fill_1m() { dd if=/dev/urandom of="$1" bs=64k count=16 oflag=direct 2>/dev/null; }
zero_1m() { /usr/bin/blkdiscard -z -o 0 -l 1048576 "$1"; }
nonzero_1m() { dd if="$1" bs=64k count=16 iflag=direct 2>/dev/null | tr -d '\0' | wc -c; }

insmod /lib/c/nvme-core.ko

# --- bad values: insmod fails, as C's --------------------------------------------------
for bad in 8086:5845:nope 8086:5845 zz:5845:bogus_nid 18086:5845:bogus_nid \
	8086:5845:bogus_nid- 8086:5845:^ \
	8086:5845:bogus_nid-8086:5846:bogus_nid-8086:5847:bogus_nid-8086:5848:bogus_nid-8086:5849:bogus_nid-8086:584a:bogus_nid-8086:584b:bogus_nid; do
	name=$(echo "$bad" | tr -c 'a-z0-9_\n' _ | cut -c1-40)
	if insmod /lib/rnvme.ko "quirks=$bad" 2>/dev/null; then
		fail "param_quirks_${name}_rejected" "insmod succeeded"
		rmmod rnvme
	else
		pass "param_quirks_${name}_rejected"
	fi
	if insmod /lib/c/nvme.ko "quirks=$bad" 2>/dev/null; then
		fail "param_quirks_${name}_rejected_by_c" "C's insmod succeeded"
		rmmod nvme
	else
		pass "param_quirks_${name}_rejected_by_c"
	fi
done

# --- a quirk rnvme does not implement: the controller is left alone ---------------------
assign_drivers rnvme nvme
check refused_quirk_loads insmod /lib/rnvme.ko quirks=8086:5845:shared_tags
sleep 2
expect_eq refused_quirk_not_bound "" "$(bound_to rnvme)"
expect_eq refused_quirk_no_chardev absent "$(ls /dev/rnvme0 2>/dev/null || echo absent)"
rmmod rnvme

# --- the table: 8086:5845 as C ------------------------------------------------------------
if load_c; then pass c_driver_disk; else abort c_driver_disk "no $C"; fi
if load_rnvme; then pass rnvme_disk; else abort rnvme_disk "no $R"; fi
expect_eq table_quirks "identify_cns disable_write_zeroes bogus_nid" "$(lines <$S/quirks)"
# The names one a line, in bit order (C's quirks_show).
w="identify_cns disable_write_zeroes bogus_nid"
expect_eq table_quirks_as_c "$w|$w" "$(lines <$CS/quirks)|$(lines <$S/quirks)"
expect_eq param_empty_in_sysfs "" "$(cat /sys/module/rnvme/parameters/quirks)"
# disable_write_zeroes: no Write Zeroes; zeroing is done with writes.
expect_eq write_zeroes_off 0 "$(cat $RB/queue/write_zeroes_max_bytes)"
expect_eq write_zeroes_off_as_c "0 0" \
	"$(cat $CB/queue/write_zeroes_max_bytes) $(cat $RB/queue/write_zeroes_max_bytes)"
fill_1m $R
trace_mark zero_by_writes_start $R
check zero_by_writes zero_1m $R
trace_mark zero_by_writes_end $R
expect_eq zero_by_writes_reads_zeroes 0 "$(nonzero_1m $R)"
# Control: the commands the zeroing sends (writes), whatever their opcode.
trace_absent zero_by_writes_no_write_zeroes zero_by_writes_start zero_by_writes_end 'opc 0x8 opname' \
	'opc 0x[0-9a-f]+ opname'
trace_expect zero_by_writes_writes zero_by_writes_start zero_by_writes_end ge 1 'opc 0x1 opname'
# bogus_nid: QEMU's identifiers are ignored; the wwid is built from the controller's.
ids_as_c bogus_nid "nvme.8086-$(hex rnvme-s0)-$(hex 'QEMU NVMe Ctrl')-00000001" absent
expect_eq bogus_nid_wwid "nvme.8086-$(hex rnvme-s0)-$(hex 'QEMU NVMe Ctrl')-00000001" \
	"$(cat $RB/wwid)"
BASE_RESET=$(reset_cs $S)
wait_for 20 disk_live $R

# --- quirks= with quirks on and off, both drivers given the same -------------------------
# (C's limit is 127 characters: the quirks to try are split in two rounds.)
Q=8086:5845:^bogus_nid,^disable_write_zeroes,medium_prio_sq,qdepth_one,no_ns_desc_list,single_vector
trace_mark param_start $C
if load_rnvme "quirks=$Q"; then pass param_rnvme_disk; else abort param_rnvme_disk "no $R"; fi
trace_mark param_rnvme_loaded $R
if load_c "quirks=$Q"; then pass param_c_disk; else abort param_c_disk "no $C"; fi
trace_mark param_c_loaded $C
expect_eq param_in_sysfs "$Q" "$(cat /sys/module/rnvme/parameters/quirks)"
expect_eq param_quirks \
	"identify_cns qdepth_one medium_prio_sq single_vector no_ns_desc_list" \
	"$(lines <$S/quirks)"
w="identify_cns qdepth_one medium_prio_sq single_vector no_ns_desc_list"
expect_eq param_quirks_as_c "$w|$w" "$(lines <$CS/quirks)|$(lines <$S/quirks)"
# ^disable_write_zeroes: Write Zeroes is back.
wz=$(cat $RB/queue/write_zeroes_max_bytes)
case "$wz" in
[1-9]*) expect_eq param_write_zeroes_on_as_c "$(cat $CB/queue/write_zeroes_max_bytes)" "$wz" ;;
*) fail param_write_zeroes_on_as_c "write_zeroes_max_bytes '$wz', C's $(cat $CB/queue/write_zeroes_max_bytes)" ;;
esac
[ "$wz" -gt 0 ] && pass param_write_zeroes_on || fail param_write_zeroes_on "write_zeroes_max_bytes $wz"
# ^bogus_nid with no_ns_desc_list: the EUI64 of Identify Namespace, no UUID (only the
# descriptor list has it), and the descriptor list never asked for.
ids_as_c param_ids eui.5254000000c0ffee "52 54 00 00 00 c0 ff ee"
expect_eq param_eui_from_identify "52 54 00 00 00 c0 ff ee" "$(cat $RB/eui 2>/dev/null)"
expect_eq param_no_uuid_without_desc_list absent "$(cat $RB/uuid 2>/dev/null || echo absent)"
# A descriptor list in these windows would be the failure: the control is the table's round,
# where both drivers asked for it (as on any controller of NVMe 1.3 or later: QEMU's is 1.4).
trace_absent param_no_desc_list param_start param_rnvme_loaded 'pci_nvme_identify_ns_descr_list' \
	'pci_nvme_identify_ns_descr_list' start param_start
trace_absent param_no_desc_list_c param_rnvme_loaded param_c_loaded 'pci_nvme_identify_ns_descr_list' \
	'pci_nvme_identify_ns_descr_list' start param_start
trace_expect param_identify_seen param_start param_rnvme_loaded ge 1 'pci_nvme_identify cid'
# medium_prio_sq and qdepth_one: every submission queue of depth 2 (qsize is 0's based)
# and medium priority (QPRIO 10b: qflags 5), as C creates them.
trace_expect param_sq_medium_depth2 param_start param_rnvme_loaded ge 1 'qsize=1, qflags=5$'
trace_absent param_sq_no_other param_start param_rnvme_loaded 'pci_nvme_create_sq (?!.*qsize=1, qflags=5$)' \
	'pci_nvme_create_sq .*qsize=[0-9]+, qflags=[0-9]+$'
trace_expect param_sq_medium_depth2_c param_rnvme_loaded param_c_loaded ge 1 'qsize=1, qflags=5$'
# qdepth_one: a tag set of depth 1, and no I/O scheduler in the test kernels to double it.
expect_eq param_nr_requests_as_c "1 1" "$(cat $CB/queue/nr_requests) $(cat $RB/queue/nr_requests)"
# single_vector: one interrupt vector for all queues, as C.
expect_eq param_single_vector 1 "$(grep -cE ' rnvme0q[0-9]+$' /proc/interrupts)"
expect_eq param_single_vector_as_c "1 1" \
	"$(grep -cE ' nvme0q[0-9]+$' /proc/interrupts) $(grep -cE ' rnvme0q[0-9]+$' /proc/interrupts)"
# One vector: the admin queue and one I/O queue (C's nvme_setup_io_queues: max_qid 1).
expect_eq param_queue_count_as_c "2 2" "$(cat $CS/queue_count) $(cat $S/queue_count)"
# I/O at one command per queue, verified.
if fio --name=qd1 --filename=$R --rw=randwrite --bs=4k --size=4M --iodepth=16 \
	--ioengine=libaio --direct=1 --verify=crc32c --verify_fatal=1 --output=/tmp/qd1.log &&
	! grep -qE 'err=[ ]*[1-9]|verify: bad' /tmp/qd1.log; then
	pass param_qdepth_one_io_verified
	mark RNVME-VERIFIED 4MiB
else
	fail param_qdepth_one_io_verified "$(grep -iE 'err|verify' /tmp/qd1.log | head -3)"
fi

# --- second round: deallocate_zeroes, stripe_size, delay_before_chk_rdy -------------------
Q=8086:5845:deallocate_zeroes,stripe_size,delay_before_chk_rdy
if load_rnvme "quirks=$Q"; then pass param2_rnvme_disk; else abort param2_rnvme_disk "no $R"; fi
if load_c "quirks=$Q"; then pass param2_c_disk; else abort param2_c_disk "no $C"; fi
w="stripe_size identify_cns deallocate_zeroes delay_before_chk_rdy disable_write_zeroes bogus_nid"
expect_eq param2_quirks_as_c "$w|$w" "$(lines <$CS/quirks)|$(lines <$S/quirks)"
# stripe_size: requests do not cross the largest transfer's boundary.
cs=$(cat $RB/queue/chunk_sectors)
expect_eq param2_chunk_sectors "$(($(cat $RB/queue/max_hw_sectors_kb) * 2))" "$cs"
# The largest transfer: QEMU's default MDTS 7, 512 KiB.
expect_eq param2_chunk_sectors_as_c "1024 1024" "$(cat $CB/queue/chunk_sectors) $cs"
# deallocate_zeroes: zeroing by deallocation (Dataset Management), not Write Zeroes (which
# disable_write_zeroes keeps off) nor writes.
wz=$(cat $RB/queue/write_zeroes_max_bytes)
[ "$wz" -gt 0 ] && pass dealloc_write_zeroes_on || fail dealloc_write_zeroes_on "write_zeroes_max_bytes $wz"
fill_1m $R
trace_mark dealloc_start $R
check dealloc_zero zero_1m $R
trace_mark dealloc_end $R
expect_eq dealloc_reads_zeroes 0 "$(nonzero_1m $R)"
trace_expect dealloc_by_dsm dealloc_start dealloc_end ge 1 'pci_nvme_dsm_deallocate'
# Control: the commands the zeroing sends (Dataset Management), whatever their opcode.
trace_absent dealloc_no_write_zeroes dealloc_start dealloc_end 'opc 0x8 opname' 'opc 0x[0-9a-f]+ opname'
trace_absent dealloc_no_writes dealloc_start dealloc_end 'opc 0x1 opname' 'opc 0x[0-9a-f]+ opname'
# delay_before_chk_rdy: a reset waits 2.3 s after clearing CC.EN, as C's.
t=$(reset_cs $S)
[ "$t" -ge 230 ] && [ "$t" -ge $((BASE_RESET + 200)) ] && pass param2_ready_delay ||
	fail param2_ready_delay "reset took $t cs (without the quirk $BASE_RESET cs)"
wait_for 20 disk_live $R
tc=$(reset_cs $CS)
[ "$tc" -ge 230 ] && pass param2_ready_delay_c || fail param2_ready_delay_c "C's reset took $tc cs"
wait_for 20 disk_live $C

# --- dmapool_align_512: small lists at 512-byte alignment ---------------------------------
# Direct reads of 16 KiB (four pages each: a PRP list of three entries from the small pool),
# 32 in flight from one CPU, so one queue's pool has many lists out at once whatever the
# guest's speed (separate dd processes of one read each came out one at a time on a loaded
# host), without and with the quirk. QEMU's trace shows each list's bus address (PRP2):
# without the quirk some list sits at an odd multiple of 256 bytes (the control: the pool
# hands out 256-byte blocks), with it none does.
small_lists() {
	trace_mark "$1_start" $R
	fio --name=lists --filename=$R --rw=randread --bs=16k --size=16M --io_size=8M \
		--iodepth=32 --iodepth_batch_submit=32 --ioengine=io_uring --direct=1 \
		--cpus_allowed=0 --output=/tmp/lists.log ||
		fail "$1_lists_read" "$(grep -iE 'err' /tmp/lists.log | head -3)"
	trace_mark "$1_end" $R
}
ODD_LIST='pci_nvme_map_prp trans_len [0-9]+ len 16384 prp1 0x[0-9a-f]+ prp2 0x[0-9a-f]*[13579bdf]00 num_prps'
if load_rnvme; then pass align256_rnvme_disk; else abort align256_rnvme_disk "no $R"; fi
small_lists align256
trace_expect align256_odd_lists align256_start align256_end ge 1 "$ODD_LIST"
if load_rnvme quirks=8086:5845:dmapool_align_512; then
	pass align512_rnvme_disk
else
	abort align512_rnvme_disk "no $R"
fi
small_lists align512
trace_absent align512_no_odd_lists align512_start align512_end "$ODD_LIST" \
	'pci_nvme_map_prp trans_len [0-9]+ len 16384 '
image_write host_image $R 0 1

check rmmod_both sh -c 'rmmod nvme && rmmod nvme-core && rmmod rnvme'
finish
