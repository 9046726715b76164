# SPDX-License-Identifier: GPL-2.0
# `make profile`, guest side: COST_IOS reads of BS (4 KiB) one at a time (or QD at a time) on the
# C driver, then on rnvme, each bracketed by the icount plugin's marks (qemu/helpers/iocost); then the
# modules' symbols for scripts/icount_profile.py.
. /guest/lib.sh

COST_IOS=${COST_IOS:-5000}
# QD > 1 or a size other than 4k: fio (io_uring) keeps QD reads of BS in flight, BATCH per
# submission, bracketed by `iocost mark`; its start and exit are counted too, the same on
# both drivers.
QD=${QD:-1}
BS=${BS:-4k}
BATCH=${BATCH:-1}
# PASSTHRU=1: the reads are NVMe passthrough through io_uring (fio io_uring_cmd) on the
# namespaces' generic devices (/dev/ng0n1, /dev/rng0n1).
PASSTHRU=${PASSTHRU:-}
assign_drivers nvme rnvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko && insmod /lib/rnvme.ko || exit 1
wait_for 30 disk_live /dev/nvme0n1 && wait_for 30 disk_live /dev/rnvme0n1 || exit 1
# Every read checks the device node's atime (relatime compares it with mtime and ctime, to
# the nanosecond when the seconds are equal): the nodes' timestamps, not the driver, chose
# the path, 11 instructions apart. The same old mtime for all, a ctime a second before the
# first read: every read takes the same path on every node.
touch -t 202001010000 /dev/nvme0n1 /dev/rnvme0n1 && sleep 1 || exit 1
# A warm-up pass first (its runs are labelled warmup-* and left out of the report): within
# the first minute after boot the kernel does one large batch of deferred work (pages
# freed), which lands in whichever run is going on then.
for pass in warmup- ""; do
	for dev in /dev/nvme0n1 /dev/rnvme0n1; do
		echo "PROFILE-RUN $pass${dev#/dev/}"
		if [ -n "$PASSTHRU" ]; then
			gen=$(echo $dev | sed 's|^/dev/nvme|/dev/ng|; s|^/dev/rnvme|/dev/rng|')
			iocost mark &&
				fio --name=qd --filename=$gen --ioengine=io_uring_cmd --cmd_type=nvme \
					--rw=randread --bs=$BS --iodepth=$QD \
					--iodepth_batch_submit=$BATCH --iodepth_batch_complete_min=$BATCH \
					--number_ios=$COST_IOS --size=1g --norandommap --randrepeat=0 \
					--output=/dev/null &&
				iocost mark || exit 1
		elif [ "$QD" -eq 1 ] && [ "$BS" = 4k ]; then
			iocost $dev "$COST_IOS" || exit 1
		else
			iocost mark &&
				fio --name=qd --filename=$dev --direct=1 --ioengine=io_uring --rw=randread \
					--bs=$BS --iodepth=$QD --iodepth_batch_submit=$BATCH \
					--iodepth_batch_complete_min=$BATCH \
					--number_ios=$COST_IOS --size=1g --norandommap --randrepeat=0 \
					--output=/dev/null &&
				iocost mark || exit 1
		fi
	done
done
grep -E '\[(rnvme|nvme|nvme_core)\]' /proc/kallsyms | sed 's/^/KSYM /'
rmmod rnvme nvme nvme-core
