# SPDX-License-Identifier: GPL-2.0
# Helpers for guest test scripts. Each test prints one line the host counts:
#   RNVME-TEST PASS <name>
#   RNVME-TEST FAIL <name>: <why>

FAILED=0

pass() { echo "RNVME-TEST PASS $1"; }
fail() {
	echo "RNVME-TEST FAIL $1: $2"
	FAILED=$((FAILED + 1))
}

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

# On a kernel with kmemleak (the debug flavour), fails if anything leaked.
kmemleak_check() {
	f=/sys/kernel/debug/kmemleak
	[ -e $f ] || return 0
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

finish() {
	kmemleak_check
	echo "guest tests done: $FAILED failed"
	[ "$FAILED" -eq 0 ]
}

# stat_sum CTRL COUNTER [QUEUES-GLOB]: a debugfs queue counter of rnvme controller CTRL,
# summed over its I/O queues (or over the queues QUEUES-GLOB names, e.g. q0).
stat_sum() {
	grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
	cat /sys/kernel/debug/rnvme$1/${3:-q[1-9]*} 2>/dev/null |
		awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'
}
