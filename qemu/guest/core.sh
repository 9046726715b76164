# SPDX-License-Identifier: GPL-2.0
# The controller core, rnvme beside the C driver on identical controllers: nothing waits
# behind one slow command, and one namespace the block layer refuses fails alone.
#
# Two controllers with MDTS 1 (8 KiB transfers), each with namespace 1 (512-byte blocks, an
# image), namespace 2 (every command answered after SLOW_MS), namespace 3 (16 KiB blocks,
# larger than a transfer: no disk can serve it) and namespace 4 (zoned, 1024 zones of
# 64 KiB: a report of them all takes 9 commands). Last, each driver is unbound while a zone
# report on its open zoned disk waits for user memory, as a namespace removed under an open
# block device.
. /guest/lib.sh
SLOW_MS=${SLOW_MS:-3000}

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
# disk_of CHARDEV NSID: the disk of namespace NSID on CHARDEV's controller (C names its disks
# in the order its asynchronous scan adds them, not by namespace).
disk_of() {
	local d
	for d in /sys/block/${1#/dev/}n*; do
		[ "$(cat "$d/nsid" 2>/dev/null)" = "$2" ] && echo "/dev/${d##*/}" && return
	done
	echo "${1}-has-no-namespace-$2"
}

# nsids CHARDEV: the namespaces with a disk on CHARDEV's controller, in order.
nsids() {
	cat /sys/block/"${1#/dev/}"n*/nsid 2>/dev/null | sort -n | tr '\n' ' ' | sed 's/ $//'
}

# ns_live CHARDEV NSID: namespace NSID of CHARDEV's controller has a live disk.
ns_live() { disk_live "$(disk_of "$1" "$2")"; }

# The disks, by namespace (a slow namespace's partition scan and udev's probe of the C
# driver's take a while).
if wait_for 90 ns_live /dev/nvme0 1; then pass c_driver_disk; else
	abort c_driver_disk "no disk of namespace 1: $(ls /sys/block | tr '\n' ' ')"
fi
# Without it, the slow-command tests below still run (on namespace 2).
if wait_for 90 ns_live /dev/rnvme0 1; then pass rnvme_disk; else
	fail rnvme_disk "no disk of namespace 1: $(ls /sys/block | tr '\n' ' ')"
fi
for c in /dev/nvme0 /dev/rnvme0; do
	wait_for 90 ns_live $c 2
	wait_for 90 ns_live $c 4
done
udevadm settle -t 120 2>/dev/null
# C's scan is asynchronous: its rescans return at once (the slow-command test below shows
# rnvme's, which scans in the ioctl).

# --- a namespace no disk can serve -------------------------------------------------------
# refused DRIVER CHARDEV GENERIC: the controller is served (its character device CHARDEV),
# the refused namespace has no disk and no generic device (GENERIC: the generic devices'
# prefix; C numbers them as its disks); the others have disks, whose data verify.
refused() {
	local drv=$1 p=$2
	expect_eq "${drv}_disks_beside_refused" "1 2 4" "$(nsids "$p")"
	if [ ! -c "$p" ]; then
		fail "${drv}_refused_namespace_absent" "no controller $p"
	elif [ "$drv" = rnvme ] && [ -e /dev/rng0n3 ]; then
		# (rnvme names its generic devices by namespace.)
		fail "${drv}_refused_namespace_absent" "/dev/rng0n3 exists"
	else
		expect_eq "${drv}_refused_namespace_absent" 3 "$(ls /dev | grep -c "^${3#/dev/}n")"
	fi
	fio_write_verify "${drv}_io_beside_refused" "$(disk_of "$p" 1)" 4M 17 8
}
refused nvme /dev/nvme0 /dev/ng0
refused rnvme /dev/rnvme0 /dev/rng0
# A clear error names it (C's limits make the block layer warn; the kernel log check lets
# that one warning through, as long as no rnvme frame is in its trace).
if dmesg | grep -q "rnvme0: namespace 3 skipped: its 16384-byte blocks exceed the controller's 8192-byte transfer limit"; then
	pass rnvme_refused_namespace_logged
else
	fail rnvme_refused_namespace_logged "$(dmesg | grep 'namespace 3' | tail -2 | tr '\n' ' ')"
fi
check rnvme_rescan_beside_refused nvme ns-rescan /dev/rnvme0
expect_eq rnvme_disks_after_rescan "1 2 4" "$(nsids /dev/rnvme0)"

# reformat DRIVER CHARDEV: namespace 3 formatted to 512-byte blocks gets a disk, whose data
# verify; then formatted back to its 16 KiB blocks, larger than a transfer. The block
# layer's one-time warnings are re-armed first, and WARNED counts the block layer's
# warnings about refused limits that follow.
warnings() { dmesg | grep -c 'WARNING:.*blk_validate_limits'; }
reformat() {
	local drv=$1 p=$2 l before
	l=$(nvme id-ns "$p" -n 3 | sed -n 's/^lbaf *\([0-9]*\) *:.*lbads:14 .*/\1/p' | head -1)
	if [ -z "$l" ]; then
		fail "${drv}_reformat_to_512" "no 16 KiB LBA format: $(nvme id-ns "$p" -n 3 | grep -c lbaf)"
		return
	fi
	check "${drv}_reformat_to_512" nvme format "$p" -n 3 -l 0 -f
	check "${drv}_reformatted_namespace_served" wait_for 30 ns_live "$p" 3
	fio_write_verify "${drv}_reformatted_namespace_verifies" "$(disk_of "$p" 3)" 1M 19 4
	echo 1 >/sys/kernel/debug/clear_warn_once
	before=$(warnings)
	check "${drv}_reformat_to_16k" nvme format "$p" -n 3 -l "$l" -f
	# (C's warning comes from the revalidation the format's effects start.)
	[ "$drv" = nvme ] && wait_for 10 sh -c "[ \$(dmesg | grep -c 'WARNING:.*blk_validate_limits') -gt $before ]"
	WARNED=$(($(warnings) - before))
}
# rnvme removes the disk it can no longer serve, with a message, and offers the block layer
# no limits it refuses: no warning, where C's revalidation makes one (the control: the
# count sees a warning when there is one). C keeps its disk with the old limits.
reformat rnvme /dev/rnvme0
check rnvme_reformatted_beyond_transfer_removed wait_for 30 sh -c \
	"! cat /sys/block/rnvme0n*/nsid | grep -qx 3"
expect_eq rnvme_disks_after_reformat "1 2 4" "$(nsids /dev/rnvme0)"
expect_eq rnvme_reformat_no_block_layer_warning 0 "$WARNED"
if dmesg | grep -q "rnvme0n3: reformatted: its 16384-byte blocks exceed the controller's 8192-byte transfer limit: removing its disk"; then
	pass rnvme_reformat_beyond_transfer_logged
else
	fail rnvme_reformat_beyond_transfer_logged "$(dmesg | grep 'rnvme0n3' | tail -2 | tr '\n' ' ')"
fi
reformat nvme /dev/nvme0
expect_eq c_reformat_block_layer_warning 1 "$WARNED"

# --- nothing waits behind a slow command -------------------------------------------------
# in_flight DISK [OP]: blk-mq shows a request of DISK's queues (of operation OP, default
# any) issued to the driver and not ended (the block layer's view, not the driver's).
in_flight() {
	cat /sys/kernel/debug/block/"${1#/dev/}"/hctx*/busy 2>/dev/null | grep -q "op=${2:-}"
}

# took SINCE: seconds since SINCE (now_s), to the tenth.
took() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# quick SECONDS: SECONDS is under half of SLOW_MS (a command that waited for the slow one
# took at least the rest of it).
quick() { awk -v t="$1" -v ms="$SLOW_MS" 'BEGIN { exit !(t * 2000 < ms) }'; }

# beside_slow DRIVER CHARDEV WHAT CMD...: while a passthrough read waits SLOW_MS for
# namespace 2 of CHARDEV's controller, CMD returns at once, before it
# (DRIVER_WHAT_beside_slow_command); the slow read then completes, having taken SLOW_MS (the
# control: DRIVER_WHAT_slow_command_completed).
beside_slow() {
	local drv=$1 ctrl=$2 what=$3 slow t0 t1 rc took n2
	shift 3
	n2=$(disk_of "$ctrl" 2)
	if ! disk_live "$n2"; then
		fail "${drv}_${what}_beside_slow_command" "no disk $n2"
		return
	fi
	t0=$(now_s)
	nvme io-passthru "$n2" --opcode=2 --namespace-id=2 --data-len=4096 --read \
		--cdw12=7 >"/tmp/slow-$drv.out" 2>&1 &
	slow=$!
	# The passthrough itself (a driver-private read), not a partition or udev read.
	if ! wait_for 10 in_flight "$n2" DRV_IN; then
		fail "${drv}_${what}_beside_slow_command" "no passthrough in flight on $n2 after 10 s"
	else
		t1=$(now_s)
		"$@" >"/tmp/$what-$drv.out" 2>&1
		rc=$?
		took=$(took "$t1")
		if ! kill -0 $slow 2>/dev/null || ! quick "$took"; then
			fail "${drv}_${what}_beside_slow_command" "waited for the slow command: ${took}s"
		elif [ $rc != 0 ]; then
			fail "${drv}_${what}_beside_slow_command" "exit $rc: $(tail -1 "/tmp/$what-$drv.out")"
		else
			pass "${drv}_${what}_beside_slow_command"
		fi
		echo "$drv: $what beside the slow command: ${took}s"
	fi
	wait $slow
	rc=$?
	took=$(took "$t0")
	if [ $rc = 0 ] && awk -v t="$took" -v ms="$SLOW_MS" 'BEGIN { exit !(t * 1000 >= ms) }'; then
		pass "${drv}_${what}_slow_command_completed"
	else
		fail "${drv}_${what}_slow_command_completed" "exit $rc after ${took}s: $(tail -1 "/tmp/slow-$drv.out")"
	fi
}
for d in nvme rnvme; do
	beside_slow $d /dev/${d}0 passthrough nvme io-passthru "$(disk_of /dev/${d}0 1)" \
		--opcode=2 --namespace-id=1 --data-len=4096 --read --cdw12=7
	beside_slow $d /dev/${d}0 rescan nvme ns-rescan /dev/${d}0
done
expect_eq rnvme_state_live live "$(cat /sys/class/misc/rnvme0/state)"

# --- a zone report on an open disk whose namespace goes --------------------------------
# report_under_unbind DRIVER CHARDEV SLOW: DRIVER's zoned disk (namespace 4) reports its
# zones into a buffer mapped from SLOW (another controller's slow disk); while the report
# waits for a page of it, the controller is unbound. The report must end with the zones it
# handed over before the namespace went (as C's), the kernel log stay clean (KASAN on the
# debug kernel: nothing of the namespace is read after it was freed), and a rebind serve
# the zones again.
report_under_unbind() {
	local drv=$1 ctrl=$2 zdisk pci rep t0
	zdisk=$(disk_of "$ctrl" 4)
	pci=$(bound_to "$drv" | head -1)
	rm -f /tmp/zr-ready
	zone-report "$zdisk" "$3" /tmp/zr-ready 1024 >"/tmp/zr-$drv.out" 2>&1 &
	rep=$!
	# The header page is read, then the report starts and stalls on the next page: the
	# slow disk's read in flight again.
	if wait_for 30 test -e /tmp/zr-ready && usleep 200000 && wait_for 30 in_flight "$3"; then
		pass "${drv}_zone_report_stalls"
	else
		fail "${drv}_zone_report_stalls" "no read of $3 in flight"
	fi
	echo "$pci" >"/sys/bus/pci/drivers/$drv/unbind"
	if kill -0 $rep 2>/dev/null; then pass "${drv}_unbound_during_report"; else
		fail "${drv}_unbound_during_report" "the report had ended: $(cat "/tmp/zr-$drv.out")"
	fi
	t0=$(now_s)
	if wait_for 60 sh -c "! kill -0 $rep 2>/dev/null"; then
		wait $rep
		echo "$drv: the report ended $(took "$t0")s after the unbind: $(cat "/tmp/zr-$drv.out")"
		# As C's: the zones handed over before the namespace went, no more.
		if grep -qE '^ret 0 errno 0 zones [1-9][0-9]*$' "/tmp/zr-$drv.out" &&
			[ "$(awk '{ print $6 }' "/tmp/zr-$drv.out")" -lt 1024 ]; then
			pass "${drv}_report_cut_short_by_unbind"
		else
			fail "${drv}_report_cut_short_by_unbind" "$(cat "/tmp/zr-$drv.out")"
		fi
	else
		fail "${drv}_report_cut_short_by_unbind" "still running 60 s after the unbind"
	fi
	echo "$pci" >"/sys/bus/pci/drivers/$drv/bind"
	# (The controller may come back under another number.)
	if wait_for 60 zones_served "/dev/${drv}[0-9]*"; then
		pass "${drv}_zones_after_rebind"
	else
		fail "${drv}_zones_after_rebind" "no zoned disk with 1024 zones: $(ls /sys/block | tr '\n' ' ')"
	fi
}

# zones_served CHARDEV: namespace 4 of CHARDEV's controller (a pattern) has a disk that
# reports its 1024 zones.
zones_served() {
	local d
	d=$(disk_of "$1" 4)
	disk_live "$d" && [ "$(blkzone report -c 1024 "$d" | grep -c 'start:')" = 1024 ]
}
report_under_unbind rnvme /dev/rnvme0 "$(disk_of /dev/nvme0 2)"
report_under_unbind nvme /dev/nvme0 "$(disk_of /dev/rnvme0 2)"
expect_eq rnvme_report_cut_as_c "$(cat /tmp/zr-nvme.out)" "$(cat /tmp/zr-rnvme.out)"
check rmmod rmmod rnvme
finish
