# SPDX-License-Identifier: GPL-2.0
# `make bench`, guest side: the same fio jobs (bench/*.fio, in /guest/bench) on the C
# driver, rnvme and null_blk, interleaved, REPS times. The host (scripts/bench_report.py)
# reads the results from the console:
#   RNVME-BENCH-RUN <workload> <driver> <rep> <exit status>
#   RNVME-BENCH-CPU <workload> <driver> <rep> <busy ticks> <total ticks>   (/proc/stat, guest-wide)
#   RNVME-BENCH-JSON-BEGIN / base64 of gzipped fio JSON / RNVME-BENCH-JSON-END
#   RNVME-BENCH-DD <workload> <driver> <rep> <bytes> <seconds>
#   RNVME-BENCH-FS <workload> <driver> <rep> <metric> <value> <unit>   (bonnie++, dbench)
#   RNVME-BENCH-CLOCKSOURCE <start|end> <name>   (a change in between: not comparable)
#
# Controllers, in PCI order (scripts/bench.sh makes them identical): 0, 2 and 4 for the C
# driver, 1, 3 and 5 for rnvme (null-co); 6 for the C driver and 7 for rnvme (image files
# in the host's tmpfs); 8 for the C driver and 9 for rnvme (tmpfs images whose writes QEMU
# throttles to THROTTLE_MBPS).
. /guest/lib.sh

REPS=${REPS:-5}
RUNTIME=${RUNTIME:-2}
COST_IOS=${COST_IOS:-20000}
QD_POINTS=${QD_POINTS:-"1 2 4 8 16 32 64"}
BS_POINTS=${BS_POINTS:-"4k 16k 64k 128k 512k"}
# nvmecontrol perftest's outstanding requests and transfer sizes.
PERF_N=${PERF_N:-"16 32 64"}
PERF_SIZES=${PERF_SIZES:-"4k 128k"}
FS_SECONDS=${FS_SECONDS:-10}
# ONLY: a regular expression; only the workloads it matches run (to try one out).
ONLY=${ONLY:-}
THROTTLE_MBPS=${THROTTLE_MBPS:-8}
NCPU=$(grep -c ^processor /proc/cpuinfo)
cd /guest/bench || exit 1
CLOCKSOURCE=/sys/devices/system/clocksource/clocksource0/current_clocksource
echo "RNVME-BENCH-CLOCKSOURCE start $(cat $CLOCKSOURCE)"

i=0
for pci in $(nvme_pci_devices | sort); do
	case $i in 0 | 2 | 4 | 6 | 8) drv=nvme ;; *) drv=rnvme ;; esac
	echo $drv >"/sys/bus/pci/devices/$pci/driver_override"
	eval "PCI$i=$pci"
	i=$((i + 1))
done
[ $i -eq 10 ] || { echo "bench: want 10 NVMe controllers, found $i"; exit 1; }
# One polled queue each, for the IOPOLL workload.
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko poll_queues=1 ${C_ARGS:-} || exit 1
insmod /lib/rnvme.ko poll_queues=1 ${RNVME_ARGS:-} || exit 1
# null_blk without completion delay: the block layer's own ceiling.
insmod /lib/c/null_blk.ko queue_mode=2 irqmode=0 submit_queues=$NCPU poll_queues=1 hw_queue_depth=256 \
	nr_devices=3 gb=1 bs=512 || exit 1
# And one that keeps its data, for the filesystem workloads (configfs: the module's own
# devices above stay data-less); the disk takes the configfs item's name, /dev/nullfs.
mkdir /sys/kernel/config 2>/dev/null
mount -t configfs none /sys/kernel/config || exit 1
mkdir /sys/kernel/config/nullb/nullfs || exit 1
for kv in size=1024 blocksize=512 memory_backed=1 irqmode=0 queue_mode=2 submit_queues=$NCPU \
	hw_queue_depth=256 power=1; do
	echo "${kv#*=}" >"/sys/kernel/config/nullb/nullfs/${kv%%=*}" || exit 1
done

# disk_of PCI: the disk on that controller.
disk_of() {
	local b
	for b in /sys/block/*; do
		case $(readlink -f "$b") in */$1/*) basename "$b" && return ;; esac
	done
}
for n in 0 1 2 3 4 5 6 7 8 9; do
	eval pci=\$PCI$n
	wait_for 30 sh -c "ls -l /sys/block/ | grep -q $pci" || { echo "bench: no disk on $pci"; exit 1; }
	eval "D$n=/dev/$(disk_of "$pci")"
done
echo "bench: C driver $D0 $D2 $D4 (tmpfs $D6, throttled $D8), rnvme $D1 $D3 $D5 (tmpfs $D7, throttled $D9)"
echo "bench: null_blk /dev/nullb0 /dev/nullb1 /dev/nullb2, memory-backed /dev/nullfs"
echo "bench: $NCPU CPUs, $REPS repetitions, ${RUNTIME}s per run"
grep -H . /sys/block/$(basename $D0)/queue/nr_requests /sys/block/$(basename $D1)/queue/nr_requests

# dev DRIVER [WHICH]: a driver's first device, or its second or third (2, 3), its tmpfs
# one (T) or its throttled one (S: slow); null_blk's memory-backed one stands for T and S.
dev() {
	case $1$2 in
	c) echo $D0 ;; c2) echo $D2 ;; c3) echo $D4 ;; cT) echo $D6 ;; cS) echo $D8 ;;
	r) echo $D1 ;; r2) echo $D3 ;; r3) echo $D5 ;; rT) echo $D7 ;; rS) echo $D9 ;;
	n) echo /dev/nullb0 ;; n2) echo /dev/nullb1 ;; n3) echo /dev/nullb2 ;;
	nT | nS) echo /dev/nullfs ;;
	esac
}
# generic DRIVER: the generic character device of the driver's first namespace disk.
generic() { dev $1 | sed 's|^/dev/nvme|/dev/ng|; s|^/dev/rnvme|/dev/rng|'; }
name() { case $1 in c) echo nvme ;; r) echo rnvme ;; n) echo null_blk ;; esac; }

busy_total() {
	# cpu user nice system idle iowait irq softirq steal ...
	head -1 /proc/stat | awk '{t=0; for (i=2; i<=NF; i++) t+=$i; print t-$5-$6, t}'
}

# want WORKLOAD: whether ONLY selects it.
want() { [ -z "$ONLY" ] || echo "$1" | grep -Eq "$ONLY"; }

# fio_run WORKLOAD DRIVER REP JOB VAR=VALUE...
fio_run() {
	local wl=$1 d=$2 rep=$3 job=$4 rc b0 b1
	want "$wl" || return 0
	shift 4
	set -- "$@" NCPU=$NCPU RUNTIME=$RUNTIME
	b0=$(busy_total)
	env "$@" fio --output-format=json --output=/tmp/r.json "$job" >/tmp/fio.err 2>&1
	rc=$?
	b1=$(busy_total)
	echo "RNVME-BENCH-RUN $wl $(name $d) $rep $rc"
	[ $rc -eq 0 ] || tail -5 /tmp/fio.err
	echo "$b0 $b1" | awk -v h="RNVME-BENCH-CPU $wl $(name $d) $rep" '{print h, $3-$1, $4-$2}'
	echo RNVME-BENCH-JSON-BEGIN
	gzip -c /tmp/r.json | base64
	echo RNVME-BENCH-JSON-END
}

# dd_run WORKLOAD DRIVER REP [BS COUNT]
dd_run() {
	local wl=$1 d=$2 rep=$3 bs=${4:-1M} count=${5:-1024} b0 b1 out
	want "$wl" || return 0
	b0=$(busy_total)
	# coreutils dd (busybox's prints no rate): by path, the shell prefers its applets.
	out=$(/usr/bin/dd if="$(dev $d)" of=/dev/null bs=$bs count=$count iflag=direct 2>&1 | tail -1)
	b1=$(busy_total)
	# "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.2345 s, 870 MB/s"
	echo "$out" | awk -v h="RNVME-BENCH-DD $wl $(name $d) $rep" -v bs="$bs" '{print h, $1, $(NF-3), bs}'
	echo "$b0 $b1" | awk -v h="RNVME-BENCH-CPU $wl $(name $d) $rep" '{print h, $3-$1, $4-$2}'
}

# fs_metric WORKLOAD DRIVER REP METRIC VALUE UNIT
fs_metric() { echo "RNVME-BENCH-FS $1 $(name $2) $3 $4 $5 $6"; }

# fs_prepare DRIVER WHICH FSTYPE: a new filesystem of FSTYPE on the device, mounted on /mnt.
fs_prepare() {
	local dv
	dv=$(dev "$1" "$2")
	case $3 in
	ext4) mkfs.ext4 -q -F "$dv" ;;
	xfs) mkfs.xfs -q -f "$dv" ;;
	esac >/tmp/mkfs.log 2>&1 && mount -t "$3" "$dv" /mnt
}

# bonnie_run WORKLOAD DRIVER REP FSTYPE: bonnie++'s block output, block input (O_DIRECT)
# and random seeks on a new filesystem on the driver's tmpfs-backed device.
bonnie_run() {
	local wl=$1 d=$2 rep=$3 fs=$4 csv rc=1
	want "$wl" || return 0
	if fs_prepare "$d" T "$fs"; then
		mkdir -p /mnt/b
		# 512 MiB in 64 KiB chunks: every phase lasts long enough to be timed here.
		csv=$(bonnie++ -d /mnt/b -s 512:65536 -r 256 -n 0 -f -D -u root -q \
			2>/tmp/bonnie.err | tail -1)
		# 2.00 CSV: field 12 block output KiB/s, 18 block input KiB/s, 20 seeks/s;
		# "+++++" when a phase was too short to time (then that figure is left out; the
		# two block figures are required).
		echo "$csv" | awk -F, -v wl="$wl" -v drv="$(name "$d")" -v rep="$rep" '
			NF > 20 && $12 ~ /^[0-9]+$/ && $18 ~ /^[0-9]+$/ {
				printf "RNVME-BENCH-FS %s %s %s seq_out %.1f MB/s\n", wl, drv, rep, $12 / 1000
				printf "RNVME-BENCH-FS %s %s %s seq_in %.1f MB/s\n", wl, drv, rep, $18 / 1000
				if ($20 ~ /^[0-9.]+$/)
					printf "RNVME-BENCH-FS %s %s %s seeks %s /s\n", wl, drv, rep, $20
				ok = 1 }
			END { exit !ok }' && rc=0
		[ $rc -eq 0 ] || echo "bonnie++: $csv $(tail -2 /tmp/bonnie.err)"
		umount /mnt || rc=1
	else
		cat /tmp/mkfs.log
	fi
	echo "RNVME-BENCH-RUN $wl $(name "$d") $rep $rc"
}

# dbench_run WORKLOAD DRIVER REP FSTYPE WHICH [SYNC]: dbench's throughput with 4 clients
# for FS_SECONDS on a new filesystem (SYNC: -s, every file opened O_SYNC).
dbench_run() {
	local wl=$1 d=$2 rep=$3 fs=$4 which=$5 sync=${6:-} out rc=1
	want "$wl" || return 0
	if fs_prepare "$d" "$which" "$fs"; then
		out=$(dbench -c /usr/share/dbench/client.txt -D /mnt -t "$FS_SECONDS" $sync 4 2>&1 |
			grep '^Throughput' | tail -1)
		# "Throughput 123.456 MB/sec  4 clients  4 procs  max_latency=12.345 ms"
		echo "$out" | awk -v h="RNVME-BENCH-FS $wl $(name "$d") $rep" -v t="$FS_SECONDS" \
			'$1 == "Throughput" { print h, "throughput", $2, "MB/s"; print h, "seconds", t, "s"
				ok = 1 } END { exit !ok }' &&
			rc=0
		[ $rc -eq 0 ] || echo "dbench: no throughput: $out"
		umount /mnt || rc=1
	else
		cat /tmp/mkfs.log
	fi
	echo "RNVME-BENCH-RUN $wl $(name "$d") $rep $rc"
}

# Drivers in the order of a repetition: C and rnvme alternate who goes first.
order() { if [ $(($1 % 2)) -eq 1 ]; then echo "c r n"; else echo "r c n"; fi; }

rep=1
while [ $rep -le "$REPS" ]; do
	echo "bench: repetition $rep of $REPS"
	for w in randread-4k-qd1 randread-4k-qd1-poll randread-4k-qd32 randwrite-4k-qd32 \
		seqread-128k-qd8 seqwrite-128k-qd8 seqread-512k-qd4; do
		for d in $(order $rep); do fio_run $w $d $rep $w.fio DEV="$(dev $d)"; done
	done
	for qd in $QD_POINTS; do
		for d in $(order $rep); do fio_run sweep-qd-$qd $d $rep sweep-qd.fio DEV="$(dev $d)" QD=$qd; done
	done
	for bs in $BS_POINTS; do
		for d in $(order $rep); do fio_run sweep-bs-$bs $d $rep sweep-bs.fio DEV="$(dev $d)" BS=$bs; done
	done
	for d in $(order $rep); do
		fio_run aggregate-2ctrl $d $rep aggregate.fio DEV="$(dev $d)" DEV2="$(dev $d 2)"
	done
	for d in $(order $rep); do dd_run dd-1m $d $rep; done
	# nvmecontrol perftest -n N -s SIZE: N threads with one read each outstanding.
	for size in $PERF_SIZES; do
		for n in $PERF_N; do
			for d in $(order $rep); do
				fio_run perftest-$size-$n $d $rep perftest.fio DEV="$(dev $d)" BS=$size N=$n
			done
		done
		for d in $(order $rep); do
			case $size in 4k) dd_run dd-$size $d $rep 4k 16384 ;; *) dd_run dd-$size $d $rep $size 2048 ;; esac
		done
	done
	# The same reads as NVMe passthrough through io_uring, on the generic devices (no
	# null_blk: it has no NVMe passthrough).
	for size in $PERF_SIZES; do
		for n in $PERF_N; do
			for d in $(order $rep); do
				[ $d = n ] && continue
				fio_run passthru-$size-$n $d $rep passthru.fio DEV="$(generic $d)" BS=$size N=$n
			done
		done
	done
	# The CPU-bound case of the FreeBSD and DragonFly reports: 512-byte random reads, 32
	# jobs on each of three controllers at once.
	for d in $(order $rep); do
		fio_run randread-512-32jobs-3ctrl $d $rep randread-512-3ctrl.fio \
			DEV="$(dev $d)" DEV2="$(dev $d 2)" DEV3="$(dev $d 3)"
	done
	for fs in ext4 xfs; do
		for d in $(order $rep); do bonnie_run bonnie-$fs $d $rep $fs; done
		for d in $(order $rep); do dbench_run dbench-$fs $d $rep $fs T; done
	done
	# Synchronous writes on a disk QEMU throttles: never faster than the throttle, or a
	# flush or FUA was not honoured (the dbench report's question). null_blk: no throttle.
	for d in $(order $rep); do
		[ $d = n ] && continue
		dbench_run dbench-sync-throttled $d $rep ext4 S -s
		if want fsync-write-throttled; then
			fs_prepare $d S ext4 &&
				fio_run fsync-write-throttled $d $rep fsync-write.fio DEV=/mnt/f
			umount /mnt 2>/dev/null
		fi
	done
	for d in $(order $rep); do
		[ $d = n ] || fio_run tmpfs-randrw-4k-qd32 $d $rep tmpfs-randrw-4k-qd32.fio DEV="$(dev $d T)"
	done
	for d in $(order $rep); do fio_run cost-qd1 $d $rep cost-qd1.fio DEV="$(dev $d)" IOS=$COST_IOS; done
	rep=$((rep + 1))
done
echo "RNVME-BENCH-CLOCKSOURCE end $(cat $CLOCKSOURCE)"
echo "RNVME-BENCH-DONE"
echo 0 >/sys/kernel/config/nullb/nullfs/power && rmdir /sys/kernel/config/nullb/nullfs
rmmod null_blk rnvme nvme nvme-core
