#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of the counted cost's scope (scripts/cost_scope.py) on a built kernel: every
instruction is named, and the drivers' own code (in modules, past the kernel image) counts
in the driver path. Prints "PASS name" or "FAIL name: why" per test.

    scripts/cost_scope_test.py KERNEL-BUILD-DIR
"""
import os
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_scope  # noqa: E402


def check(name, ok, why):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


def main():
    kdir = sys.argv[1]
    system_map = os.path.join(kdir, "System.map")
    out_names = cost_scope.out_of_scope_names(kdir)
    end = None
    with open(system_map) as f:
        for line in f:
            a, _t, n = line.split()[:3]
            if n == "_end":
                end = int(a, 16)
            elif n == "blk_mq_submit_bio":
                submit_bio = int(a, 16)
    module_fn = end + 0x3e000000 + 0x40  # where x86-64 loads modules (0xffffffffc0...)
    with tempfile.NamedTemporaryFile("w", suffix=".log") as console:
        console.write(f"KSYM {module_fn - 0x40:016x} t nvme_poll_cq [nvme]\n")
        console.flush()
        bare = cost_scope.Symbols(system_map)
        named = cost_scope.Symbols(system_map, console.name)
    # Without the modules' symbols (a console that printed none), module code is still in
    # the driver path: before, it took the name of the image's last text symbol, an idle
    # driver's (out of scope), and both drivers' own code left the figure.
    funcs = cost_scope.per_function(Counter({module_fn: 100, submit_bio: 10}), bare)
    inside, outside = cost_scope.split(funcs, out_names)
    check("module_code_without_symbols_is_in_scope", (inside, outside) == (110, 0),
          f"in scope {inside}, out {outside}: module code named {bare.name(module_fn)!r}")
    check("module_code_named_by_ksym",
          named.name(module_fn) == "nvme_poll_cq [nvme]", f"named {named.name(module_fn)!r}")
    check("kernel_code_named_by_system_map", bare.name(submit_bio + 4) == "blk_mq_submit_bio",
          f"named {bare.name(submit_bio + 4)!r}")


if __name__ == "__main__":
    main()
