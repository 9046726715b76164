# SPDX-License-Identifier: GPL-2.0
# `make bench`, cost per I/O: one vCPU, the icount QEMU plugin counting instructions, and
# qemu/helpers/iocost doing COST_IOS 4 KiB reads one at a time between two marks, on the
# C driver, rnvme and null_blk in turn, REPS times. The host pairs the plugin's marks with
#   RNVME-COST-RUN <run number> <driver> <rep>
# Controllers in PCI order: 0 for the C driver, 1 for rnvme (null-co).
. /guest/lib.sh

REPS=${REPS:-5}
COST_IOS=${COST_IOS:-20000}
assign_drivers nvme rnvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko && insmod /lib/rnvme.ko || exit 1
insmod /lib/c/null_blk.ko queue_mode=2 irqmode=0 submit_queues=1 hw_queue_depth=256 \
	nr_devices=1 gb=1 bs=512 || exit 1
wait_for 30 disk_live /dev/nvme0n1 && wait_for 30 disk_live /dev/rnvme0n1 || exit 1
# Every read checks the device node's atime (relatime compares it with mtime and ctime, to
# the nanosecond when the seconds are equal): the nodes' timestamps, not the driver, chose
# the path, 11 instructions apart. The same old mtime for all, a ctime a second before the
# first read: every read takes the same path on every node.
touch -t 202001010000 /dev/nvme0n1 /dev/rnvme0n1 /dev/nullb0 && sleep 1 || exit 1
# The modules' functions by address, for the host to name the drivers' own code (before the
# first mark: printing them is not counted).
grep -E '^[0-9a-f]+ [tT] .*\[(rnvme|nvme|nvme_core|null_blk)\]' /proc/kallsyms | sed 's/^/KSYM /'

# Repetition 0 warms up, and the report leaves it out: within the first minute after boot
# the kernel does one large batch of deferred work (about 2.4 million instructions freeing
# pages), which lands in whichever run is going on then.
run=0
rep=0
while [ $rep -le "$REPS" ]; do
	if [ $((rep % 2)) -eq 1 ]; then order="nvme rnvme null_blk"; else order="rnvme nvme null_blk"; fi
	for d in $order; do
		case $d in nvme) dev=/dev/nvme0n1 ;; rnvme) dev=/dev/rnvme0n1 ;; null_blk) dev=/dev/nullb0 ;; esac
		run=$((run + 1))
		echo "RNVME-COST-RUN $run $d $rep"
		iocost $dev "$COST_IOS" || exit 1
	done
	rep=$((rep + 1))
done
echo "RNVME-COST-DONE"
rmmod null_blk rnvme nvme nvme-core
