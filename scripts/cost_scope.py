# SPDX-License-Identifier: GPL-2.0
"""What a block driver's counted cost per I/O includes: the guest kernel's instructions
between two icount marks (qemu/plugins/icount.c, profile=on), less the idle loop, the
scheduler, timers and the context switch.

Those depend on when the emulated device answers, not on the driver: a read whose
completion arrives before its task sleeps skips the whole sleep and wake-up (about 1500
instructions), so the total moves with the host's load. What is left is the path the
drivers share or control: system call, block layer, driver, DMA mapping, interrupt entry,
completion.

The scope is cut by object file of the kernel build (a function's name is looked up in the
objects below), so a kernel upgrade that moves code keeps the cut at the same places.
"""
import bisect
import glob
import os
import re
import subprocess
from collections import Counter

# Objects whose functions are out of scope: scheduler and idle loop, timer wheel, hrtimers
# and the tick, context tracking and RCU's quiescent-state work around idle and context
# switches, the context switch itself (registers, FPU state, address space), the TSC
# sched_clock and the local APIC timer, the rbtrees the scheduler and timers sort with,
# and cross-CPU calls flushed on the way into idle.
OUT_OF_SCOPE_OBJECTS = [
    "kernel/sched/*.o",
    "drivers/cpuidle/*.o",
    "kernel/time/tick-*.o",
    "kernel/time/timer.o",
    "kernel/time/hrtimer.o",
    "kernel/time/sleep_timeout.o",
    "kernel/time/clockevents.o",
    # The tick's timekeeping: the vDSO's copy of the clock and NTP's per-tick adjustment.
    "kernel/time/vsyscall.o",
    "kernel/time/ntp.o",
    "kernel/context_tracking.o",
    "kernel/rcu/tree.o",
    "kernel/smp.o",
    "arch/x86/kernel/process.o",
    "arch/x86/kernel/process_64.o",
    "arch/x86/kernel/fpu/core.o",
    "arch/x86/kernel/fpu/xstate.o",
    "arch/x86/mm/tlb.o",
    "arch/x86/kernel/tsc.o",
    "arch/x86/kernel/tsc_sync.o",
    "arch/x86/kernel/apic/apic.o",
    "lib/rbtree.o",
    # Memory housekeeping on a timer: the vmstat worker folds per-CPU counters and hands
    # per-CPU free pages back to the buddy allocator (below) seconds after a burst of frees.
    "mm/vmstat.o",
]
# Single functions of objects otherwise in scope: the return-to-user loop that calls
# schedule(), the assembly half of the context switch, and the page allocator's return of
# per-CPU free pages to the buddy lists (which the vmstat worker's decay of the per-CPU
# high mark drives: about 2 million instructions in some run within the first minute);
# then what runs per tick.
OUT_OF_SCOPE_FUNCTIONS = [
    "exit_to_user_mode_loop",
    "__switch_to_asm",
    "ret_from_fork_asm",
    "free_pcppages_bulk",
    "__free_one_page",
    "decay_pcp_high",
    # The tick's timekeeping update (per tick, so per second of the run, not per I/O; the
    # clock reads the block layer makes, `ktime_get`, stay in scope), the halt of the idle
    # loop and its NMI watchdog touch.
    "__timekeeping_advance",
    "timekeeping_advance",
    "timekeeping_update_from_shadow",
    "update_wall_time",
    "ktime_get_update_offsets_now",
    "pv_native_safe_halt",
    "local_touch_nmi",
]


def out_of_scope_names(kdir):
    """Names of the text symbols the scope leaves out, from the kernel build in `kdir`."""
    names = set(OUT_OF_SCOPE_FUNCTIONS)
    for pattern in OUT_OF_SCOPE_OBJECTS:
        objs = sorted(glob.glob(os.path.join(kdir, pattern)))
        if not objs:
            raise SystemExit(f"cost_scope: no {pattern} in {kdir} (is it a built kernel?)")
        nm = subprocess.run(["nm", "--defined-only"] + objs, capture_output=True, text=True,
                            check=True).stdout
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                names.add(parts[2])
    return names


# The name of code outside the kernel image that no KSYM line names (a module's): in scope.
# Without it, such an address took the name of the image's last text symbol (an idle
# driver's exit function, out of scope): the drivers' own code left the figure.
OUTSIDE_IMAGE = "[outside the kernel image]"


class Symbols:
    """Kernel text addresses to function names: System.map, and the modules' symbols the
    guest printed as `KSYM <addr> <type> <name> [module]` lines (optional). An address past
    the image's end (`_end`) that no KSYM line covers is named OUTSIDE_IMAGE."""

    def __init__(self, system_map, console=None):
        syms = []
        with open(system_map) as f:
            for line in f:
                a, t, n = line.split()[:3]
                if t in "tTwW":
                    syms.append((int(a, 16), n))
                elif n == "_end":
                    syms.append((int(a, 16), OUTSIDE_IMAGE))
        if console:
            with open(console, errors="replace") as f:
                for line in f:
                    m = re.search(r"KSYM ([0-9a-f]+) [tTwW] (\S+)\s+\[(\S+)\]", line)
                    if m:
                        syms.append((int(m.group(1), 16), f"{m.group(2)} [{m.group(3)}]"))
        syms.sort()
        self.addrs = [a for a, _ in syms]
        self.names = [n for _, n in syms]

    def name(self, va):
        i = bisect.bisect_right(self.addrs, va) - 1
        return self.names[i] if i >= 0 else hex(va)


def read_sections(marks):
    """The plugin's marks file as one Counter per mark: instructions per kernel block
    address executed since the previous mark."""
    sections, cur = [], None
    with open(marks) as f:
        for line in f:
            if line.startswith("mark "):
                cur = Counter()
                sections.append(cur)
            elif line.startswith("prof ") and cur is not None:
                _, va, n = line.split()
                cur[int(va, 16)] += int(n)
    return sections


def per_function(section, symbols):
    """A section's instructions per function name."""
    out = Counter()
    for va, n in section.items():
        out[symbols.name(va)] += n
    return out


def split(functions, out_names):
    """(in scope, out of scope) instruction totals of a per-function Counter."""
    out = sum(n for f, n in functions.items() if f in out_names)
    return sum(functions.values()) - out, out
