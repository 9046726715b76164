#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of scripts/bench_report.py's verdict on a run, from made-up guest consoles.
Prints "PASS name" or "FAIL name: why" per test.

A run whose guest clocksource changed part way (the watchdog moving it from the TSC to the
HPET: every later timestamp an MMIO exit) compares drivers measured at different speeds,
so it must fail, as must a run that did not say. A run of some workloads only (BENCH_ONLY)
draws the sweeps it has, and leaves no plot or data of an earlier run.

    scripts/bench_report_test.py
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Two repetitions of a dd workload on every driver (dd lines need no fio JSON).
SAMPLES = "".join(
    f"RNVME-BENCH-DD dd-1m {d} {rep} {n} 1.0 1M\n"
    for rep in (1, 2) for d, n in (("nvme", 1 << 30), ("rnvme", 1 << 30), ("null_blk", 2 << 30)))


def verdict(tmp, start, end):
    """bench_report's exit status and output on a console with these clocksource lines."""
    console = os.path.join(tmp, "console.log")
    with open(console, "w") as f:
        if start:
            f.write(f"RNVME-BENCH-CLOCKSOURCE start {start}\n")
        f.write(SAMPLES)
        if end:
            f.write(f"RNVME-BENCH-CLOCKSOURCE end {end}\n")
        f.write("RNVME-BENCH-DONE\n")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench_report.py"),
                        console], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def plot_checks(tmp):
    """(name, passed, why) for bench_report.plot on runs with one sweep, and with none."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench_report
    def sweep(kind, xs):
        return {f"sweep-{kind}-{x}": {
            "median": {d: {"iops": 1000.0 * i, "bw": 10.0 * i}
                       for i, d in enumerate(bench_report.DRIVERS, 1)},
            "_raw": {d: {"iops": [900.0 * i, 1100.0 * i], "bw": [9.0 * i, 11.0 * i]}
                     for i, d in enumerate(bench_report.DRIVERS, 1)}} for x in xs}
    png = os.path.join(tmp, "sweeps.png")
    qd = os.path.join(tmp, "sweep-qd.dat")
    for f in (png, qd):
        open(f, "w").close()
    drawn = bench_report.plot(sweep("bs", ("4k", "16k", "128k")), png)
    yield ("bench_plot_one_sweep_drawn", drawn and os.path.getsize(png) > 0
           and not os.path.exists(qd), f"drawn={drawn}, stale qd data {os.path.exists(qd)}")
    drawn = bench_report.plot({}, png)
    yield ("bench_plot_no_sweep_no_stale_plot", not drawn and not os.path.exists(png),
           f"drawn={drawn}, plot left {os.path.exists(png)}")


def scale_checks(tmp):
    """(name, passed, why) for the scale table from a made-up scale console: medians per
    driver and depth, the ratio of the medians, a garbled line ignored."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench_report
    console = os.path.join(tmp, "scale-console.log")
    with open(console, "w") as f:
        f.write("RNVME-SCALE-SETUP vcpus=16 ctrls=8 big=0000:00:04.0 ns_big=64\n")
        for rep, (r, c) in enumerate(((900, 1000), (1100, 1000), (1000, 3000))):
            for d, q in (("rnvme", r), ("nvme", c)):
                f.write(f"[ 1.0] RNVME-SCALE driver={d} depth=256 ctrls=8 namespaces=71 "
                        f"queues=128 bringup_ms=500 unbind_ms=100 mem_kib=9000 "
                        f"per_ctrl_kib=1000 per_queue_kib={q} per_ns_kib=12\n")
        f.write("RNVME-SCALE driver=rnvme depth=oops\n")
    samples, setup = bench_report.parse_scale(console)
    rows = bench_report.scale_table(samples)
    per_queue = [r for r in rows if r[0].strip().startswith("memory per I/O queue")]
    want = [["  memory per I/O queue (KiB)", "1000", "1000", "1.00", "3"]]
    yield ("bench_scale_table_medians", setup.get("vcpus") == "16" and per_queue == want,
           f"setup {setup}, rows {per_queue}")


def main():
    checks = [
        ("bench_clocksource_kept_passes", "tsc-early", "tsc", lambda rc, out: rc == 0),
        ("bench_clocksource_changed_fails", "tsc", "hpet",
         lambda rc, out: rc == 1 and "changed from tsc to hpet" in out),
        ("bench_clocksource_unreported_fails", None, None,
         lambda rc, out: rc == 1 and "did not report its clocksource" in out),
    ]
    with tempfile.TemporaryDirectory(prefix="rnvme-benchreport-") as tmp:
        for name, start, end, ok in checks:
            rc, out = verdict(tmp, start, end)
            if ok(rc, out):
                print(f"PASS {name}")
            else:
                tail = " | ".join(out.strip().splitlines()[-3:])
                print(f"FAIL {name}: bench_report exited {rc}: {tail}")
        for name, ok, why in scale_checks(tmp):
            print(f"PASS {name}" if ok else f"FAIL {name}: {why}")
        for name, ok, why in plot_checks(tmp):
            print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


if __name__ == "__main__":
    main()
