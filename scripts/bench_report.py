#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make bench`, host side: turns the guest's console log (qemu/guest/bench.sh) into

- a JSON file with every sample and the summary,
- a table (terminal and Markdown) of medians and rnvme/nvme ratios with 95% intervals,
- a plot of the queue-depth and block-size sweeps (gnuplot).

Ratios are paired by repetition (C and rnvme ran back to back in the same VM), then
summarised by their median and a 95% percentile-bootstrap interval of that median.
"""

import argparse
import base64
import gzip
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys

import cost_scope

DRIVERS = ("nvme", "rnvme", "null_blk")
# Metrics: key, title, unit, better ("hi" or "lo").
METRICS = (
    ("iops", "IOPS", "", "hi"),
    ("bw", "bandwidth", "MB/s", "hi"),
    ("p50", "p50 latency", "us", "lo"),
    ("p99", "p99 latency", "us", "lo"),
    ("cpu_per_io", "guest CPU per I/O", "us", "lo"),
)
USER_HZ = 100
# Filesystem workloads' metrics (bonnie++, dbench): key, title, unit; all higher is better.
FS_METRICS = (
    ("seq_out", "block output", "MB/s"),
    ("seq_in", "block input", "MB/s"),
    ("seeks", "random seeks", "/s"),
    ("throughput", "throughput", "MB/s"),
)


def size_bytes(text):
    """dd's block size argument (4k, 128k, 1M) in bytes."""
    m = re.fullmatch(r"(\d+)([kKmM]?)", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "k": 1024, "K": 1024, "m": 1 << 20, "M": 1 << 20}[m.group(2)]


def parse_console(path):
    """Samples from the console log: one dict per (workload, driver, rep)."""
    samples = {}
    cur = None
    b64 = []
    with open(path, errors="replace") as f:
        lines = [l.rstrip("\r\n") for l in f]
    for line in lines:
        m = re.search(r"RNVME-BENCH-(RUN|CPU|DD|FS) (\S+) (\S+) (\d+)(.*)$", line)
        if m:
            kind, wl, drv, rep, rest = m.groups()
            key = (wl, drv, int(rep))
            s = samples.setdefault(key, {"workload": wl, "driver": drv, "rep": int(rep)})
            vals = rest.split()
            if kind == "RUN":
                s["rc"] = int(vals[0])
                cur = s
            elif kind == "CPU":
                s["cpu_busy_ticks"], s["cpu_total_ticks"] = int(vals[0]), int(vals[1])
            elif kind == "DD":
                try:
                    nbytes, secs = int(vals[0]), float(vals[1])
                    bs = size_bytes(vals[2]) if len(vals) > 2 else 1 << 20
                except (ValueError, IndexError):
                    s["rc"], s["error"] = 1, "dd failed: " + rest.strip()
                    continue
                s["rc"] = 0
                s["bw"] = nbytes / secs / 1e6
                s["iops"] = nbytes / bs / secs
                s["ios"] = nbytes // bs
            elif kind == "FS":
                try:
                    s.setdefault("fs", {})[vals[0]] = float(vals[1])
                except (ValueError, IndexError):
                    s["error"] = "unreadable result: " + rest.strip()
            continue
        if "RNVME-BENCH-JSON-BEGIN" in line:
            b64 = []
            continue
        if "RNVME-BENCH-JSON-END" in line:
            if cur is not None:
                try:
                    cur.update(fio_metrics(json.loads(gzip.decompress(
                        base64.b64decode("".join(b64))))))
                except (ValueError, OSError, KeyError, IndexError) as e:
                    cur["error"] = f"unreadable fio output: {e}"
            cur, b64 = None, []
            continue
        if cur is not None and re.fullmatch(r"[A-Za-z0-9+/=]+", line):
            b64.append(line)
    for s in samples.values():
        if s.get("ios") and "cpu_busy_ticks" in s:
            s["cpu_per_io"] = s["cpu_busy_ticks"] / USER_HZ / s["ios"] * 1e6
    return list(samples.values())


def fio_metrics(data):
    """IOPS, MB/s, I/O count and completion latency percentiles of a group-reported run."""
    job = data["jobs"][0]
    r, w = job["read"], job["write"]
    out = {
        "iops": r["iops"] + w["iops"],
        "bw": (r["bw_bytes"] + w["bw_bytes"]) / 1e6,
        "ios": r["total_ios"] + w["total_ios"],
        "fio_error": job.get("error", 0),
        "seconds": job.get("job_runtime", 0) / 1000.0,
    }
    side = r if r["total_ios"] else w
    pct = side.get("clat_ns", {}).get("percentile", {})
    for name, k in (("p50", "50.000000"), ("p99", "99.000000")):
        if k in pct:
            out[name] = pct[k] / 1000.0
    return out


def clocksource_check(path):
    """Failures if the guest's clocksource changed during the run (or was not reported):
    the clocksource watchdog moving it from the TSC to the HPET makes every timestamp an
    MMIO exit, so the runs after the change are slower, whichever driver they measure."""
    seen = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"RNVME-BENCH-CLOCKSOURCE (start|end) (\S+)", line)
            if m:
                # The boot's own switch from tsc-early to tsc (a second or so after the
                # device initcalls) is not a change of clock.
                seen[m.group(1)] = {"tsc-early": "tsc"}.get(m.group(2), m.group(2))
    if len(seen) < 2:
        why = "the guest did not report its clocksource at start and end"
    elif seen["start"] != seen["end"]:
        why = (f"the guest's clocksource changed from {seen['start']} to {seen['end']} "
               "during the run: its runs are not comparable")
    else:
        return []
    return [{"workload": "clocksource", "driver": "-", "rep": 0, "error": why}]


def parse_cost(console, marks, system_map=None, kdir=None):
    """Instructions per I/O from the icount plugin's marks, paired with the guest's runs:
    the kernel total, and (with the plugin's per-block counts, System.map and the kernel
    build) the part in the driver path's scope (scripts/cost_scope.py)."""
    runs = []
    with open(console, errors="replace") as f:
        for line in f:
            m = re.search(r"RNVME-COST-RUN (\d+) (\S+) (\d+)", line)
            if m:
                runs.append((int(m.group(1)), m.group(2), int(m.group(3))))
            m = re.search(r"iocost \S+ (\d+) reads ([0-9.]+) s", line)
            if m and runs:
                runs[-1] = runs[-1] + (int(m.group(1)), float(m.group(2)))
    counts = []
    with open(marks) as f:
        for line in f:
            m = re.match(r"mark \d+ kernel (\d+) user (\d+)", line)
            if m:
                counts.append((int(m.group(1)), int(m.group(2))))
    sections, symbols, out_names = None, None, None
    if system_map and kdir:
        sections = cost_scope.read_sections(marks)
        symbols = cost_scope.Symbols(system_map, console)
        out_names = cost_scope.out_of_scope_names(kdir)
    out = []
    for run in runs:
        n = run[0]
        # Repetition 0 is the warm-up (qemu/guest/cost.sh).
        if len(run) < 5 or len(counts) < 2 * n or run[2] == 0:
            continue
        (k0, u0), (k1, u1) = counts[2 * n - 2], counts[2 * n - 1]
        ios = run[3]
        sample = {"driver": run[1], "rep": run[2], "ios": ios, "seconds": run[4],
                  "kernel_insns_per_io": (k1 - k0) / ios, "user_insns_per_io": (u1 - u0) / ios}
        if sections is not None and len(sections) >= 2 * n:
            funcs = cost_scope.per_function(sections[2 * n - 1], symbols)
            inside, outside = cost_scope.split(funcs, out_names)
            sample["path_insns_per_io"] = inside / ios
            sample["sched_idle_insns_per_io"] = outside / ios
        out.append(sample)
    return out


COST_FIGURES = (
    ("path_insns_per_io", "driver path: kernel instructions per 4k read, less idle, "
     "scheduler, timers (QD1)"),
    ("kernel_insns_per_io", "all guest kernel instructions per 4k read (QD1)"),
)


def cost_table(cost):
    """Rows of the cost table: per figure and driver the median and spread, and the
    rnvme/nvme ratio. The ratio returned is the first figure's (the driver path's) when
    the samples have it."""
    rows = [["counted cost", "median", "spread (max-min)/median", "reps"]]
    ratio = None
    for key, title in COST_FIGURES:
        by = {}
        for c in cost:
            if key in c:
                by.setdefault(c["driver"], {})[c["rep"]] = c[key]
        if not by:
            continue
        rows.append([title, "", "", ""])
        for d in DRIVERS:
            vals = list(by.get(d, {}).values())
            if vals:
                med = statistics.median(vals)
                rows.append([f"  {d}", f"{med:.0f}", f"{(max(vals) - min(vals)) / med * 100:.2f}%",
                             str(len(vals))])
        c, r = by.get("nvme", {}), by.get("rnvme", {})
        pairs = [r[k] / c[k] for k in sorted(set(c) & set(r))]
        if pairs:
            med, lo, hi = bootstrap_median(pairs)
            if ratio is None:
                ratio = {"figure": key, "median": med, "lo": lo, "hi": hi, "samples": pairs}
            rows.append(["  rnvme / nvme", f"{med:.3f}", f"[{lo:.3f}-{hi:.3f}] 95% interval",
                         str(len(pairs))])
    return rows, ratio


# The scale VM's figures (qemu/guest/scale.sh's RNVME-SCALE lines): key, title, unit.
SCALE_FIGURES = (
    ("bringup_ms", "time to every disk", "ms"),
    ("unbind_ms", "time to unbind (rmmod)", "ms"),
    ("mem_kib", "memory, every controller", "KiB"),
    ("per_ctrl_kib", "memory per one-namespace controller", "KiB"),
    ("per_queue_kib", "memory per I/O queue", "KiB"),
    ("per_ns_kib", "memory per further namespace", "KiB"),
)


def parse_scale(path):
    """The scale VM's samples: one dict per RNVME-SCALE line (driver, depth, figures), and
    its setup line's fields."""
    samples, setup = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"RNVME-SCALE(-SETUP)? (.*)", line)
            if not m:
                continue
            fields = dict(kv.split("=", 1) for kv in m.group(2).split() if "=" in kv)
            if m.group(1):
                setup = fields
                continue
            sample = {"driver": fields.get("driver", "?")}
            for k, v in fields.items():
                if k != "driver":
                    try:
                        sample[k] = int(v)
                    except ValueError:
                        sample[k] = v
            samples.append(sample)
    return samples, setup


def scale_table(samples):
    """Rows of the scale table: per depth and figure the median of each driver and the
    rnvme/nvme ratio of the medians (lower is better for every figure)."""
    rows = [["scale", "rnvme", "nvme", "rnvme / nvme", "reps"]]
    for depth in sorted({s["depth"] for s in samples if isinstance(s.get("depth"), int)}):
        at = [s for s in samples if s.get("depth") == depth]
        q = statistics.median(s.get("queues", 0) for s in at)
        rows.append([f"io_queue_depth={depth} ({at[0].get('ctrls', '?')} controllers, "
                     f"{at[0].get('namespaces', '?')} namespaces, {q:.0f} I/O queues)",
                     "", "", "", ""])
        for key, title, unit in SCALE_FIGURES:
            med = {}
            for d in ("rnvme", "nvme"):
                vals = [s[key] for s in at if s["driver"] == d and isinstance(s.get(key), int)]
                if vals:
                    med[d] = statistics.median(vals)
            reps = min((sum(1 for s in at if s["driver"] == d) for d in ("rnvme", "nvme")),
                       default=0)
            ratio = (f"{med['rnvme'] / med['nvme']:.2f}"
                     if len(med) == 2 and med["nvme"] > 0 else "-")
            rows.append([f"  {title} ({unit})", f"{med.get('rnvme', '-'):.0f}"
                         if "rnvme" in med else "-",
                         f"{med['nvme']:.0f}" if "nvme" in med else "-", ratio, str(reps)])
    return rows


def scale_markdown(rows, setup):
    """The scale table in Markdown, with what the VM had."""
    return (f"Scale ({setup.get('vcpus', '?')} vCPUs, the queues of each driver one per "
            f"vCPU, {setup.get('online', '?')} of them online for the work; each driver alone "
            "on the same controllers; memory it holds once every disk is up, caches dropped; "
            "lower is better):\n\n" + markdown(rows) + "\n")


def bootstrap_median(xs, n=10000, seed=1):
    """Median of xs and a 95% percentile-bootstrap interval of it (fixed seed: repeatable)."""
    med = statistics.median(xs)
    if len(xs) < 2:
        return med, med, med
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return med, meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def summarise(samples):
    by = {}
    for s in samples:
        if s.get("rc") == 0 and "error" not in s:
            by.setdefault(s["workload"], {}).setdefault(s["driver"], {})[s["rep"]] = s
    summary = {}
    for wl, drivers in by.items():
        if any("fs" in s for reps in drivers.values() for s in reps.values()):
            summary[wl] = summarise_fs(wl, drivers)
            continue
        row = {"workload": wl, "median": {}, "ratio": {}}
        for d, reps in drivers.items():
            row["median"][d] = {
                m: statistics.median([s[m] for s in reps.values() if m in s])
                for m, *_ in METRICS if any(m in s for s in reps.values())
            }
            row["median"][d]["reps"] = len(reps)
        c, r = drivers.get("nvme", {}), drivers.get("rnvme", {})
        for m, _t, _u, _b in METRICS:
            pairs = [r[k][m] / c[k][m] for k in sorted(set(c) & set(r))
                     if m in c[k] and m in r[k] and c[k][m] > 0]
            if pairs:
                med, lo, hi = bootstrap_median(pairs)
                row["ratio"][m] = {"median": med, "lo": lo, "hi": hi, "samples": pairs}
        summary[wl] = row
    return summary


def summarise_fs(wl, drivers):
    """A filesystem workload's medians and rnvme/nvme ratios, per FS_METRICS metric."""
    row = {"workload": wl, "fs": True, "median": {}, "ratio": {}, "samples": {}}
    for d, reps in drivers.items():
        row["median"][d] = {}
        for m, *_ in FS_METRICS:
            vals = [s["fs"][m] for s in reps.values() if m in s.get("fs", {})]
            if vals:
                row["median"][d][m] = statistics.median(vals)
                row["samples"].setdefault(d, {})[m] = vals
        row["median"][d]["reps"] = len(reps)
    c, r = drivers.get("nvme", {}), drivers.get("rnvme", {})
    for m, *_ in FS_METRICS:
        pairs = [r[k]["fs"][m] / c[k]["fs"][m] for k in sorted(set(c) & set(r))
                 if m in c[k].get("fs", {}) and m in r[k].get("fs", {}) and c[k]["fs"][m] > 0]
        if pairs:
            med, lo, hi = bootstrap_median(pairs)
            row["ratio"][m] = {"median": med, "lo": lo, "hi": hi, "samples": pairs}
    return row


def fs_table(summary):
    """Rows of the filesystem table: one per workload and metric."""
    rows = [["filesystem workload", "metric", "nvme", "rnvme", "null_blk", "r/c"]]
    for wl in sorted(w for w in summary if summary[w].get("fs")):
        row = summary[wl]
        for m, title, unit in FS_METRICS:
            if not any(m in v for v in row["median"].values()):
                continue
            get = lambda d: row["median"].get(d, {}).get(m)
            rows.append([wl, f"{title} ({unit})"] + [fmt_num(get(d), "bw") for d in DRIVERS]
                        + [fmt_ratio(row["ratio"].get(m), "hi")])
    return rows


def throttle_check(samples, limit_mbps):
    """Rows saying whether synchronous writes on the throttled disks stayed within the
    throttle (a rate above it means a flush or FUA was not honoured), and the failures."""
    rows = [["throttled workload", "driver", "MB/s (closest to the limit)",
             f"limit {limit_mbps:g} MB/s"]]
    failed = []
    by = {}
    for s in samples:
        if "throttled" in s["workload"] and s.get("rc") == 0:
            v = s.get("fs", {}).get("throughput", s.get("bw"))
            secs = s.get("fs", {}).get("seconds", s.get("seconds", 0))
            if v is not None and secs > 0:
                # QEMU's throttle lets a tenth of a second's worth through at once, and
                # admits a request whenever its bucket has room: the most a run of `secs`
                # can show is limit * (1 + 0.1 / secs), plus 5% for the last request.
                allowed = limit_mbps * (1 + 0.1 / secs) * 1.05
                by.setdefault((s["workload"], s["driver"]), []).append((v / allowed, v))
    for (wl, d), vals in sorted(by.items()):
        worst, v = max(vals)
        ok = worst <= 1.0
        rows.append([wl, d, f"{v:.2f}", "within" if ok else "EXCEEDED"])
        if not ok:
            failed.append({"workload": wl, "driver": d, "rep": 0,
                           "error": f"{v:.2f} MB/s over the {limit_mbps} MB/s throttle"})
    return rows, failed


def order_key(wl):
    fixed = ["randread-4k-qd1", "randread-4k-qd1-poll", "randread-4k-qd32", "randwrite-4k-qd32",
             "seqread-128k-qd8",
             "seqwrite-128k-qd8", "seqread-512k-qd4", "dd-1m", "aggregate-2ctrl",
             "tmpfs-randrw-4k-qd32", "randread-512-32jobs-3ctrl", "cost-qd1"]
    if wl in fixed:
        return (0, fixed.index(wl), 0)
    m = re.match(r"sweep-(qd|bs)-(\d+)(k?)", wl)
    if m:
        return (1 if m.group(1) == "qd" else 2, 0, int(m.group(2)))
    m = re.match(r"(perftest|dd|passthru)-(\d+)k(?:-(\d+))?$", wl)
    if m:
        return (4 if m.group(1) == "passthru" else 3, int(m.group(2)), int(m.group(3) or 0))
    return (5, 0, 0)


def fmt_num(v, metric):
    if v is None:
        return "-"
    if metric == "iops":
        return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"
    if metric == "bw":
        return f"{v:.0f}"
    return f"{v:.1f}"


def fmt_ratio(r, better):
    if r is None:
        return "-"
    ok = r["hi"] >= 1.0 if better == "hi" else r["lo"] <= 1.0
    mark = "" if ok else " !"
    return f"{r['median']:.2f} [{r['lo']:.2f}-{r['hi']:.2f}]{mark}"


def table(summary):
    """Rows of the results table (a header row first)."""
    head = ["workload", "IOPS nvme", "IOPS rnvme", "IOPS null_blk", "MB/s rnvme",
            "IOPS r/c", "MB/s r/c", "p50 r/c", "p99 r/c", "CPU/IO r/c"]
    rows = [head]
    for wl in sorted((w for w in summary if not summary[w].get("fs")), key=order_key):
        row = summary[wl]
        med = row["median"]
        get = lambda d, m: med.get(d, {}).get(m)
        rows.append([
            wl,
            fmt_num(get("nvme", "iops"), "iops"),
            fmt_num(get("rnvme", "iops"), "iops"),
            fmt_num(get("null_blk", "iops"), "iops"),
            fmt_num(get("rnvme", "bw"), "bw"),
        ] + [fmt_ratio(row["ratio"].get(m), b) for m, _t, _u, b in METRICS])
    return rows


def print_table(rows, out=sys.stdout):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def markdown(rows):
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" for _ in rows[0]) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(out)


def plot(summary, path):
    """Sweeps, C and Rust side by side (and null_blk), with gnuplot. Returns True if drawn."""
    data_dir = os.path.dirname(os.path.abspath(path))
    files = {}
    for kind, metric in (("qd", "iops"), ("bs", "bw")):
        points = sorted((order_key(wl)[2], wl) for wl in summary
                        if wl.startswith(f"sweep-{kind}-"))
        fn = os.path.join(data_dir, f"sweep-{kind}.dat")
        if not points:
            # A run of some workloads only (BENCH_ONLY): no panel, and no stale data.
            if os.path.exists(fn):
                os.remove(fn)
            continue
        with open(fn, "w") as f:
            f.write("# x " + " ".join(f"{d}_med {d}_min {d}_max" for d in DRIVERS) + "\n")
            for x, wl in points:
                cols = [str(x)]
                for d in DRIVERS:
                    med = summary[wl]["median"].get(d, {}).get(metric)
                    vals = summary[wl].get("_raw", {}).get(d, {}).get(metric, [])
                    cols += [f"{med:.3f}" if med else "NaN",
                             f"{min(vals):.3f}" if vals else "NaN",
                             f"{max(vals):.3f}" if vals else "NaN"]
                f.write(" ".join(cols) + "\n")
        files[kind] = fn
    if os.path.exists(path):
        os.remove(path)
    if not files:
        return False
    gp = shutil.which("gnuplot")
    if not gp:
        print("bench_report: gnuplot not found, no plot", file=sys.stderr)
        return False
    def lines(data):
        """One plot command: C, Rust and null_blk with their ranges."""
        styles = (("nvme (C)", "#1f77b4", ""), ("rnvme (Rust)", "#d62728", ""),
                  ("null_blk (ceiling)", "#7f7f7f", " dt 2"))
        parts = [f"'{data if i == 0 else ''}' u 1:{2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i} "
                 f"w yerrorlines t '{t}' lc rgb '{c}'{x}" for i, (t, c, x) in enumerate(styles)]
        return "plot " + ", ".join(parts)

    panels = {
        "qd": ("queue depth (4k random read, one job)", "IOPS",
               "Queue-depth sweep: median and range of the repetitions"),
        "bs": ("block size, KiB (random read, QD8)", "MB/s", "Block-size sweep"),
    }
    width = 550 * len(files)
    term = f"svg size {width},450 dynamic font 'sans,11'" if path.endswith(".svg") else \
        f"pngcairo size {width},450 font 'sans,10'"
    script = f"""
set terminal {term}
set termoption noenhanced
set output '{path}'
set multiplot layout 1,{len(files)}
set grid
set key top left
set logscale x 2
"""
    for kind, fn in files.items():
        xlabel, ylabel, title = panels[kind]
        script += f"set xlabel '{xlabel}'\nset ylabel '{ylabel}'\nset title '{title}'\n"
        script += lines(fn) + "\n"
    script += "unset multiplot\n"
    r = subprocess.run([gp], input=script, text=True, capture_output=True)
    if r.returncode != 0 and "pngcairo" in term:
        # gnuplot without cairo: the libgd PNG terminal.
        script = script.replace(term, f"png size {width},450")
        r = subprocess.run([gp], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        print(f"bench_report: gnuplot failed: {r.stderr.strip()}", file=sys.stderr)
        return False
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("console", nargs="?", help="console log of the benchmark VM")
    p.add_argument("--json", help="write every sample and the summary here")
    p.add_argument("--markdown", help="write the table as Markdown here")
    p.add_argument("--plot", help="write the sweep plot here (.png or .svg)")
    p.add_argument("--cost-console", help="console log of the cost VM (qemu/guest/cost.sh)")
    p.add_argument("--cost-marks", help="the icount plugin's marks file")
    p.add_argument("--system-map", help="the guest kernel's System.map (driver path figure)")
    p.add_argument("--kdir", help="the guest kernel's build directory (driver path figure)")
    p.add_argument("--scale-console", help="console log of the scale VM (qemu/guest/scale.sh)")
    p.add_argument("--cost-only", action="store_true", help="no fio results: the cost and scale tables")
    p.add_argument("--throttle-mbps", type=float, default=8,
                   help="the write throttle of the *-throttled workloads' disks")
    p.add_argument("--machine", default="", help="one line describing the machine")
    p.add_argument("--command", default="make bench", help="the command that made this")
    a = p.parse_args()

    samples, summary, rows = [], {}, None
    if not a.cost_only:
        if not a.console:
            sys.exit("bench_report: give the benchmark VM's console log (or --cost-only)")
        samples = parse_console(a.console)
        if not samples:
            sys.exit("bench_report: no benchmark results in " + a.console)
        summary = summarise(samples)
    failed = [s for s in samples if s.get("rc", 1) != 0 or "error" in s]
    if not a.cost_only:
        failed += clocksource_check(a.console)
    for wl, row in summary.items():
        raw = {}
        for s in samples:
            if s["workload"] == wl and s.get("rc") == 0:
                for m, *_ in METRICS:
                    if m in s:
                        raw.setdefault(s["driver"], {}).setdefault(m, []).append(s[m])
        row["_raw"] = raw
    if summary:
        rows = table(summary)
        print()
        print_table(rows)
        print()
        print("r/c: rnvme / nvme, median of the per-repetition ratios [95% bootstrap interval];")
        print("     IOPS and MB/s: higher is better; latency and CPU per I/O: lower is better;")
        print("     '!' marks a ratio whose interval is entirely on the wrong side of 1.00.")
    fs_rows, throttle_rows = None, None
    if any(r.get("fs") for r in summary.values()):
        fs_rows = fs_table(summary)
        print()
        print_table(fs_rows)
    if any("throttled" in s["workload"] for s in samples):
        throttle_rows, over = throttle_check(samples, a.throttle_mbps)
        failed += over
        print()
        print_table(throttle_rows)
    cost, cost_rows, cost_ratio = [], None, None
    if a.cost_console and a.cost_marks:
        cost = parse_cost(a.cost_console, a.cost_marks, a.system_map, a.kdir)
        if cost:
            cost_rows, cost_ratio = cost_table(cost)
            print()
            print("Cost per I/O (QEMU TCG plugin count of guest instructions, 1 vCPU):")
            print_table(cost_rows)
        else:
            print("no cost results (icount plugin marks missing)")
            failed.append({"workload": "cost", "driver": "-", "rep": 0, "error": "no marks"})
    scale, scale_rows, scale_setup = [], None, {}
    if a.scale_console:
        scale, scale_setup = parse_scale(a.scale_console)
        if scale:
            scale_rows = scale_table(scale)
            print()
            print("Scale (memory the driver holds once every disk is up, caches dropped):")
            print_table(scale_rows)
        else:
            print("no scale results")
            failed.append({"workload": "scale", "driver": "-", "rep": 0, "error": "no results"})
    if failed:
        print(f"{len(failed)} run(s) failed or were unreadable:")
        for s in failed[:10]:
            print(f"  {s['workload']} {s['driver']} rep {s['rep']}: "
                  f"{s.get('error', 'exit ' + str(s.get('rc')))}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": a.machine, "command": a.command, "samples": samples,
                       "summary": summary, "cost_samples": cost, "cost_ratio": cost_ratio,
                       "scale_samples": scale, "scale_setup": scale_setup},
                      f, indent=1, sort_keys=True)
    if a.markdown:
        with open(a.markdown, "w") as f:
            if rows:
                f.write(markdown(rows) + "\n\n")
            if fs_rows:
                f.write(markdown(fs_rows) + "\n\n")
            if throttle_rows:
                f.write("Synchronous writes on disks QEMU throttles (a rate above the limit "
                        "would mean a flush or FUA was not honoured):\n\n"
                        + markdown(throttle_rows) + "\n\n")
            if cost_rows:
                f.write("Cost per I/O, counted (QEMU TCG plugin, guest kernel instructions "
                        "per 4 KiB read at QD1, 1 vCPU):\n\n" + markdown(cost_rows) + "\n")
            if scale_rows:
                f.write("\n" + scale_markdown(scale_rows, scale_setup))
        if scale_rows:
            with open(os.path.join(os.path.dirname(os.path.abspath(a.markdown)), "scale.md"),
                      "w") as f:
                f.write(scale_markdown(scale_rows, scale_setup))
    if a.plot:
        if plot(summary, a.plot):
            print(f"plot: {a.plot}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
