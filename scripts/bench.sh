#!/usr/bin/env bash
# `make bench`: rnvme against the C nvme driver in one VM, on identical emulated
# controllers, with null_blk beside both as the block layer's ceiling.
#
# Builds what is missing (toolchain, base kernel, rnvme.ko), boots one VM with ten NVMe
# controllers (three null-co ones per driver, two per driver backed by images in the
# host's tmpfs, one of them with its writes throttled), runs qemu/guest/bench.sh there (the
# fio jobs in bench/, dd, bonnie++ and dbench on ext4 and XFS, interleaved C, Rust,
# null_blk, REPS times) and prints the tables (scripts/bench_report.py).
#
#   BENCH_REPS=5         repetitions (at least 5 for the published table)
#   BENCH_RUNTIME=2      seconds per fio run
#   BENCH_QUICK=1        2 repetitions of 1 s, fewer sweep points: a smoke run
#   BENCH_OUT=out/bench  where the console log, JSON, table and plot go
#   BENCH_PUBLISH=1      also copy the run (table, plot, JSON) to bench/results/, the tables into docs/benchmark.md
#   BENCH_RNVME_ARGS=    extra rnvme module parameters (to measure an option against C)
#   BENCH_C_ARGS=        extra nvme (C driver) module parameters (the same option on C)
#   BENCH_CTRL_PROPS=    extra QEMU properties of every controller of every VM, both
#                        drivers' (a device feature against C: cmb_size_mb=64 puts both
#                        drivers' SQs in a CMB); nothing is published from such a run
#   BENCH_COST_ONLY=1    only the counted cost per I/O (the cost VM, a few minutes)
#   BENCH_SCALE_ONLY=1   only the scale table (the scale VM: 8 vCPUs, 8 controllers)
#   BENCH_SCALE_REPS=3   repetitions in the scale VM
#   BENCH_ONLY=REGEX     only the workloads REGEX matches, no cost VM (to try one out)
#   BENCH_COST_IOS=20000 reads per driver and repetition in the cost VM
#   BENCH_KERNEL=base    the guest kernel: base, or inline (helpers inlined, clang-22)
. "$(dirname "$0")/common.sh"

# The guest kernel: base (the default, what rnvme is judged on) or inline
# (CONFIG_RUST_INLINE_HELPERS, built by clang-22; built on first use, ~17 min).
KFLAVOUR=${BENCH_KERNEL:-base}
case $KFLAVOUR in base | inline) ;; *) die "BENCH_KERNEL=$KFLAVOUR: base or inline" ;; esac

OUT=${BENCH_OUT:-$RNVME_ROOT/out/bench$([ "$KFLAVOUR" = base ] || echo "-$KFLAVOUR")}
REPS=${BENCH_REPS:-5}
RUNTIME=${BENCH_RUNTIME:-2}
# The throttled disks' write limit (MB/s): synchronous writes must never report more.
THROTTLE_MBPS=8
GUEST_ENV="REPS=$REPS RUNTIME=$RUNTIME THROTTLE_MBPS=$THROTTLE_MBPS"
if [ -n "${BENCH_QUICK:-}" ]; then
	REPS=${BENCH_REPS:-2}
	GUEST_ENV="REPS=$REPS RUNTIME=1 COST_IOS=5000 QD_POINTS='1 8 64' BS_POINTS='4k 128k'"
	GUEST_ENV="$GUEST_ENV PERF_N='16 64' FS_SECONDS=5 THROTTLE_MBPS=$THROTTLE_MBPS"
fi
[ -z "${BENCH_RNVME_ARGS:-}" ] || GUEST_ENV="$GUEST_ENV RNVME_ARGS='$BENCH_RNVME_ARGS'"
[ -z "${BENCH_C_ARGS:-}" ] || GUEST_ENV="$GUEST_ENV C_ARGS='$BENCH_C_ARGS'"
[ -z "${BENCH_ONLY:-}" ] || GUEST_ENV="$GUEST_ENV ONLY='$BENCH_ONLY'"
mkdir -p "$OUT"

say "building rnvme for the base (non-debug) kernel"
make -s -C "$RNVME_ROOT" module FLAVOUR="$KFLAVOUR" >"$OUT/build.log" 2>&1 ||
	die "build failed: $(tail -5 "$OUT/build.log")"

# The tmpfs images: QEMU's file I/O in the path, but no disk.
SHM=/dev/shm/rnvme-bench
rm -rf "$SHM"
mkdir -p "$SHM"
trap 'rm -rf "$SHM"' EXIT

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
qemu=$(qemu-system-x86_64 --version | head -1)
kver=$(make -s -C "$("$RNVME_ROOT/scripts/kdir.sh" "$KFLAVOUR")" kernelversion 2>/dev/null || echo "?")
MACHINE="$(nproc) host cores ($cpu), $(($(grep MemTotal /proc/meminfo | awk '{print $2}') / 1048576)) GiB; $qemu, TCG, $(nproc) vCPUs; guest kernel $kver ($KFLAVOUR, clang-$(llvm_version "$KFLAVOUR"))"
CTRL_PROPS=()
if [ -n "${BENCH_CTRL_PROPS:-}" ]; then
	CTRL_PROPS=(--ctrl-props "$BENCH_CTRL_PROPS")
	MACHINE="$MACHINE; every controller with $BENCH_CTRL_PROPS"
fi
say "machine: $MACHINE"
if [ -z "${BENCH_COST_ONLY:-}${BENCH_SCALE_ONLY:-}" ]; then
	say "benchmark VM: $REPS repetitions (log: $OUT/console.log)"
	start=$(date +%s)
	rc=0
	"$RNVME_ROOT/qemu/run" --flavour "$KFLAVOUR" --quiet --log "$OUT/console.log" --timeout 5400 \
		--ctrls 10 --image-ctrls 4 --throttle-ctrls 2 --throttle-write-mbps "$THROTTLE_MBPS" \
		--backend null --image-dir "$SHM" --size 1G --mem 3G "${CTRL_PROPS[@]}" \
		-- "$GUEST_ENV sh /guest/bench.sh" >"$OUT/run.log" 2>&1 || rc=$?
	say "VM finished in $(($(date +%s) - start)) s (exit $rc)"
	grep -q RNVME-BENCH-DONE "$OUT/console.log" ||
		die "the benchmark did not finish: $(tail -5 "$OUT/run.log")"
	[ $rc -eq 0 ] || die "the VM reported problems: $(tail -20 "$OUT/run.log")"
fi

# Cost per I/O with little noise: guest instructions counted by a QEMU TCG plugin, one
# vCPU (the counters are not atomic), the same reads on each driver. The null-co
# namespaces answer after 100 us, so every read sleeps and is woken by its interrupt, as
# on a real device; the plugin's per-block counts (profile=on) let the report leave out
# the idle loop and the scheduler (scripts/cost_scope.py).
COST_ARGS=()
if [ -z "${BENCH_ONLY:-}${BENCH_SCALE_ONLY:-}" ]; then
	mkdir -p "$RNVME_ROOT/out/plugins"
	gcc -O2 -shared -fPIC -Wall -Werror -o "$RNVME_ROOT/out/plugins/icount.so" \
		"$RNVME_ROOT/qemu/plugins/icount.c" || die "building the icount plugin failed"
	COST_ENV="REPS=$REPS COST_IOS=${BENCH_COST_IOS:-20000}"
	[ -z "${BENCH_QUICK:-}" ] || COST_ENV="REPS=$REPS COST_IOS=${BENCH_COST_IOS:-5000}"
	say "cost VM: 1 vCPU, instructions per I/O (log: $OUT/cost-console.log)"
	start=$(date +%s)
	rc=0
	"$RNVME_ROOT/qemu/run" --flavour "$KFLAVOUR" --quiet --log "$OUT/cost-console.log" \
		--timeout 3600 --ctrls 2 --backend null --latency-us 100 --size 1G --smp 1 \
		"${CTRL_PROPS[@]}" --extra=-plugin \
		--extra="$RNVME_ROOT/out/plugins/icount.so,out=$OUT/cost-marks.txt,profile=on" \
		-- "$COST_ENV sh /guest/cost.sh" >"$OUT/cost-run.log" 2>&1 || rc=$?
	say "cost VM finished in $(($(date +%s) - start)) s (exit $rc)"
	grep -q RNVME-COST-DONE "$OUT/cost-console.log" ||
		die "the cost run did not finish: $(tail -5 "$OUT/cost-run.log")"
	COST_ARGS=(--cost-console "$OUT/cost-console.log" --cost-marks "$OUT/cost-marks.txt")
fi

# Scale: each driver alone on the same eight controllers (the first with 64 namespaces,
# the others one), queues for 16 possible vCPUs (one per CPU), the work on as many online as
# the host has cores: memory once every disk is up, time to every disk, time to unbind, at
# C's default queue depth and a quarter of it (qemu/guest/scale.sh).
SCALE_ARGS=()
if [ -z "${BENCH_ONLY:-}${BENCH_COST_ONLY:-}" ]; then
	say "scale VM: 16 vCPUs, 8 controllers (log: $OUT/scale-console.log)"
	start=$(date +%s)
	rc=0
	"$RNVME_ROOT/qemu/run" --flavour "$KFLAVOUR" --quiet --log "$OUT/scale-console.log" \
		--timeout 3600 --smp 16 --ctrls 8 --ns-of 0:64 --backend null --size 64M "${CTRL_PROPS[@]}" \
		-- "CHECK=0 REPS=${BENCH_SCALE_REPS:-3} ONLINE=$(nproc) sh /guest/scale.sh" >"$OUT/scale-run.log" 2>&1 || rc=$?
	say "scale VM finished in $(($(date +%s) - start)) s (exit $rc)"
	grep -q RNVME-SCALE-DONE "$OUT/scale-console.log" ||
		die "the scale run did not finish: $(tail -5 "$OUT/scale-run.log")"
	SCALE_ARGS=(--scale-console "$OUT/scale-console.log")
fi

status=0
KDIR_K=$("$RNVME_ROOT/scripts/kdir.sh" "$KFLAVOUR")
if [ -n "${BENCH_COST_ONLY:-}${BENCH_SCALE_ONLY:-}" ]; then
	set -- --cost-only
else
	set -- "$OUT/console.log"
fi
python3 "$RNVME_ROOT/scripts/bench_report.py" "$@" --json "$OUT/results.json" "${COST_ARGS[@]}" "${SCALE_ARGS[@]}" \
	--system-map "$KDIR_K/System.map" --kdir "$KDIR_K" --throttle-mbps "$THROTTLE_MBPS" \
	--markdown "$OUT/table.md" --plot "$OUT/sweeps.png" --machine "$MACHINE" \
	--command "make bench ($GUEST_ENV)" || status=$?
echo "$MACHINE" >"$OUT/machine.txt"
say "results: $OUT/results.json, $OUT/table.md$([ ! -f "$OUT/sweeps.png" ] || echo ", $OUT/sweeps.png")"

# The scale table has a block of its own in docs/benchmark.md (BENCH_SCALE_ONLY=1 publishes
# it alone).
if [ -n "${BENCH_PUBLISH:-}" ] && [ -f "$OUT/scale.md" ] && [ ${#SCALE_ARGS[@]} -gt 0 ] &&
	[ $status -eq 0 ] && [ "$KFLAVOUR" = base ] && [ -z "${BENCH_CTRL_PROPS:-}" ]; then
	python3 - "$RNVME_ROOT/docs/benchmark.md" "$OUT/scale.md" "$MACHINE" "$(date -u +%Y-%m-%d)" \
		"$(git -C "$RNVME_ROOT" rev-parse --short HEAD)" "${BENCH_SCALE_REPS:-3}" <<'PY'
import re, sys
doc, table, machine, day, commit, reps = sys.argv[1:]
text = open(doc).read()
block = (f"<!-- scale-begin -->\nMeasured {day} at commit {commit} on {machine}, with "
         f"`BENCH_SCALE_ONLY=1 BENCH_SCALE_REPS={reps} make bench` ({reps} repetitions, each "
         f"driver in turn).\n\n" + open(table).read()
         + "<!-- scale-end -->")
new, n = re.subn("<!-- scale-begin -->.*<!-- scale-end -->", lambda m: block, text, flags=re.S)
if n:
    open(doc, "w").write(new)
else:
    print("docs/benchmark.md has no <!-- scale-begin --> block: scale table not published there",
          file=sys.stderr)
PY
	say "scale table published to docs/benchmark.md"
fi

if [ -n "${BENCH_PUBLISH:-}" ] && [ -z "${BENCH_COST_ONLY:-}${BENCH_ONLY:-}${BENCH_SCALE_ONLY:-}${BENCH_CTRL_PROPS:-}" ] &&
	[ $status -eq 0 ]; then
	# The base kernel's results are docs/benchmark.md's main table; the inline kernel's its own.
	tag=bench
	[ "$KFLAVOUR" = base ] || tag=bench-$KFLAVOUR
	results=bench/results$([ "$KFLAVOUR" = base ] || echo "-$KFLAVOUR")
	mkdir -p "$RNVME_ROOT/$results"
	# Every file of the run, so the JSON and the plot's data are the table's run (the plot
	# and its data only if gnuplot made them: no stale ones are left beside the table).
	rm -f "$RNVME_ROOT/$results/sweeps.png" "$RNVME_ROOT/$results/"sweep-*.dat
	cp "$OUT/table.md" "$OUT/machine.txt" "$OUT/results.json" "$RNVME_ROOT/$results/"
	for f in sweeps.png sweep-bs.dat sweep-qd.dat; do
		[ ! -f "$OUT/$f" ] || cp "$OUT/$f" "$RNVME_ROOT/$results/"
	done
	python3 - "$RNVME_ROOT/docs/benchmark.md" "$OUT/table.md" "$MACHINE" "$(date -u +%Y-%m-%d)" \
		"$tag" "$results" "make bench$([ "$KFLAVOUR" = base ] || echo " BENCH_KERNEL=$KFLAVOUR")" <<'PY'
import re, sys
doc, table, machine, day, tag, results, command = sys.argv[1:]
text = open(doc).read()
block = (f"<!-- {tag}-begin -->\nMeasured {day} on {machine}, with `{command}`.\n\n"
         + open(table).read() + f"\n![sweeps](../{results}/sweeps.png)\n<!-- {tag}-end -->")
new, n = re.subn(f"<!-- {tag}-begin -->.*<!-- {tag}-end -->", lambda m: block, text, flags=re.S)
if n:
    open(doc, "w").write(new)
else:
    print(f"docs/benchmark.md has no <!-- {tag}-begin --> block: table not published there",
          file=sys.stderr)
PY
	say "published to bench/results/ and docs/benchmark.md"
fi
exit $status
