#!/usr/bin/env bash
# `make profile`: where the C driver and rnvme spend their instructions per 4 KiB read,
# per kernel function, counted by the icount QEMU plugin (one vCPU, QD1; the emulated
# device answers after 100 us, so every read sleeps, as on a real device).
#
#   PROFILE_IOS=5000   reads per driver     PROFILE_TOP=40   functions listed
#   PROFILE_ALL=1      list the idle loop's, scheduler's and timers' functions too
#   PROFILE_QD=1       reads in flight (above 1: fio with io_uring, as the QD32 workloads)
#   PROFILE_KERNEL=base   the guest kernel: base, or inline (helpers inlined, clang-22)
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
# At QD1 the namespaces answer after 100 us, as a device; with reads in flight they answer
# at once, as in make bench: QEMU 7.2 with that latency and several reads in flight stalls
# both drivers' queues now and then (commands left unfetched in the SQ until the
# driver's timeout resets the controller).
LATENCY=100
[ "$QD" -eq 1 ] || LATENCY=0
rm -f "$OUT/marks.txt"
"$RNVME_ROOT/qemu/run" --flavour "$KFLAVOUR" --quiet --log "$OUT/console.log" --timeout 1800 \
	--ctrls 2 --backend null --latency-us $LATENCY --smp 1 \
	--extra=-plugin --extra="$RNVME_ROOT/out/plugins/icount.so,out=$OUT/marks.txt,profile=on" \
	-- "COST_IOS=$IOS QD=$QD sh /guest/profile.sh" >"$OUT/run.log" 2>&1 ||
	die "the profile VM failed: $(tail -5 "$OUT/run.log")"
# A command timeout (either driver) makes the counts those of a reset, not of reads.
if grep -E 'I/O tag [0-9]+ .*timeout' "$OUT/console.log" >&2; then
	die "a command timed out during the profile (above): its counts are not comparable"
fi
KDIR_K=$("$RNVME_ROOT/scripts/kdir.sh" "$KFLAVOUR")
python3 "$RNVME_ROOT/scripts/icount_profile.py" "$OUT/marks.txt" "$OUT/console.log" \
	"$KDIR_K/System.map" --kdir "$KDIR_K" --ios "$IOS" --top "${PROFILE_TOP:-40}" \
	${PROFILE_ALL:+--all}
