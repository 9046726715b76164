#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The driver's layers: every top-level module lives in a layer folder, and imports only
from its own folder and the folders below it.

    scripts/import-check.py [ROOT]

The folders, bottom up: src/spec, src/kernel_ext, src/core, src/pci, src/features,
src/entry. rnvme.rs's `#[path = "..."] mod name;` lines say where each module is; its
imports are the `use crate::...` trees (braces included) and `crate::x` paths, doc links
too, of every .rs file under it. Prints `PASS name` or `FAIL name: why` (as
scripts/docs-check.py; scripts/test.sh reports it as `docs: name`); exits 1 on a failure.

Modules also must not import each other in a cycle, with one exception: the namespace
features in FEATURE_KNOT, which are one unit as C's core.c, ioctl.c and multipath.c are
through nvme.h (`Shared` holds the subsystem membership, a path holds a lease of
`Shared`, a handle names its namespace). A cycle that takes in any other module fails.
"""

import os
import re
import sys

NAME = "imports go only down the layers (scripts/import-check.py)"
LAYERS = ["spec", "kernel_ext", "core", "pci", "features", "entry"]
FEATURE_KNOT = {"ioctl", "mpath", "ns", "passthru", "scan", "shared"}
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))


def names_in_braces(text, i):
    """Top-level names of the `{...}` tree starting at text[i] == '{'."""
    depth, cur, out = 0, "", []
    for c in text[i:]:
        depth += (c == "{") - (c == "}")
        if (c == "," and depth == 1) or depth == 0:
            out.append(cur.strip().split("::")[0])
            cur = ""
            if depth == 0:
                return out
        elif depth >= 1 and not (c == "{" and depth == 1):
            cur += c
    return out


def main():
    root_rs = open(os.path.join(ROOT, "rnvme.rs"), encoding="utf-8").read()
    mods = dict((n, p) for p, n in re.findall(r'#\[path = "([^"]+)"\]\s*mod (\w+);', root_rs))
    layer = {}
    for name, path in mods.items():
        parts = path.split("/")
        layer[name] = parts[1] if len(parts) > 2 and parts[1] in LAYERS else None
    bad = [f"{n} ({p}) is in no layer folder" for n, p in sorted(mods.items()) if not layer[n]]
    edges = set()
    deps = {n: set() for n in mods}
    for name, path in sorted(mods.items()):
        top = os.path.join(ROOT, os.path.dirname(path) if path.endswith("mod.rs") else path)
        files = [top] if os.path.isfile(top) else [
            os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".rs")]
        for f in sorted(files):
            text = open(f, encoding="utf-8").read()
            used = set(re.findall(r"\bcrate::(\w+)", text))
            for m in re.finditer(r"\bcrate::\{", text):
                used.update(names_in_braces(text, m.end() - 1))
            for dep in sorted(used & set(mods) - {name}):
                if not (layer[name] and layer[dep]):
                    continue
                deps[name].add(dep)
                edges.add((layer[name], layer[dep]))
                if LAYERS.index(layer[dep]) > LAYERS.index(layer[name]):
                    bad.append(f"{os.path.relpath(f, ROOT)} ({layer[name]}) imports {dep} "
                               f"({layer[dep]}), a layer above")
    # A cycle between folders (only possible if the order above were not enforced).
    graph = {a: {b for x, b in edges if x == a and b != a} for a in LAYERS}
    state = {}

    def cyclic(v):
        state[v] = 1
        for w in graph[v]:
            if state.get(w) == 1 or (w not in state and cyclic(w)):
                return True
        state[v] = 2
        return False

    if any(v not in state and cyclic(v) for v in LAYERS):
        bad.append("the folders import each other in a cycle: "
                   + ", ".join(f"{a}->{b}" for a, b in sorted(edges) if a != b))
    for knot in cycles(deps):
        if not knot <= FEATURE_KNOT:
            bad.append("modules import each other in a cycle: " + ", ".join(sorted(knot)))
    print(f"FAIL {NAME}: {' | '.join(bad)}" if bad else f"PASS {NAME}")
    return 1 if bad else 0


def cycles(deps):
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index, low, stack, out = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(deps[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            knot = set()
            while not knot or w != v:
                w = stack.pop()
                knot.add(w)
            if len(knot) > 1:
                out.append(knot)

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
