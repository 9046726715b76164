#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Did a Flush reach the device after the last Write it completed?

    scripts/flush_order.py TRACE [NSID]

TRACE is QEMU's trace with the events pci_nvme_io_cmd (the commands the emulated
controller received) and pci_nvme_enqueue_req_completion (the completions it posted);
writes (opcode 1) and their completions are matched by command id and queue (rnvme pairs
SQ n with CQ n). A Flush (opcode 0) received before the last write completed does not
cover it. Exits 0 if a Flush came after it; else prints why and exits 1.
"""

import re
import sys


def check(lines, nsid=1):
    cmd = re.compile(rf"pci_nvme_io_cmd cid (\d+) nsid {nsid:#x} sqid (\d+) opc 0x([0-9a-f]+) ")
    cqe = re.compile(r"pci_nvme_enqueue_req_completion cid (\d+) cqid (\d+) ")
    pending, last_done, flushes, writes = set(), None, [], 0
    for i, line in enumerate(lines):
        m = cmd.search(line)
        if m:
            opc = int(m.group(3), 16)
            if opc == 1:
                pending.add((m.group(1), m.group(2)))
                writes += 1
            elif opc == 0:
                flushes.append(i)
            continue
        m = cqe.search(line)
        if m and (m.group(1), m.group(2)) in pending:
            pending.discard((m.group(1), m.group(2)))
            last_done = i
    if last_done is None:
        return f"{writes} writes received, none completed in QEMU's trace"
    if not any(f > last_done for f in flushes):
        return (f"no Flush after the last write completed (trace line {last_done + 1}); "
                f"{len(flushes)} Flushes before it")
    return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    try:
        with open(sys.argv[1], errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"no QEMU trace: {e}")
        return 1
    why = check(lines, int(sys.argv[2]) if len(sys.argv) == 3 else 1)
    if why:
        print(why)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
