# SPDX-License-Identifier: GPL-2.0
# Helpers for guest test scripts. Each test prints one line the host counts:
#   RNVME-TEST PASS <name>
#   RNVME-TEST FAIL <name>: <why>
# Results go to a channel of their own, the second serial port (RNVME_RESULTS, set by
# qemu/run), where no kernel message can splice into them; a copy goes to the console for
# people reading its log, and one to $RNVME_LOCAL_RESULTS, from which `finish` counts what
# this guest reported (subshells and helper programs included). The host compares that
# count with the lines it received, and the names with the manifest (scripts/test.manifest).

RNVME_RESULTS=${RNVME_RESULTS:-/dev/ttyS1}
RNVME_LOCAL_RESULTS=${RNVME_LOCAL_RESULTS:-/tmp/rnvme-results}
export RNVME_RESULTS RNVME_LOCAL_RESULTS
: >>"$RNVME_LOCAL_RESULTS"

# report LINE: one line on the results channel (and the console, and the local copy).
report() {
	echo "$*" >>"$RNVME_LOCAL_RESULTS"
	echo "$*" >"$RNVME_RESULTS"
	echo "$*"
}

pass() { report "RNVME-TEST PASS $1"; }
fail() { report "RNVME-TEST FAIL $1: $2"; }

# mark WORD...: a line for the host on the results channel (RNVME-VERIFIED 8MiB, ...).
mark() { report "$*"; }

# check NAME CMD...: passes if CMD succeeds.
check() {
	name=$1
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "'$*' failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
	fi
}

# expect_eq NAME WANT GOT
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "want '$2', got '$3'"; fi
}

HMP=0
# hmp COMMAND...: the host runs it in QEMU's monitor (scenarios run by scripts/test.sh's
# hmp_vm), soon after; the caller waits for its effect.
hmp() {
	HMP=$((HMP + 1))
	mark "RNVME-HMP $HMP $*"
}

# now_s: seconds since boot, to the hundredth.
now_s() { awk '{ print $1 }' /proc/uptime; }

# hwmon_of PCI: the hwmon device below PCI function PCI (rnvme's is the function's own,
# C's below its nvme<N> class device).
hwmon_of() {
	for d in /sys/class/hwmon/hwmon*; do
		case "$(readlink -f "$d/device")" in */"$1" | */"$1"/*) echo "$d" && return ;; esac
	done
}

# PCI addresses of every NVMe controller (class 0x010802).
nvme_pci_devices() {
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/class")" = 0x010802 ] && basename "$d"
	done
}

# assign_drivers DRIVER...: sets driver_override of the NVMe controllers, in PCI order, to
# the drivers named; the last one named takes the rest.
assign_drivers() {
	local pci
	for pci in $(nvme_pci_devices | sort); do
		echo "$1" >"/sys/bus/pci/devices/$pci/driver_override"
		[ $# -gt 1 ] && shift
	done
}

# insmod_in_order ARG...: loads rnvme (module arguments ARG) binding the controllers it
# would take (unbound, driver_override rnvme or none) one at a time, in PCI order: the first
# at insmod, the others through sysfs (a bind probes at once). Their instances then follow
# PCI order, which a scenario that names controllers by their QEMU position (the one it
# removes or resets) needs; insmod alone probes them side by side, numbered as their probes
# start.
insmod_in_order() {
	local p ov first="" rest=""
	for p in $(nvme_pci_devices | sort); do
		[ -e "/sys/bus/pci/devices/$p/driver" ] && continue
		ov=$(cat "/sys/bus/pci/devices/$p/driver_override")
		case "$ov" in rnvme | "" | "(null)") ;; *) continue ;; esac
		if [ -z "$first" ]; then
			first=$p
		else
			echo rnvme-later >"/sys/bus/pci/devices/$p/driver_override"
			rest="$rest $p:$ov"
		fi
	done
	insmod /lib/rnvme.ko "$@" || return
	for p in $rest; do
		if [ "${p#*:*:*:}" = rnvme ]; then
			echo rnvme >"/sys/bus/pci/devices/${p%:*}/driver_override"
		else
			echo >"/sys/bus/pci/devices/${p%:*}/driver_override"
		fi
		echo "${p%:*}" >/sys/bus/pci/drivers/rnvme/bind || return
	done
}

# PCI addresses bound to a driver.
bound_to() {
	ls /sys/bus/pci/drivers/"$1" 2>/dev/null | grep -E '^[0-9a-f]{4}:' || true
}

count() { grep -c . || true; }

# rnvme_of PCI: the instance N of the rnvme controller bound to PCI function PCI (its
# /dev/rnvme<N>), nothing if none. Several controllers bound at once probe side by side,
# so instances follow the order their probes started in, not PCI order.
rnvme_of() {
	local c
	for c in /sys/bus/pci/devices/"$1"/misc/rnvme[0-9]*; do
		[ -e "$c" ] && echo "${c##*/rnvme}"
	done
}

# intx_raised: the NVMe functions whose INTx pin is up, from the device's own PCI status
# register (Interrupt Status, bit 3), one per line.
intx_raised() {
	local p
	for p in $(nvme_pci_devices); do
		[ $((0x$(od -An -tx1 -j6 -N1 "/sys/bus/pci/devices/$p/config" | tr -d ' ') & 8)) = 0 ] ||
			echo "$p"
	done
}

# pci_command PCI [VALUE]: prints the 16-bit PCI command register of device PCI (decimal),
# or writes VALUE to it.
pci_command() {
	local cfg=/sys/bus/pci/devices/$1/config
	if [ $# -eq 1 ]; then
		echo $((0x$(od -An -tx2 -j4 -N2 "$cfg" | tr -d ' ')))
		return
	fi
	printf "\\$(printf %03o $(($2 & 0xff)))\\$(printf %03o $(($2 >> 8)))" |
		dd of="$cfg" bs=1 seek=4 count=2 conv=notrunc 2>/dev/null
}

# pci_bar0_high PCI [VALUE]: prints (or sets) the upper address dword of device PCI's
# 64-bit BAR 0 (config offset 0x14), written behind the PCI core's back: a device moved so
# answers nowhere its driver maps it.
pci_bar0_high() {
	local cfg=/sys/bus/pci/devices/$1/config v
	if [ $# -eq 1 ]; then
		echo $((0x$(od -An -tx4 -j20 -N4 "$cfg" | tr -d ' ')))
		return
	fi
	v=$2
	printf "\\$(printf %03o $((v & 0xff)))\\$(printf %03o $(((v >> 8) & 0xff)))\\$(printf %03o $(((v >> 16) & 0xff)))\\$(printf %03o $(((v >> 24) & 0xff)))" |
		dd of="$cfg" bs=1 seek=20 count=4 conv=notrunc 2>/dev/null
}

# msix_mask PCI 1|0: sets or clears the MSI-X Function Mask of device PCI (Message Control
# bit 14 of its MSI-X capability): while set, the device's interrupts stay pending. Fails
# if the device has no MSI-X capability.
msix_mask() {
	local cfg=/sys/bus/pci/devices/$1/config off ctl
	byte() { echo $((0x$(od -An -tx1 -j"$1" -N1 "$cfg" | tr -d ' '))); }
	off=$(byte 52)
	while [ "$off" -ne 0 ] && [ "$(byte "$off")" -ne 17 ]; do
		off=$(byte $((off + 1)))
	done
	[ "$off" -ne 0 ] || return 1
	ctl=$((0x$(od -An -tx2 -j$((off + 2)) -N2 "$cfg" | tr -d ' ')))
	if [ "$2" -eq 1 ]; then ctl=$((ctl | 0x4000)); else ctl=$((ctl & ~0x4000)); fi
	printf "\\$(printf %03o $((ctl & 0xff)))\\$(printf %03o $((ctl >> 8)))" |
		dd of="$cfg" bs=1 seek=$((off + 2)) count=2 conv=notrunc 2>/dev/null
}

# Centiseconds since boot.
uptime_cs() { awk '{ printf "%d", $1 * 100 }' /proc/uptime; }

# Identify lines rnvme logged since the ring buffer was last cleared.
identify_lines() { dmesg | grep -E 'rnvme[0-9]+: model "' || true; }

# wait_for SECONDS CMD...: retries CMD every 0.1 s.
wait_for() {
	local tries=$(($1 * 10))
	shift
	while [ $tries -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		usleep 100000
		tries=$((tries - 1))
	done
	return 1
}

# ended PID: process PID has ended (a zombie, not yet waited for, has; kill -0 finds it).
ended() {
	[ ! -r /proc/$1/stat ] || [ "$(sed 's/.*) //' /proc/$1/stat | cut -d' ' -f1)" = Z ]
}

# bounded NAME SECONDS CMD...: runs CMD (its output to /tmp/bounded.out) and returns its
# status. A command still running after SECONDS waits for I/O that does not complete (it
# cannot be killed while it does): NAME fails and the script gives up at once (abort), as
# the rest would meet the same stall, instead of hanging until the host's VM cap.
bounded() {
	local name=$1 s=$2 pid
	shift 2
	"$@" >/tmp/bounded.out 2>&1 &
	pid=$!
	wait_for "$s" ended $pid ||
		abort "$name" "'$*' still running after ${s}s"
	wait $pid
}

# within NAME SECONDS CMD...: NAME passes if CMD succeeds within SECONDS (bounded).
within() {
	local name=$1 s=$2 rc
	shift 2
	bounded "$name" "$s" "$@"
	rc=$?
	if [ $rc = 0 ]; then pass "$name"
	else fail "$name" "'$*' exited $rc: $(tail -3 /tmp/bounded.out | tr '\n' ' ')"; fi
}

# kmemleak_plant: on the debug kernel, leaks allocations on purpose (the test build's
# debugfs `kmemleak_control` of a bound controller, whichever), which kmemleak_check must
# then report: the positive control of its silence. The pointer a write last held can stay
# behind in memory kmemleak scans (the writer's kernel stack, a stack cached for reuse),
# which then counts as a reference. Six leaks, each written by a process of its own that
# exits, and at least one must be reported: an exiting task's stack is kept for reuse, two
# per CPU, and the next writer on that CPU takes it and overwrites the slot; with two
# writers on two CPUs both pointers could stay behind (seen: 0 of 2 reported).
# Nothing on the base kernel (no kmemleak).
kmemleak_plant() {
	local f
	[ "${RNVME_FLAVOUR:-}" = debug ] || return 0
	f=$(ls -d /sys/kernel/debug/rnvme[0-9]*/kmemleak_control 2>/dev/null | head -1)
	if [ -n "$f" ] && sh -c "echo 64 >$f" && sh -c "echo 64 >$f" && sh -c "echo 64 >$f" &&
		sh -c "echo 64 >$f" && sh -c "echo 64 >$f" && sh -c "echo 64 >$f"; then
		KMEMLEAK_PLANTED=6
	else
		fail kmemleak_sees_planted_leak "no bound controller's kmemleak_control to write (${f:-none})"
	fi
}

# On the debug kernel, fails if kmemleak found anything besides kmemleak_plant's leak (which
# it must find), or is missing. The base kernel has no kmemleak: nothing to check there (the
# manifest lists kmemleak_clean for debug runs only).
kmemleak_check() {
	f=/sys/kernel/debug/kmemleak
	[ "${RNVME_FLAVOUR:-}" = debug ] || return 0
	if [ ! -e $f ]; then
		fail kmemleak_clean "the debug kernel has no $f"
		return
	fi
	# Two scans: kmemleak reports an object left unreferenced by two scans with the same
	# contents. A scan checksums what it finds unreferenced and spares every object that is
	# new or changed since the scan before, so a single scan reports nothing allocated since
	# the previous one (qemu/run turns the periodic scan off). The second scan must also
	# start 5 s after the leak (kmemleak's minimum age).
	t0=$(date +%s)
	echo scan >$f
	left=$((t0 + 6 - $(date +%s)))
	[ "$left" -le 0 ] || sleep "$left"
	echo scan >$f
	n=$(grep -c "unreferenced object" $f || true)
	planted=$(grep -c "rnvme-leak-contr" $f || true)
	if [ -n "${KMEMLEAK_PLANTED:-}" ]; then
		echo "kmemleak: $planted of $KMEMLEAK_PLANTED planted leaks reported"
		if [ "$planted" -ge 1 ] && [ "$planted" -le "$KMEMLEAK_PLANTED" ]; then
			pass kmemleak_sees_planted_leak
		else
			fail kmemleak_sees_planted_leak "$planted of the $KMEMLEAK_PLANTED planted leaks reported"
		fi
	fi
	n=$((n - planted))
	if [ "$n" = 0 ]; then pass kmemleak_clean; else
		fail kmemleak_clean "$n unreferenced objects"
		head -60 $f
	fi
}

# finish: the last line of a guest script. Reports how many tests passed and failed, as
# counted here, for the host to compare with the lines it received; exits 0 only if none
# failed.
finish() {
	kmemleak_check
	report_counts
	exit
}

# report_counts: the RNVME-DONE line alone (finish without the kmemleak scan); false if a
# test failed.
report_counts() {
	npass=$(grep -c '^RNVME-TEST PASS ' "$RNVME_LOCAL_RESULTS")
	nfail=$(grep -c '^RNVME-TEST FAIL ' "$RNVME_LOCAL_RESULTS")
	report "RNVME-DONE passed=$npass failed=$nfail"
	[ "$nfail" -eq 0 ]
}

# abort NAME WHY: a failure after which the script cannot go on (no disk, no driver). The
# tests it would have run are missing, which the host's manifest check reports.
abort() {
	fail "$1" "$2 (giving up)"
	finish
}

# disk_live DEV: DEV is a block device that opens and has a size. Its node appears in
# add_disk before the block device is added (an open then fails with ENXIO) and before the
# disk is announced to udev: a test that waits for the node alone races add_disk. This is
# what a user's tools wait for (udev's add event comes after it).
disk_live() {
	[ -b "$1" ] && [ "$(blockdev --getsz "$1" 2>/dev/null || echo 0)" -gt 0 ]
}

# require_disk NAME DEV [SECONDS]: DEV must become a live disk (not a regular file a test
# would create in devtmpfs, not a node add_disk has not finished), else the script gives up.
require_disk() {
	if wait_for "${3:-20}" disk_live "$2"; then pass "$1"; else abort "$1" "no live block device $2"; fi
}

# run_helper NAME CMD...: runs a helper program that reports its own tests; NAME passes if
# it ran to the end (exit 0: every test passed, 1: some failed, each with its FAIL line).
run_helper() {
	name=$1
	shift
	"$@"
	rc=$?
	if [ $rc -le 1 ]; then pass "$name"; else fail "$name" "'$*' exited $rc"; fi
}

# --- evidence from the emulated device (QEMU's trace, checked by the host) --------------
# trace_mark NAME DEV: reads 3 blocks of DEV in one direct read, near 3/4 of its size (past
# what the tests write; not the end, which partition scans read), 6 blocks further for each
# mark, so the host can find the moment in QEMU's trace (pci_nvme_read of nlb 3 there).
MARKS=0
trace_mark() {
	ss=$(blockdev --getss "$2") sz=$(blockdev --getsz "$2")
	MARKS=$((MARKS + 1))
	k=$((sz * 512 / ss / 4 + MARKS * 2)) # the read is block k of 3 * ss bytes
	# The namespace id from sysfs: the C driver names its disks in the order its parallel
	# scan found them, not by namespace id (the name's number is a fallback).
	nsid=$(cat "/sys/block/${2#/dev/}/nsid" 2>/dev/null || echo "${2##*n}")
	dd if="$2" of=/dev/null bs=$((3 * ss)) skip=$k count=1 iflag=direct 2>/dev/null
	mark "RNVME-TRACE-MARK $1 $nsid $((3 * k)) $ss"
}

# image_write NAME DEV CTRL NSID: writes 1 MiB of random data through DEV (direct, at 5/8
# of its size: past what the tests write, short of trace_mark's blocks) and asks the host to
# find it, after the VM exited, in the image of namespace NSID of QEMU's controller CTRL
# (scripts/test.sh's image_expect reports NAME): the device got the data at the place the
# guest meant, which a read back through the same driver cannot tell. Call it last, before
# the driver is unloaded: nothing may write there after it.
image_write() {
	local sz mib
	sz=$(blockdev --getsize64 "$2" 2>/dev/null) || {
		fail "$1" "cannot open $2"
		return
	}
	mib=$((sz * 5 / 8 / 1048576))
	dd if=/dev/urandom of="/tmp/image-$1" bs=1M count=1 2>/dev/null
	if dd if="/tmp/image-$1" of="$2" bs=1M seek=$mib count=1 oflag=direct 2>/dev/null; then
		mark "RNVME-IMAGE-EXPECT $1 $3 $4 $((mib * 1048576)) 1048576 $(sha256sum <"/tmp/image-$1" | cut -d' ' -f1)"
	else
		fail "$1" "the write through $2 failed"
	fi
}

# --- every submitted command whole (scripts/sqe.py) ------------------------------------
SQDUMPS=0
# sq_dump NAME: the host saves the submission queues of the controller enabled last from
# guest memory (scenarios run by scripts/test.sh's hmp_vm), as dump NAME. It takes them
# within a poll of the results channel; the guest then waits, submitting nothing that could
# wrap a ring or free it. A late dump shows as a check that finds no command, not a pass.
sq_dump() {
	SQDUMPS=$((SQDUMPS + 1))
	mark "RNVME-SQDUMP $SQDUMPS $1"
	sleep 3
}

# sqe_expect NAME DUMP MATCH... -- WANT...: the commands of DUMP with the fields of MATCH
# (at least one) all have the fields of WANT (field=value; scripts/sqe.py lists them).
sqe_expect() {
	mark "RNVME-SQE-EXPECT $*"
}

# sqe_same NAME DUMP-A DUMP-B MATCH-A... -- MATCH-B... -- FIELD...: the one command each
# MATCH selects has the same FIELDs in both dumps (rnvme's and the C driver's).
sqe_same() {
	mark "RNVME-SQE-SAME $*"
}

# sqe_aborts NAME DUMP NSID: the admin queue of DUMP holds an Abort, and each Abort there
# names a command the device received for namespace NSID (QEMU's trace).
sqe_aborts() {
	mark "RNVME-SQE-ABORTS $*"
}

# trace_expect NAME FROM TO OP N REGEX: the host counts QEMU trace lines matching the
# extended REGEX between marks FROM and TO (or start, end); OP (eq, ge, le) compares the
# count with N. The test is NAME, printed by the host.
trace_expect() {
	mark "RNVME-TRACE-EXPECT $1 $2 $3 $4 $5 $6"
}

# trace_absent NAME FROM TO REGEX CONTROL [CONTROL-FROM CONTROL-TO]: no trace line between
# marks FROM and TO matches REGEX, and the positive control CONTROL, a pattern of the same
# event that the window must hold (or the window CONTROL-FROM..CONTROL-TO, where the event
# cannot happen in FROM..TO without the failure checked), matches at least one: a count of
# zero from an event not recorded, or a pattern that fits nothing, fails.
trace_absent() {
	mark "RNVME-TRACE-CONTROL $1 ${6:-$2} ${7:-$3} $5"
	trace_expect "$1" "$2" "$3" eq 0 "$4"
}



# stat_sum CTRL COUNTER [QUEUES-GLOB]: a debugfs queue counter of rnvme controller CTRL,
# summed over its I/O queues (or over the queues QUEUES-GLOB names, e.g. q0). A counter no
# queue file has (renamed, or no such queue) prints -1, which no count check accepts, and
# says so on the console.
stat_sum() {
	grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
	cat /sys/kernel/debug/rnvme$1/${3:-q[1-9]*} 2>/dev/null |
		awk -v k="$2" '$1 == k { s += $2; n++ }
			END { if (n) print s + 0; else { print -1; print "stat_sum: no " k " in debugfs" >"/dev/stderr" } }'
}

# fio_write_verify NAME DISK SIZE SEED [DEPTH]: test NAME passes if fio writes SIZE of 4 KiB
# random blocks to the block device DISK (DEPTH deep, default 16, direct, io_uring) and reads
# them back verified (fio_verified). A DISK that is not a block device fails (fio would
# write and verify a regular file in /dev).
fio_write_verify() {
	local why log="/tmp/fio-$1.log"
	if [ ! -b "$2" ]; then
		fail "$1" "no block device $2"
	elif fio --name="$1" --filename="$2" --rw=randwrite --bs=4k --iodepth="${5:-16}" \
		--ioengine=io_uring --direct=1 --size="$3" --verify=crc32c --randseed="$4" \
		--output="$log" && why=$(fio_verified "$log"); then
		pass "$1"
	else
		fail "$1" "$why"
	fi
}

# fio_verified LOG: fio's output LOG (stderr included) shows a run that verified its data:
# no error, no bad block, a verify phase that started (fio warns that a time-based write
# job with --verify but no --verify_backlog never reads back) and read something back
# ("issued rwts: total=READS,..." of a write job counts its verify reads; a job cut short,
# by a system sleep say, may leave them out of it but not out of its disk stats,
# "ios=READS/WRITES"). Prints why not.
fio_verified() {
	local reads disk
	if grep -qE 'err=[ ]*[1-9]|verify: bad|bad magic|crc32c: verify failed' "$1"; then
		echo "fio: $(grep -m2 -E 'err=|verify|bad' "$1" | tr '\n' ' ')"
		return 1
	fi
	if grep -q 'verification read phase will never start' "$1"; then
		echo "fio never started its verify phase"
		return 1
	fi
	reads=$(sed -nE 's/.*issued rwts: total=([0-9]+),.*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }')
	disk=$(sed -nE 's/.*: ios=([0-9]+)\/.*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }')
	if [ "$reads" -eq 0 ] && [ "$disk" -eq 0 ]; then
		echo "fio read nothing back (issued reads 0; $(grep -m1 -E 'issued rwts' "$1" | tr -s ' ');$(grep -m1 -E ' ios=' "$1" | tr -s ' '); $(grep -m1 -E 'write: IOPS' "$1" | tr -s ' '))"
		return 1
	fi
}
