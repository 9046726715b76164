#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks a guest's expectations against QEMU's trace of the emulated controllers.

    scripts/trace_expect.py RESULTS TRACE

RESULTS is a VM's results channel (qemu/run --results). The guest's test library
(qemu/guest/lib.sh) writes there:

    RNVME-TRACE-MARK NAME NSID LBA BLOCK-SIZE
        the guest read 3 blocks at LBA of namespace NSID (blocks no test uses) just now;
        in the trace it is a pci_nvme_read of those blocks, after the previous mark's
    RNVME-TRACE-EXPECT NAME FROM TO OP N REGEX
        the trace lines matching REGEX (Python syntax, searched in each line) between
        marks FROM and TO ("start", "end": the whole trace) must number N (OP eq, ge, le),
        or (OP sumeq) their first group, summed, must be N. N may be max:NAME,NAME...:
        the largest count of those earlier expectations, or sum:NAME,NAME...: their sum.
    RNVME-TRACE-CONTROL NAME FROM TO REGEX
        the positive control of expectation NAME: REGEX must match at least one line
        between FROM and TO. An expectation that something is absent (eq 0, le) passes
        only with a control that matched: a count of zero proves nothing when the event
        is not recorded or the pattern does not fit its format.

Prints one line per expectation, `PASS NAME` or `FAIL NAME: why`, and exits 1 if any
failed. This is how tests prove what the device did (commands, ranges, resets, retries,
shutdowns), not what the driver says it did.
"""

import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    marks, expects, controls = [], [], {}
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            words = line.rstrip("\r\n").split(" ", 6)
            if words[0] == "RNVME-TRACE-MARK" and len(words) == 5:
                marks.append((words[1], int(words[2]), int(words[3]), int(words[4])))
            elif words[0] == "RNVME-TRACE-EXPECT" and len(words) == 7:
                expects.append(words[1:])
            elif words[0] == "RNVME-TRACE-CONTROL" and len(words) >= 5:
                controls[words[1]] = (words[2], words[3], " ".join(words[4:]))
            elif words[0].startswith("RNVME-TRACE-"):
                print(f"FAIL trace_expectation_syntax: bad line {line.strip()!r}")
    try:
        with open(sys.argv[2], errors="replace") as f:
            trace = f.read().splitlines()
    except OSError as e:
        trace = None
        missing = str(e)

    failed = 0

    def result(name, ok, why=""):
        nonlocal failed
        if ok:
            print(f"PASS {name}")
        else:
            failed += 1
            print(f"FAIL {name}: {why}")

    if trace is None:
        for name, *_ in expects:
            result(name, False, f"no QEMU trace ({missing})")
        return 1 if failed else 0

    # Each mark is the first read of its block after the previous mark.
    where = {"start": 0, "end": len(trace)}
    pos = 0
    for name, nsid, lba, bs in marks:
        pat = re.compile(rf"pci_nvme_read cid \d+ nsid {nsid} nlb 3 count {3 * bs} lba {lba:#x}$")
        for i in range(pos, len(trace)):
            if pat.search(trace[i]):
                where[name] = pos = i
                break
        else:
            where[name] = None

    def control_fails(name):
        """Why the positive control of expectation NAME does not hold, or None."""
        if name not in controls:
            return "an absence in the trace needs a positive control (RNVME-TRACE-CONTROL)"
        frm, to, regex = controls[name]
        a, b = where.get(frm), where.get(to)
        if a is None or b is None:
            return f"control: mark {frm if a is None else to} not in the trace"
        try:
            pat = re.compile(regex)
        except re.error as e:
            return f"control: bad pattern: {e}"
        if not any(pat.search(line) for line in trace[a:b]):
            return f"its positive control /{regex}/ matched nothing in {frm}..{to}: " \
                "the event may not be recorded, or the pattern not fit it"
        return None

    counts = {}
    for name, frm, to, op, n, regex in expects:
        a, b = where.get(frm), where.get(to)
        if a is None or b is None:
            result(name, False, f"mark {frm if a is None else to} not in the trace")
            continue
        try:
            pat = re.compile(regex)
            if n.startswith("max:"):
                want = max(counts[ref] for ref in n[4:].split(","))
            elif n.startswith("sum:"):
                want = sum(counts[ref] for ref in n[4:].split(","))
            else:
                want = int(n)
        except (re.error, ValueError, KeyError) as e:
            result(name, False, f"bad expectation: {e}")
            continue
        hits = [m for m in (pat.search(line) for line in trace[a:b]) if m]
        if op == "sumeq":
            got = sum(int(m.group(1)) for m in hits)
            ok = got == want
        else:
            got = len(hits)
            counts[name] = got
            ok = {"eq": got == want, "ge": got >= want, "le": got <= want}.get(op)
            if ok is None:
                result(name, False, f"bad operator {op}")
                continue
        if ok and op in ("eq", "le") and want == 0:
            why = control_fails(name)
            if why:
                result(name, False, why)
                continue
        result(name, ok, f"{op} {want} wanted, {got} in the trace ({frm}..{to}: /{regex}/)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
