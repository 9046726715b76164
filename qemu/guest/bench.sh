# SPDX-License-Identifier: GPL-2.0
# `make bench`, guest side: the same fio jobs (bench/*.fio, in /guest/bench) on the C
# driver, rnvme and null_blk, interleaved, REPS times. The host (scripts/bench_report.py)
# reads the results from the console:
#   RNVME-BENCH-RUN <workload> <driver> <rep> <exit status>
#   RNVME-BENCH-CPU <workload> <driver> <rep> <busy ticks> <total ticks>   (/proc/stat, guest-wide)
#   RNVME-BENCH-JSON-BEGIN / base64 of gzipped fio JSON / RNVME-BENCH-JSON-END
#   RNVME-BENCH-DD <workload> <driver> <rep> <bytes> <seconds>
#
# Controllers, in PCI order (scripts/bench.sh makes them identical): 0 and 2 for the C
# driver, 1 and 3 for rnvme (null-co), 4 for the C driver and 5 for rnvme (image files in
# the host's tmpfs).
. /guest/lib.sh

REPS=${REPS:-5}
RUNTIME=${RUNTIME:-2}
COST_IOS=${COST_IOS:-20000}
QD_POINTS=${QD_POINTS:-"1 2 4 8 16 32 64"}
BS_POINTS=${BS_POINTS:-"4k 16k 64k 128k 512k"}
NCPU=$(grep -c ^processor /proc/cpuinfo)
cd /guest/bench || exit 1

i=0
for pci in $(nvme_pci_devices | sort); do
	case $i in 0 | 2 | 4) drv=nvme ;; *) drv=rnvme ;; esac
	echo $drv >"/sys/bus/pci/devices/$pci/driver_override"
	eval "PCI$i=$pci"
	i=$((i + 1))
done
[ $i -eq 6 ] || { echo "bench: want 6 NVMe controllers, found $i"; exit 1; }
# One polled queue each, for the IOPOLL workload.
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko poll_queues=1 || exit 1
insmod /lib/rnvme.ko poll_queues=1 ${RNVME_ARGS:-} || exit 1
# null_blk without completion delay: the block layer's own ceiling.
insmod /lib/c/null_blk.ko queue_mode=2 irqmode=0 submit_queues=$NCPU poll_queues=1 hw_queue_depth=256 \
	nr_devices=2 gb=1 bs=512 || exit 1

# disk_of PCI: the disk on that controller.
disk_of() {
	local b
	for b in /sys/block/*; do
		case $(readlink -f "$b") in */$1/*) basename "$b" && return ;; esac
	done
}
for n in 0 1 2 3 4 5; do
	eval pci=\$PCI$n
	wait_for 30 sh -c "ls -l /sys/block/ | grep -q $pci" || { echo "bench: no disk on $pci"; exit 1; }
	eval "D$n=/dev/$(disk_of "$pci")"
done
echo "bench: C driver $D0 $D2 (tmpfs $D4), rnvme $D1 $D3 (tmpfs $D5), null_blk /dev/nullb0 /dev/nullb1"
echo "bench: $NCPU CPUs, $REPS repetitions, ${RUNTIME}s per run"
grep -H . /sys/block/$(basename $D0)/queue/nr_requests /sys/block/$(basename $D1)/queue/nr_requests

# dev DRIVER [SECOND]: the first (or second) device of a driver; tmpfs ones with T.
dev() {
	case $1$2 in
	c) echo $D0 ;; c2) echo $D2 ;; cT) echo $D4 ;;
	r) echo $D1 ;; r2) echo $D3 ;; rT) echo $D5 ;;
	n) echo /dev/nullb0 ;; n2) echo /dev/nullb1 ;;
	esac
}
name() { case $1 in c) echo nvme ;; r) echo rnvme ;; n) echo null_blk ;; esac; }

busy_total() {
	# cpu user nice system idle iowait irq softirq steal ...
	head -1 /proc/stat | awk '{t=0; for (i=2; i<=NF; i++) t+=$i; print t-$5-$6, t}'
}

# fio_run WORKLOAD DRIVER REP JOB VAR=VALUE...
fio_run() {
	local wl=$1 d=$2 rep=$3 job=$4 rc b0 b1
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

dd_run() {
	local wl=$1 d=$2 rep=$3 b0 b1 out
	b0=$(busy_total)
	# coreutils dd (busybox's prints no rate): by path, the shell prefers its applets.
	out=$(/usr/bin/dd if="$(dev $d)" of=/dev/null bs=1M count=1024 iflag=direct 2>&1 | tail -1)
	b1=$(busy_total)
	# "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.2345 s, 870 MB/s"
	echo "$out" | awk -v h="RNVME-BENCH-DD $wl $(name $d) $rep" '{print h, $1, $(NF-3)}'
	echo "$b0 $b1" | awk -v h="RNVME-BENCH-CPU $wl $(name $d) $rep" '{print h, $3-$1, $4-$2}'
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
	for d in $(order $rep); do
		[ $d = n ] || fio_run tmpfs-randrw-4k-qd32 $d $rep tmpfs-randrw-4k-qd32.fio DEV="$(dev $d T)"
	done
	for d in $(order $rep); do fio_run cost-qd1 $d $rep cost-qd1.fio DEV="$(dev $d)" IOS=$COST_IOS; done
	rep=$((rep + 1))
done
echo "RNVME-BENCH-DONE"
rmmod null_blk rnvme nvme nvme-core
