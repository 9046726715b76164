#!/usr/bin/env bash
# `make profile`: where the C driver and rnvme spend their instructions per 4 KiB read,
# per kernel function, counted by the icount QEMU plugin (one vCPU, QD1; the emulated
# device answers after 100 us, so every read sleeps, as on a real device).
#
#   PROFILE_IOS=5000   reads per driver     PROFILE_TOP=40   functions listed
#   PROFILE_ALL=1      list the idle loop's, scheduler's and timers' functions too
#   PROFILE_QD=1       reads in flight (above 1: fio with io_uring, as the QD32 workloads)
#   PROFILE_BS=4k      read size (other than 4k: fio with io_uring, as the block-size sweep)
#   PROFILE_BATCH=1    reads fio submits per system call (above 2: a plug's list, queue_rqs)
#   PROFILE_KERNEL=base   the guest kernel: base, or inline (helpers inlined, clang-22)
#   PROFILE_CTRL_PROPS=   extra QEMU properties of both controllers (cmb_size_mb=64: both
#                         drivers' submission queues in a Controller Memory Buffer)
#   PROFILE_PASSTHRU=1    the reads as NVMe passthrough through io_uring (fio io_uring_cmd) on
#                         the generic devices (/dev/ng0n1, /dev/rng0n1)
. "$(dirname "$0")/common.sh"

# The guest kernel: base (the default, what rnvme is judged on) or inline
# (CONFIG_RUST_INLINE_HELPERS, built by clang-22; built on first use, ~17 min).
KFLAVOUR=${PROFILE_KERNEL:-base}
case $KFLAVOUR in base | inline) ;; *) die "PROFILE_KERNEL=$KFLAVOUR: base or inline" ;; esac

OUT=$RNVME_ROOT/out/profile
mkdir -p "$OUT" "$RNVME_ROOT/out/plugins"
make -s -C "$RNVME_ROOT" module FLAVOUR="$KFLAVOUR" >"$OUT/build.log" 2>&1 ||
	die "build failed: $(tail -5 "$OUT/build.log")"
gcc -O2 -shared -fPIC -Wall -Werror -o "$RNVME_ROOT/out/plugins/icount.so" \
	"$RNVME_ROOT/qemu/plugins/icount.c" || die "building the icount plugin failed"
IOS=${PROFILE_IOS:-5000}
QD=${PROFILE_QD:-1}
case $QD in '' | *[!0-9]* | 0*) die "PROFILE_QD=$QD: a number of reads in flight, 1 or more" ;; esac
BATCH=${PROFILE_BATCH:-1}
case $BATCH in '' | *[!0-9]* | 0*) die "PROFILE_BATCH=$BATCH: reads per submission, 1 or more" ;; esac
[ "$BATCH" -le "$QD" ] || die "PROFILE_BATCH=$BATCH: at most PROFILE_QD ($QD) reads per submission"
BS=${PROFILE_BS:-4k}
case $BS in [1-9]*k | [1-9]*K | [1-9]*m | [1-9]*M) ;; *) die "PROFILE_BS=$BS: a read size in k or m (4k, 128k, 1m)" ;; esac
case ${BS%[kKmM]} in *[!0-9]*) die "PROFILE_BS=$BS: a read size in k or m (4k, 128k, 1m)" ;; esac
# At QD1 the namespaces answer after 100 us, as a device; with reads in flight they answer
# at once, as in make bench, and the guest gets a second possible CPU: on a machine of one,
# QEMU 7.2 drops the guest's fences (qemu/run --maxcpus) and, with reads in flight, the
# shadow doorbell handshake now and then left commands unfetched in the SQ, on both
# drivers, until the driver's timeout reset the controller.
LATENCY=100 MAXCPUS=
[ "$QD" -eq 1 ] || LATENCY=0 MAXCPUS="--maxcpus 2"
rm -f "$OUT/marks.txt"
"$RNVME_ROOT/qemu/run" --flavour "$KFLAVOUR" --quiet --log "$OUT/console.log" --timeout 1800 \
	--ctrls 2 --backend null --latency-us $LATENCY --smp 1 $MAXCPUS \
	${PROFILE_CTRL_PROPS:+--ctrl-props "$PROFILE_CTRL_PROPS"} \
	--extra=-plugin --extra="$RNVME_ROOT/out/plugins/icount.so,out=$OUT/marks.txt,profile=on" \
	-- "COST_IOS=$IOS QD=$QD BS=$BS BATCH=$BATCH PASSTHRU=${PROFILE_PASSTHRU:-} sh /guest/profile.sh" >"$OUT/run.log" 2>&1 ||
	die "the profile VM failed: $(tail -5 "$OUT/run.log")"
# A command timeout (either driver) makes the counts those of a reset, not of reads.
if grep -E 'I/O tag [0-9]+ .*timeout' "$OUT/console.log" >&2; then
	die "a command timed out during the profile (above): its counts are not comparable"
fi
KDIR_K=$("$RNVME_ROOT/scripts/kdir.sh" "$KFLAVOUR")
python3 "$RNVME_ROOT/scripts/icount_profile.py" "$OUT/marks.txt" "$OUT/console.log" \
	"$KDIR_K/System.map" --kdir "$KDIR_K" --ios "$IOS" --top "${PROFILE_TOP:-40}" \
	${PROFILE_ALL:+--all}
