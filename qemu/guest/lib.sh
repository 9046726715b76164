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

# PCI addresses bound to a driver.
bound_to() {
	ls /sys/bus/pci/drivers/"$1" 2>/dev/null | grep -E '^[0-9a-f]{4}:' || true
}

count() { grep -c . || true; }

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

# On the debug kernel, fails if kmemleak found anything, or is missing. The base kernel has
# no kmemleak: nothing to check there (the manifest lists kmemleak_clean for debug runs only).
kmemleak_check() {
	f=/sys/kernel/debug/kmemleak
	[ "${RNVME_FLAVOUR:-}" = debug ] || return 0
	if [ ! -e $f ]; then
		fail kmemleak_clean "the debug kernel has no $f"
		return
	fi
	# kmemleak only reports objects older than 5 s, found unreferenced by two scans.
	sleep 6
	echo scan >$f
	echo scan >$f
	n=$(grep -c "unreferenced object" $f || true)
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

# require_disk NAME DEV [SECONDS]: DEV must become a block device (not a regular file a
# test would create in devtmpfs), else the script gives up.
require_disk() {
	if wait_for "${3:-20}" test -b "$2"; then pass "$1"; else abort "$1" "no block device $2"; fi
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

# trace_expect NAME FROM TO OP N REGEX: the host counts QEMU trace lines matching the
# extended REGEX between marks FROM and TO (or start, end); OP (eq, ge, le) compares the
# count with N. The test is NAME, printed by the host.
trace_expect() {
	mark "RNVME-TRACE-EXPECT $1 $2 $3 $4 $5 $6"
}



# stat_sum CTRL COUNTER [QUEUES-GLOB]: a debugfs queue counter of rnvme controller CTRL,
# summed over its I/O queues (or over the queues QUEUES-GLOB names, e.g. q0).
stat_sum() {
	grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
	cat /sys/kernel/debug/rnvme$1/${3:-q[1-9]*} 2>/dev/null |
		awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'
}
