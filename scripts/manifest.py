#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The test manifest: every scenario `make test` runs and every test each must report.

    scripts/manifest.py check MANIFEST SEEN FLAVOURS [ONLY]
        compares the names a run reported (SEEN: one "scenario: test" per line, in order)
        with MANIFEST; prints `FAIL scenario: test: why` for each test that is missing,
        reported more than once, or not in the manifest, and a summary line; exits 1 if
        there was any. FLAVOURS ("base debug") and ONLY (RNVME_TEST_ONLY's regex) select
        the scenarios that were meant to run: VM scenarios end in -base or -debug and run
        when their flavour is selected and ONLY (if given) matches; "build-*",
        "modinfo-*" and "harness-*" go with their flavour; "host" always runs.
    scripts/manifest.py write SEEN
        prints a manifest made of a run's names (to review and commit after adding tests).
    scripts/manifest.py merge MANIFEST SEEN...
        prints MANIFEST with the sections of every scenario the SEEN files (of partial
        runs) reported replaced by what they reported, in order; new scenarios go last.
    scripts/manifest.py table MANIFEST
        prints the table of scenarios and their test counts (docs/testing.md's).

The manifest's format: `[scenario]` starts a scenario, each other non-empty line not
starting with `#` is a test name.
"""

import re
import sys
from collections import Counter


def split(line):
    scenario, _, name = line.partition(": ")
    return scenario, name


def load(path):
    tests, scenario = [], None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            m = re.fullmatch(r"\[(\S+)\]", line)
            if m:
                scenario = m.group(1)
            elif scenario is None:
                sys.exit(f"{path}:{n}: test before the first [scenario]")
            else:
                tests.append((scenario, line))
    return tests


def selected(scenario, flavours, only):
    if scenario in ("host", "docs"):
        return True
    m = re.fullmatch(r"(.+)-(base|debug)", scenario)
    if not m or m.group(2) not in flavours:
        return False
    if m.group(1) in ("build", "modinfo", "harness"):
        return True
    return not only or re.search(only, scenario) is not None


def check(manifest, seen_path, flavours, only):
    expected = [t for t in load(manifest) if selected(t[0], flavours.split(), only)]
    with open(seen_path) as f:
        seen = [split(line.rstrip("\n")) for line in f if line.strip()]
    counts = Counter(seen)
    want = set(expected)
    bad = 0
    for t in expected:
        if counts[t] == 0:
            print(f"FAIL {t[0]}: {t[1]}: missing (the manifest lists it; the run never reported it)")
            bad += 1
    reported = set()
    for t in seen:
        if t in reported:
            continue
        reported.add(t)
        if counts[t] > 1:
            print(f"FAIL {t[0]}: {t[1]}: reported {counts[t]} times")
            bad += 1
        if t not in want:
            print(f"FAIL {t[0]}: {t[1]}: not in the manifest ({manifest})")
            bad += 1
    print(f"manifest: {len(expected)} tests expected, {len(seen)} reported, {bad} problems")
    return 1 if bad else 0


def write(seen_path):
    print("# Every test `make test` reports, by scenario (scripts/manifest.py).")
    last = None
    with open(seen_path) as f:
        for line in f:
            if not line.strip():
                continue
            scenario, name = split(line.rstrip("\n"))
            if scenario != last:
                print(f"\n[{scenario}]")
                last = scenario
            print(name)


def merge(manifest, seen_paths):
    runs = {}
    for path in seen_paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    scenario, name = split(line.rstrip("\n"))
                    runs.setdefault(scenario, [])
                    if name not in runs[scenario]:
                        runs[scenario].append(name)
    order, sections = [], {}
    for scenario, name in load(manifest):
        if scenario not in sections:
            order.append(scenario)
            sections[scenario] = []
        sections[scenario].append(name)
    for scenario, names in runs.items():
        if scenario not in sections:
            order.append(scenario)
        sections[scenario] = names
    print("# Every test `make test` reports, by scenario (scripts/manifest.py).")
    for scenario in order:
        print(f"\n[{scenario}]")
        for name in sections[scenario]:
            print(name)


def table(manifest):
    counts = {}
    for scenario, _name in load(manifest):
        m = re.fullmatch(r"(.+)-(base|debug)", scenario)
        key, flavour = (m.group(1), m.group(2)) if m else (scenario, "base")
        counts.setdefault(key, {"base": 0, "debug": 0})[flavour] += 1
    print("| scenario | tests, base kernel | tests, debug kernel |")
    print("| --- | --- | --- |")
    for key, c in counts.items():
        print(f"| {key} | {c['base'] or '-'} | {c['debug'] or '-'} |")
    total = sum(c["base"] + c["debug"] for c in counts.values())
    print(f"| all | {total} tests in all | |")


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "check":
        only = sys.argv[5] if len(sys.argv) > 5 else ""
        return check(sys.argv[2], sys.argv[3], sys.argv[4], only)
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
