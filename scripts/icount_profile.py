#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Instructions per kernel function between pairs of icount marks (qemu/plugins/icount.c,
profile=on): where a driver spends its instructions per I/O.

    icount_profile.py MARKS CONSOLE SYSTEM_MAP --kdir KDIR --ios N [--top 30] [--all]

CONSOLE has one `PROFILE-RUN <label>` line per bracketed run, in order, and the guest's
module symbols as `KSYM <addr> <type> <name> [module]` lines (from /proc/kallsyms).
Functions out of the driver path's scope (idle loop, scheduler, timers: see
scripts/cost_scope.py) are summed on one line, or listed with --all.
"""
import argparse
import re
from collections import Counter

import cost_scope


def main():
    p = argparse.ArgumentParser()
    p.add_argument("marks")
    p.add_argument("console")
    p.add_argument("system_map")
    p.add_argument("--kdir", required=True, help="the guest kernel's build directory")
    p.add_argument("--ios", type=int, required=True)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--all", action="store_true", help="list out-of-scope functions too")
    a = p.parse_args()
    symbols = cost_scope.Symbols(a.system_map, a.console)
    out_names = cost_scope.out_of_scope_names(a.kdir)
    labels = []
    with open(a.console, errors="replace") as f:
        for line in f:
            m = re.search(r"PROFILE-RUN (\S+)", line)
            if m:
                labels.append(m.group(1))
    # Sections: the prof lines printed at mark k count what ran since mark k-1.
    sections = cost_scope.read_sections(a.marks)
    per_run = {}
    for k, label in enumerate(labels):
        if 2 * k + 1 < len(sections):
            per_run.setdefault(label, []).append(sections[2 * k + 1])
    for label, runs in per_run.items():
        if label.startswith("warmup-"):
            continue
        total = Counter()
        for r in runs:
            total.update(cost_scope.per_function(r, symbols))
        n = a.ios * len(runs)
        inside, outside = cost_scope.split(total, out_names)
        print(f"== {label}: {inside / n:.0f} driver-path kernel instructions per I/O "
              f"({sum(total.values()) / n:.0f} in all, {outside / n:.0f} idle, scheduler, timers)")
        shown = total if a.all else Counter({f: v for f, v in total.items() if f not in out_names})
        for name, v in shown.most_common(a.top):
            print(f"  {v / n:8.1f}  {name}")


if __name__ == "__main__":
    main()
