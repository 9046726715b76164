#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Every submitted command whole, from the device's side: the submission queues' memory.

QEMU's trace events name a command's opcode, id, namespace and queue, and a few of its
fields (a read's LBA and length), not the rest: FUA, PRINFO and the reference tag, a Write
Zeroes' deallocate bit, an Abort's target. A driver that drops one of them passes every
check that reads the trace. The submission queue itself holds every command as the device
fetched it: an entry stays in the ring after its doorbell until the ring wraps onto it.

    scripts/sqe.py dump TRACE QMP-SOCKET PREFIX
        the rings of the controller enabled last, found in QEMU's trace (the admin queue's
        address and size as the driver programmed them, each I/O queue's from its Create
        I/O Submission Queue) and saved from guest memory over QMP (pmemsave) to
        PREFIX.sq<QID>; PREFIX.index lists them. The guest asks for this with lib.sh's
        sq_dump, between a driver's commands and anything that could overwrite them.
    scripts/sqe.py check RESULTS DIR [TRACE]
        the guest's expectations of those dumps (RNVME-SQE-* lines on its results channel;
        DIR holds the dumps; TRACE is QEMU's): one `PASS NAME` or `FAIL NAME: why` each.

    RNVME-SQE-EXPECT NAME DUMP MATCH... -- WANT...
        the commands of dump DUMP (every ring) whose fields equal MATCH (field=value) must
        number at least one, and each must have the fields of WANT (field=value).
    RNVME-SQE-SAME NAME DUMP-A DUMP-B MATCH-A... -- MATCH-B... -- FIELD...
        the command MATCH-A selects in DUMP-A (exactly one) and the one MATCH-B selects in
        DUMP-B have the same FIELDs: the same command from rnvme and from the C driver.
    RNVME-SQE-ABORTS NAME DUMP NSID
        the admin queue of DUMP holds an Abort, and each Abort there names (its SQID and
        CID) a command the device received for namespace NSID (QEMU's trace): the command
        that timed out, not another.

Fields: opc, fuse, psdt, cid, nsid, mptr, prp1, prp2, cdw10..cdw15, and by name: slba
(cdw11:cdw10), nlb (cdw12[15:0], 0's based), fua (cdw12[30]), lr (cdw12[31]), prinfo
(cdw12[29:26]), deac (cdw12[25]), dtype (cdw12[23:20]), dsm (cdw13[7:0]), ilbrt (cdw14),
lbat (cdw15[15:0]), lbatm (cdw15[31:16]), abort_sqid (cdw10[15:0]), abort_cid
(cdw10[31:16]), fid (cdw10[7:0]), qid (the ring the command is in). Values are decimal or
0x-prefixed.
"""

import json
import os
import re
import socket
import struct
import sys

SQE = 64


def fields(raw, qid):
    (cdw0, nsid, _cdw2, _cdw3, mptr, prp1, prp2,
     c10, c11, c12, c13, c14, c15) = struct.unpack("<IIIIQQQIIIIII", raw)
    return {
        "opc": cdw0 & 0xff, "fuse": (cdw0 >> 8) & 3, "psdt": (cdw0 >> 14) & 3,
        "cid": cdw0 >> 16, "nsid": nsid, "mptr": mptr, "prp1": prp1, "prp2": prp2,
        "cdw10": c10, "cdw11": c11, "cdw12": c12, "cdw13": c13, "cdw14": c14, "cdw15": c15,
        "slba": c10 | (c11 << 32), "nlb": c12 & 0xffff, "fua": (c12 >> 30) & 1,
        "lr": c12 >> 31, "prinfo": (c12 >> 26) & 0xf, "deac": (c12 >> 25) & 1,
        "dtype": (c12 >> 20) & 0xf, "dsm": c13 & 0xff, "ilbrt": c14, "lbat": c15 & 0xffff,
        "lbatm": c15 >> 16, "abort_sqid": c10 & 0xffff, "abort_cid": c10 >> 16,
        "fid": c10 & 0xff, "qid": qid,
    }


# --- dump ----------------------------------------------------------------------------------

def rings(trace_lines):
    """[(qid, address, entries)] of the controller enabled last in the trace."""
    start = None
    for i, line in enumerate(trace_lines):
        if "pci_nvme_mmio_start_success" in line:
            start = i
    if start is None:
        raise ValueError("no controller enable (pci_nvme_mmio_start_success) in the trace")
    asq, aqa = None, None
    for line in trace_lines[:start]:
        m = re.search(r"pci_nvme_mmio_asqaddr wrote MMIO, admin submission queue address=0x([0-9a-f]+)", line)
        if m:
            # A 32-bit write of the low half keeps the high half; a 64-bit one sets both.
            v = int(m.group(1), 16)
            asq = v if v >> 32 else ((asq or 0) & ~0xffffffff) | v
        m = re.search(r"pci_nvme_mmio_asqaddr_hi .*new_address=0x([0-9a-f]+)", line)
        if m:
            asq = int(m.group(1), 16)
        m = re.search(r"pci_nvme_mmio_aqattr wrote MMIO, admin queue attributes=0x([0-9a-f]+)", line)
        if m:
            aqa = int(m.group(1), 16)
    if asq is None or aqa is None:
        raise ValueError("the admin queue's address or size is not in the trace")
    out = {0: (asq, (aqa & 0xfff) + 1)}
    for line in trace_lines[start:]:
        m = re.search(r"pci_nvme_create_sq create submission queue, addr=0x([0-9a-f]+), "
                      r"sqid=(\d+), cqid=\d+, qsize=(\d+)", line)
        if m:
            out[int(m.group(2))] = (int(m.group(1), 16), int(m.group(3)) + 1)
    return [(q, a, n) for q, (a, n) in sorted(out.items())]


def qmp(path, command, args):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    f = s.makefile("rw")
    json.loads(f.readline())
    reply = None
    for c in ({"execute": "qmp_capabilities"}, {"execute": command, "arguments": args}):
        f.write(json.dumps(c) + "\n")
        f.flush()
        while True:
            reply = json.loads(f.readline())
            if "return" in reply or "error" in reply:
                break
    s.close()
    if "error" in reply:
        raise RuntimeError(f"{command}: {reply['error']}")


def dump(trace, sock, prefix):
    with open(trace, errors="replace") as f:
        lines = f.read().splitlines()
    index = []
    for qid, addr, n in rings(lines):
        path = os.path.abspath(f"{prefix}.sq{qid}")
        qmp(sock, "pmemsave", {"val": addr, "size": n * SQE, "filename": path})
        index.append(f"{qid} {addr:#x} {n}")
    with open(prefix + ".index", "w") as f:
        f.write("\n".join(index) + "\n")


# --- check ---------------------------------------------------------------------------------

def load(directory, name):
    """Every command of dump NAME: a list of field dictionaries."""
    cmds = []
    with open(os.path.join(directory, f"{name}.index")) as f:
        for line in f:
            qid, _, n = line.split()
            with open(os.path.join(directory, f"{name}.sq{qid}"), "rb") as r:
                data = r.read()
            if len(data) != int(n) * SQE:
                raise ValueError(f"ring {qid} of {name}: {len(data)} bytes, want {int(n) * SQE}")
            for k in range(int(n)):
                raw = data[k * SQE:(k + 1) * SQE]
                if raw != bytes(SQE):
                    cmds.append(fields(raw, int(qid)))
    return cmds


def parse_pairs(words):
    out = {}
    for w in words:
        k, sep, v = w.partition("=")
        if not sep or k not in fields(bytes(SQE), 0):
            raise ValueError(f"bad field {w!r}")
        out[k] = int(v, 0)
    return out


def select(cmds, match):
    return [c for c in cmds if all(c[k] == v for k, v in match.items())]


def show(c):
    keys = ("qid", "opc", "cid", "nsid", "slba", "nlb", "fua", "prinfo", "cdw10", "cdw12",
            "cdw13", "cdw14", "cdw15")
    return " ".join(f"{k}={c[k]:#x}" for k in keys)


def expect(directory, words):
    dump_name, rest = words[0], words[1:]
    sep = rest.index("--")
    match, want = parse_pairs(rest[:sep]), parse_pairs(rest[sep + 1:])
    hits = select(load(directory, dump_name), match)
    if not hits:
        return f"no command in {dump_name} with {' '.join(rest[:sep])}"
    for c in hits:
        bad = [f"{k}={c[k]:#x} (want {v:#x})" for k, v in want.items() if c[k] != v]
        if bad:
            return f"{' '.join(bad)}: {show(c)}"
    return None


def same(directory, words):
    a, b, rest = words[0], words[1], words[2:]
    s1 = rest.index("--")
    s2 = rest.index("--", s1 + 1)
    ma, mb, keys = parse_pairs(rest[:s1]), parse_pairs(rest[s1 + 1:s2]), rest[s2 + 1:]
    ha, hb = select(load(directory, a), ma), select(load(directory, b), mb)
    if len(ha) != 1 or len(hb) != 1:
        return f"{len(ha)} commands in {a} and {len(hb)} in {b} match (want one each)"
    diff = [f"{k} {ha[0][k]:#x} / {hb[0][k]:#x}" for k in keys if ha[0][k] != hb[0][k]]
    return f"differ: {', '.join(diff)}" if diff else None


def aborts(directory, words, trace):
    dump_name, nsid = words[0], int(words[1], 0)
    found = [c for c in load(directory, dump_name) if c["qid"] == 0 and c["opc"] == 0x08]
    if not found:
        return f"no Abort in the admin queue of {dump_name}"
    if trace is None:
        return "no QEMU trace to check the Aborts against"
    pat = re.compile(rf"pci_nvme_io_cmd cid (\d+) nsid {nsid:#x} sqid (\d+) ")
    sent = set()
    with open(trace, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                sent.add((int(m.group(2)), int(m.group(1))))
    for c in found:
        if (c["abort_sqid"], c["abort_cid"]) not in sent:
            return (f"an Abort names sqid {c['abort_sqid']} cid {c['abort_cid']}, which the "
                    f"device never received for namespace {nsid}: {show(c)}")
    return None


def check(results, directory, trace=None):
    failed = 0
    with open(results, errors="replace") as f:
        lines = [line.rstrip("\r\n") for line in f]
    for line in lines:
        words = line.split()
        kinds = {"RNVME-SQE-EXPECT": expect, "RNVME-SQE-SAME": same}
        if not words or words[0] not in kinds and words[0] != "RNVME-SQE-ABORTS":
            continue
        name = words[1] if len(words) > 1 else "?"
        try:
            if words[0] == "RNVME-SQE-ABORTS":
                why = aborts(directory, words[2:], trace)
            else:
                why = kinds[words[0]](directory, words[2:])
        except (ValueError, OSError, IndexError, struct.error) as e:
            why = f"cannot check: {e}"
        if why:
            failed += 1
            print(f"FAIL {name}: {why}")
        else:
            print(f"PASS {name}")
    return 1 if failed else 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "dump":
        dump(*sys.argv[2:])
        return 0
    if len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        return check(*sys.argv[2:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
