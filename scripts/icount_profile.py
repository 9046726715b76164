#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Instructions per kernel function between pairs of icount marks (qemu/plugins/icount.c,
profile=on): where a driver spends its instructions per I/O.

    icount_profile.py MARKS CONSOLE SYSTEM_MAP --ios N [--top 30]

CONSOLE has one `PROFILE-RUN <label>` line per bracketed run, in order, and the guest's
module symbols as `KSYM <addr> <type> <name> [module]` lines (from /proc/kallsyms).
"""
import argparse
import bisect
import re
from collections import Counter


def symbols(system_map, console):
    syms = []
    with open(system_map) as f:
        for line in f:
            a, t, n = line.split()[:3]
            if t in "tTwW":
                syms.append((int(a, 16), n))
    with open(console, errors="replace") as f:
        for line in f:
            m = re.search(r"KSYM ([0-9a-f]+) [tTwW] (\S+)\s+\[(\S+)\]", line)
            if m:
                syms.append((int(m.group(1), 16), f"{m.group(2)} [{m.group(3)}]"))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("marks")
    p.add_argument("console")
    p.add_argument("system_map")
    p.add_argument("--ios", type=int, required=True)
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    addrs, names = symbols(a.system_map, a.console)
    labels = []
    with open(a.console, errors="replace") as f:
        for line in f:
            m = re.search(r"PROFILE-RUN (\S+)", line)
            if m:
                labels.append(m.group(1))
    # Sections: the prof lines printed at mark k count what ran since mark k-1.
    sections, cur = [], None
    with open(a.marks) as f:
        for line in f:
            if line.startswith("mark "):
                cur = Counter()
                sections.append(cur)
            elif line.startswith("prof ") and cur is not None:
                _, va, n = line.split()
                va = int(va, 16)
                i = bisect.bisect_right(addrs, va) - 1
                cur[names[i] if i >= 0 else hex(va)] += int(n)
    per_run = {}
    for k, label in enumerate(labels):
        if 2 * k + 1 < len(sections):
            per_run.setdefault(label, []).append(sections[2 * k + 1])
    for label, runs in per_run.items():
        total = Counter()
        for r in runs:
            total.update(r)
        n = a.ios * len(runs)
        print(f"== {label}: {sum(total.values()) / n:.0f} kernel instructions per I/O")
        for name, v in total.most_common(a.top):
            print(f"  {v / n:8.1f}  {name}")


if __name__ == "__main__":
    main()
