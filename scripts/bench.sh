#!/usr/bin/env bash
# `make bench`: rnvme against the C nvme driver in one VM, on identical emulated
# controllers, with null_blk beside both as the block layer's ceiling.
#
# Builds what is missing (toolchain, base kernel, rnvme.ko), boots one VM with six NVMe
# controllers (two null-co ones per driver, one per driver backed by an image in the
# host's tmpfs), runs qemu/guest/bench.sh there (the fio jobs in bench/, interleaved C,
# Rust, null_blk, REPS times) and prints the table (scripts/bench_report.py).
#
#   BENCH_REPS=5         repetitions (at least 5 for the published table)
#   BENCH_RUNTIME=2      seconds per fio run
#   BENCH_QUICK=1        2 repetitions of 1 s, fewer sweep points: a smoke run
#   BENCH_OUT=out/bench  where the console log, JSON, table and plot go
#   BENCH_PUBLISH=1      also copy the table and plot to bench/results/ and into README.md
#   BENCH_RNVME_ARGS=    extra rnvme module parameters (to measure an option against C)
. "$(dirname "$0")/common.sh"

OUT=${BENCH_OUT:-$RNVME_ROOT/out/bench}
REPS=${BENCH_REPS:-5}
RUNTIME=${BENCH_RUNTIME:-2}
GUEST_ENV="REPS=$REPS RUNTIME=$RUNTIME"
if [ -n "${BENCH_QUICK:-}" ]; then
	REPS=${BENCH_REPS:-2}
	GUEST_ENV="REPS=$REPS RUNTIME=1 COST_IOS=5000 QD_POINTS='1 8 64' BS_POINTS='4k 128k'"
fi
[ -z "${BENCH_RNVME_ARGS:-}" ] || GUEST_ENV="$GUEST_ENV RNVME_ARGS='$BENCH_RNVME_ARGS'"
mkdir -p "$OUT"

say "building rnvme for the base (non-debug) kernel"
make -s -C "$RNVME_ROOT" module FLAVOUR=base >"$OUT/build.log" 2>&1 ||
	die "build failed: $(tail -5 "$OUT/build.log")"

# The tmpfs images: QEMU's file I/O in the path, but no disk.
SHM=/dev/shm/rnvme-bench
rm -rf "$SHM"
mkdir -p "$SHM"
trap 'rm -rf "$SHM"' EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
qemu=$(qemu-system-x86_64 --version | head -1)
kver=$(make -s -C "$("$RNVME_ROOT/scripts/kdir.sh" base)" kernelversion 2>/dev/null || echo "?")
MACHINE="$(nproc) host cores ($cpu), $(($(grep MemTotal /proc/meminfo | awk '{print $2}') / 1048576)) GiB; $qemu, TCG, $(nproc) vCPUs; guest kernel $kver"
say "machine: $MACHINE"
say "benchmark VM: $REPS repetitions (log: $OUT/console.log)"
start=$(date +%s)
rc=0
"$RNVME_ROOT/qemu/run" --flavour base --quiet --log "$OUT/console.log" --timeout 5400 \
	--ctrls 6 --image-ctrls 2 --backend null --image-dir "$SHM" --size 1G --mem 3G \
	-- "$GUEST_ENV sh /guest/bench.sh" >"$OUT/run.log" 2>&1 || rc=$?
say "VM finished in $(($(date +%s) - start)) s (exit $rc)"
grep -q RNVME-BENCH-DONE "$OUT/console.log" ||
	die "the benchmark did not finish: $(tail -5 "$OUT/run.log")"
[ $rc -eq 0 ] || die "the VM reported problems: $(tail -20 "$OUT/run.log")"

# Cost per I/O with little noise: guest instructions counted by a QEMU TCG plugin, one
# vCPU (the counters are not atomic), the same reads on each driver.
mkdir -p "$RNVME_ROOT/out/plugins"
gcc -O2 -shared -fPIC -Wall -Werror -o "$RNVME_ROOT/out/plugins/icount.so" \
	"$RNVME_ROOT/qemu/plugins/icount.c" || die "building the icount plugin failed"
COST_ENV="REPS=$REPS COST_IOS=${BENCH_COST_IOS:-20000}"
[ -z "${BENCH_QUICK:-}" ] || COST_ENV="REPS=$REPS COST_IOS=5000"
say "cost VM: 1 vCPU, instructions per I/O (log: $OUT/cost-console.log)"
start=$(date +%s)
rc=0
"$RNVME_ROOT/qemu/run" --flavour base --quiet --log "$OUT/cost-console.log" --timeout 3600 \
	--ctrls 2 --backend null --size 1G --smp 1 \
	--extra=-plugin --extra="$RNVME_ROOT/out/plugins/icount.so,out=$OUT/cost-marks.txt" \
	-- "$COST_ENV sh /guest/cost.sh" >"$OUT/cost-run.log" 2>&1 || rc=$?
say "cost VM finished in $(($(date +%s) - start)) s (exit $rc)"
grep -q RNVME-COST-DONE "$OUT/cost-console.log" ||
	die "the cost run did not finish: $(tail -5 "$OUT/cost-run.log")"

status=0
python3 "$RNVME_ROOT/scripts/bench_report.py" "$OUT/console.log" --json "$OUT/results.json" \
	--cost-console "$OUT/cost-console.log" --cost-marks "$OUT/cost-marks.txt" \
	--markdown "$OUT/table.md" --plot "$OUT/sweeps.png" --machine "$MACHINE" \
	--command "make bench ($GUEST_ENV)" || status=$?
echo "$MACHINE" >"$OUT/machine.txt"
say "results: $OUT/results.json, $OUT/table.md, $OUT/sweeps.png"

if [ -n "${BENCH_PUBLISH:-}" ] && [ $status -eq 0 ]; then
	mkdir -p "$RNVME_ROOT/bench/results"
	cp "$OUT/table.md" "$OUT/sweeps.png" "$OUT/machine.txt" "$RNVME_ROOT/bench/results/"
	python3 - "$RNVME_ROOT/README.md" "$OUT/table.md" "$MACHINE" "$(date -u +%Y-%m-%d)" <<'PY'
import re, sys
readme, table, machine, day = sys.argv[1:]
text = open(readme).read()
block = (f"<!-- bench-begin -->\nMeasured {day} on {machine}, with `make bench`.\n\n"
         + open(table).read() + "\n![sweeps](bench/results/sweeps.png)\n<!-- bench-end -->")
new, n = re.subn(r"<!-- bench-begin -->.*<!-- bench-end -->", lambda m: block, text, flags=re.S)
if n:
    open(readme, "w").write(new)
PY
	say "published to bench/results/ and README.md"
fi
exit $status
