# SPDX-License-Identifier: GPL-2.0
# Scale: memory, time to every disk and time to unbind, rnvme against the C driver on the
# same controllers, one driver at a time. qemu/run gives the guest many vCPUs (each
# driver makes a queue per possible CPU) and eight controllers, the first (in PCI order)
# with NS_BIG namespaces, the others one each. Only ONLINE CPUs stay online (below).
#
# For each queue depth in DEPTHS, each driver (the order alternates with the depth):
#  - bring-up: every controller bound at once by loading the module; the time from insmod
#    until every disk and generic device exists (the better of two loads), the memory the
#    driver then holds, the time rmmod takes;
#  - breakdown: the one-namespace controllers bound first (memory per controller and per
#    I/O queue: theirs over their queues), then the big one (memory per namespace: what it
#    took beyond a one-namespace controller, over its other namespaces).
# Memory is MemTotal - MemFree - Buffers - Cached, less the pages on per-CPU free lists,
# after dropping caches and shrinking the slab caches: the median of three samples.
#
# Prints one RNVME-SCALE line per driver, depth and repetition (REPS: the bench report's
# scale table takes their medians); with CHECK=1 (make test) also checks, on the last, rnvme against C: memory per I/O queue at most 1.2x C's,
# bring-up at most 1.5x C's, and that both measured something (at least 256 bytes per tag
# per queue: less is not a tag set).
. /guest/lib.sh
DEPTHS=${DEPTHS:-"256 1024"}
NS_BIG=${NS_BIG:-64}
CHECK=${CHECK:-1}
REPS=${REPS:-1}
ONLINE=${ONLINE:-2}

CTRLS=$(nvme_pci_devices | sort)
N=$(echo "$CTRLS" | count)
BIG=$(echo "$CTRLS" | head -1)
SMALL=$(echo "$CTRLS" | tail -n +2)

# mem_kib: memory in use (KiB) that no cache holds; the median of three samples.
mem_sample() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	for f in /sys/kernel/slab/*/shrink; do echo 1 >"$f"; done 2>/dev/null
	pcp=$(awk '$1 == "count:" { s += $2 } END { print s + 0 }' /proc/zoneinfo)
	awk -v pcp="$pcp" '/^MemTotal:/ { t = $2 } /^MemFree:/ { f = $2 } /^Buffers:/ { b = $2 }
		/^Cached:/ { c = $2 } END { print t - f - b - c - pcp * 4 }' /proc/meminfo
}
mem_kib() {
	{ mem_sample; sleep 0.3; mem_sample; sleep 0.3; mem_sample; } | sort -n | sed -n 2p
}

# load DRIVER DEPTH / unload DRIVER: the module (C's nvme-core stays loaded).
load() {
	case $1 in
	rnvme) insmod /lib/rnvme.ko io_queue_depth="$2" ;;
	nvme) insmod /lib/c/nvme.ko io_queue_depth="$2" ;;
	esac
}
unload() { rmmod "$1"; }

# override DRIVER PCI...: driver_override of each PCI function.
override() {
	local d=$1 p
	shift
	for p in "$@"; do echo "$d" >"/sys/bus/pci/devices/$p/driver_override"; done
}

# ioqueues DRIVER PCI...: the I/O queues of those controllers (queue_count less the admin
# queue), as each driver's sysfs shows them; 0 if one cannot be read.
ioqueues() {
	local d=$1 p q s=0 f
	shift
	for p in "$@"; do
		if [ "$d" = rnvme ]; then f=$(ls -d /sys/bus/pci/devices/"$p"/misc/rnvme*/queue_count)
		else f=$(ls -d /sys/bus/pci/devices/"$p"/nvme/nvme*/queue_count); fi
		q=$(cat "$f" 2>/dev/null) || { echo 0; return; }
		s=$((s + q - 1))
	done
	echo $s
}

# up DRIVER N: N of DRIVER's disks and as many of its generic devices (rng<C>n<N>,
# ng<C>n<N>) exist. Both drivers make a namespace's generic device after its disk is
# added (live, its partitions read): the test kernels have no uevents to wait for (no
# netlink, no helper).
up() {
	[ "$(ls /sys/block | grep -cE "^$1[0-9]+n[0-9]+\$")" -ge "$2" ] &&
		[ "$(ls /dev | grep -cE "^$([ "$1" = rnvme ] && echo r)ng[0-9]+n[0-9]+\$")" -ge "$2" ]
}

# big_disks DRIVER: the disks of the big controller (rnvme's are children of its PCI
# function, C's of its nvme<N> device).
big_disks() {
	if [ "$1" = rnvme ]; then ls /sys/bus/pci/devices/"$BIG"/block 2>/dev/null | count
	else ls /sys/bus/pci/devices/"$BIG"/nvme/nvme*/ 2>/dev/null | grep -cE '^nvme[0-9]+n[0-9]+$' || true; fi
}

# ms A B: milliseconds from uptime A to uptime B (-1 without B: nothing happened).
ms() {
	if [ -z "$2" ]; then echo -1; return; fi
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'
}

# disks DRIVER: how many of DRIVER's disks sysfs shows.
disks() { ls /sys/block | grep -cE "^$1[0-9]+n[0-9]+\$" || true; }

# measure DRIVER DEPTH: both phases; sets BRINGUP_MS UNBIND_MS MEM PER_CTRL PER_QUEUE
# PER_NS QUEUES (KiB, ms).
measure() {
	local d=$1 depth=$2 want=$((NS_BIG + N - 1)) m0 m1 m2 t0 t2 small qs
	# Bring-up: every controller at once.
	override "$d" $CTRLS
	m0=$(mem_kib)
	t0=$(now_s)
	check "scale_${depth}_${d}_loads" load "$d" "$depth"
	if wait_for 300 up "$d" "$want"; then
		BRINGUP_MS=$(ms "$t0" "$(now_s)")
		pass "scale_${depth}_${d}_all_disks"
	else
		BRINGUP_MS=-1
		fail "scale_${depth}_${d}_all_disks" "$(disks "$d") of $want disks up within 300 s"
	fi
	MEM=$(($(mem_kib) - m0))
	QUEUES=$(ioqueues "$d" $CTRLS)
	t2=$(now_s)
	check "scale_${depth}_${d}_unloads" unload "$d"
	UNBIND_MS=$(ms "$t2" "$(now_s)")
	# A second bring-up, timed alone: the better of the two counts (the first load of a
	# module also reads it in and links it).
	t0=$(now_s)
	load "$d" "$depth"
	if wait_for 300 up "$d" "$want"; then
		t2=$(ms "$t0" "$(now_s)")
		[ "$BRINGUP_MS" -ge 0 ] && [ "$BRINGUP_MS" -le "$t2" ] || BRINGUP_MS=$t2
	fi
	unload "$d"
	# Breakdown: the one-namespace controllers, then the big one.
	override none "$BIG"
	m0=$(mem_kib)
	load "$d" "$depth"
	if wait_for 300 up "$d" $((N - 1)); then
		m1=$(mem_kib)
		qs=$(ioqueues "$d" $SMALL)
		override "$d" "$BIG"
		echo "$BIG" >/sys/bus/pci/drivers/"$d"/bind
		if wait_for 300 up "$d" "$want"; then
			pass "scale_${depth}_${d}_breakdown"
		else
			fail "scale_${depth}_${d}_breakdown" "$(disks "$d") of $want disks with the big controller"
		fi
		m2=$(mem_kib)
	else
		fail "scale_${depth}_${d}_breakdown" "$(disks "$d") of $((N - 1)) disks of the small controllers"
		m1=$m0 m2=$m0 qs=1
	fi
	# The big controller is the one with NS_BIG namespaces, else the breakdown measured
	# the wrong one; and every controller's queues were read.
	expect_eq "scale_${depth}_${d}_big_controller_first" "$NS_BIG" "$(big_disks "$d")"
	if [ "$qs" -gt 0 ] && [ "$QUEUES" -gt 0 ]; then pass "scale_${depth}_${d}_queues_read"; else
		fail "scale_${depth}_${d}_queues_read" "I/O queues: $qs of the small controllers, $QUEUES of all"
		qs=1
	fi
	small=$((m1 - m0))
	PER_CTRL=$((small / (N - 1)))
	PER_QUEUE=$((small / qs))
	PER_NS=$(((m2 - m1 - PER_CTRL) / (NS_BIG - 1)))
	unload "$d"
	mark "RNVME-SCALE driver=$d depth=$depth ctrls=$N namespaces=$want queues=$QUEUES" \
		"bringup_ms=$BRINGUP_MS unbind_ms=$UNBIND_MS mem_kib=$MEM per_ctrl_kib=$PER_CTRL" \
		"per_queue_kib=$PER_QUEUE per_ns_kib=$PER_NS"
}

insmod /lib/c/nvme-core.ko || abort scale_c_core_loads "insmod nvme-core failed"
# Both drivers size their queues by the possible CPUs; the work runs on ONLINE of them (the
# host's cores): more busy vCPUs than host cores under TCG turn every preempted lock holder
# into a stall of a host time slice, which would measure the emulation, not the drivers.
VCPUS=$(ls -d /sys/devices/system/cpu/cpu[0-9]* | count)
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	[ "${c##*cpu}" -lt "$ONLINE" ] || echo 0 >"$c/online"
done
mark "RNVME-SCALE-SETUP vcpus=$VCPUS online=$(nproc) ctrls=$N big=$BIG ns_big=$NS_BIG"
order="rnvme nvme"
rep=0
while [ $rep -lt "$REPS" ]; do
rep=$((rep + 1))
for depth in $DEPTHS; do
	for d in $order; do
		measure "$d" "$depth"
		eval "R_${d}_BRINGUP=$BRINGUP_MS R_${d}_UNBIND=$UNBIND_MS R_${d}_MEM=$MEM"
		eval "R_${d}_PQ=$PER_QUEUE R_${d}_PNS=$PER_NS"
	done
	order=$(echo "$order" | awk '{ print $2, $1 }')
	[ "$CHECK" = 1 ] && [ $rep = "$REPS" ] || continue
	# Each driver's memory per I/O queue holds at least its tags: 256 bytes each.
	floor=$((depth / 4))
	for d in rnvme nvme; do
		eval "pq=\$R_${d}_PQ"
		if [ "$pq" -ge "$floor" ]; then pass "scale_${depth}_${d}_memory_measured"
		else fail "scale_${depth}_${d}_memory_measured" "$pq KiB per I/O queue, less than its $depth tags take ($floor KiB)"; fi
	done
	if [ $((R_rnvme_PQ * 5)) -le $((R_nvme_PQ * 6)) ]; then pass "scale_${depth}_memory_per_queue_within_1.2x_c"
	else fail "scale_${depth}_memory_per_queue_within_1.2x_c" "rnvme $R_rnvme_PQ KiB per I/O queue, C $R_nvme_PQ KiB"; fi
	if [ "$R_rnvme_BRINGUP" -ge 0 ] && [ $((R_rnvme_BRINGUP * 2)) -le $((R_nvme_BRINGUP * 3)) ]; then pass "scale_${depth}_bringup_within_1.5x_c"
	else fail "scale_${depth}_bringup_within_1.5x_c" "rnvme ${R_rnvme_BRINGUP} ms to every disk, C ${R_nvme_BRINGUP} ms"; fi
done
done
mark RNVME-SCALE-DONE
finish
