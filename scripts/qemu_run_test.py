#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of qemu/run's boot-failure retry, with a stand-in for qemu-system-x86_64.

A kernel report before /init (seen under TCG on the debug kernel: KASAN in early boot) makes
qemu/run boot again once. KASAN goes on after its report, so the guest must be stopped at
once: a guest that went on to run its test would have had the host act on its requests
(QMP commands in hmp_vm and hotplug_test), and the second run's requests would then be taken
for ones already done. Prints "PASS name" or "FAIL name: why" per test.

    scripts/qemu_run_test.py KERNEL-BUILD-DIR
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The stand-in: counts its starts in $FAKE_QEMU_STARTS, then plays a console log: the
# lines of $FAKE_QEMU_FIRST at its first start, of $FAKE_QEMU_AGAIN at later ones ("|"
# separates lines; "sleep N" pauses, "exit N" ends it there, as a guest that died), and
# writes the guest's exit status on the results
# channel if it gets to the end.
FAKE = r'''#!/usr/bin/env python3
import os, re, sys, time
args = " ".join(sys.argv[1:])
log = re.search(r"logfile=([^, ]+)", args).group(1)
res = re.search(r"file,id=results,path=([^, ]+)", args).group(1)
starts = os.environ["FAKE_QEMU_STARTS"]
first = not os.path.exists(starts)
with open(starts, "a") as f:
    f.write("start\n")
with open(starts + ".args", "w") as f:
    f.write(args)
# QEMU appends its trace: each start records one traced event.
for trace in re.findall(r"-trace enable=[^,]+,file=([^, ]+)", args)[:1]:
    with open(trace, "a") as f:
        f.write("pci_nvme_mmio_start_success setting controller enable bit succeeded\n")
script = os.environ["FAKE_QEMU_FIRST" if first else "FAKE_QEMU_AGAIN"]
with open(log, "a") as f:
    for line in script.split("|"):
        if line.startswith("sleep "):
            time.sleep(float(line[6:]))
            continue
        if line.startswith("exit "):
            sys.exit(int(line[5:]))
        f.write(line + "\n")
        f.flush()
with open(res, "a") as f:
    f.write("RNVME-EXIT-STATUS=0\n")
'''

KASAN = "[    0.015496] BUG: KASAN: wild-memory-access in do_raw_spin_lock+0xc3/0x200"
INIT = "[    2.000000] Run /init as init process|RNVME-BOOTED (clocksource tsc)"
# The kernel's int3 Oops as it swapped its clocksource after /init started, before the
# guest's /init said it had booted.
CLOCK_OOPS = ("[    1.15] Run /init as init process|[    1.573552] Oops: int3: 0000 [#1] SMP|"
              "[    1.591343] Kernel panic - not syncing: Fatal exception in interrupt")


def run(tmp, kdir, first, again, kernel=None, extra=()):
    """Runs qemu/run with the stand-in; returns (exit status, starts, seconds)."""
    starts = os.path.join(tmp, "starts")
    if os.path.exists(starts):
        os.unlink(starts)
    env = dict(os.environ, PATH=tmp + ":" + os.environ["PATH"], FAKE_QEMU_STARTS=starts,
               FAKE_QEMU_FIRST=first, FAKE_QEMU_AGAIN=again)
    t0 = time.monotonic()
    rc = subprocess.call(
        [os.path.join(ROOT, "qemu", "run"), "--kdir", kdir, "--quiet", "--timeout", "60",
         "--log", os.path.join(tmp, "console.log"), "--ctrls", "0"]
        + (["--kernel", kernel] if kernel else []) + list(extra) + ["--", "true"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.monotonic() - t0
    try:
        with open(starts) as f:
            n = len(f.read().splitlines())
    except FileNotFoundError:
        n = 0
    return rc, n, took


def append_of(tmp):
    """The kernel command line the stand-in was last started with."""
    with open(os.path.join(tmp, "starts.args")) as f:
        args = f.read()
    return args.split(" -append ", 1)[1].split(" -chardev ", 1)[0].split()


def kasan_kernel_boots_4level(tmp, kdir):
    """A kernel with KASAN gets no5lvl, one without keeps the CPU's 5-level paging (the
    early-boot false report qemu/run's comment explains)."""
    kasan = os.path.join(tmp, "kasan-kdir")
    os.makedirs(kasan, exist_ok=True)
    with open(os.path.join(kasan, ".config"), "w") as f:
        f.write("CONFIG_X86_64=y\nCONFIG_KASAN=y\nCONFIG_KASAN_GENERIC=y\n")
    bzimage = os.path.join(kdir, "arch/x86/boot/bzImage")
    rc, n, _t = run(tmp, kasan, INIT, INIT, kernel=bzimage)
    with_kasan = append_of(tmp) if n == 1 else []
    rc2, n2, _t = run(tmp, kdir, INIT, INIT)
    without = append_of(tmp) if n2 == 1 else ["?"]
    if rc == 0 and rc2 == 0 and "no5lvl" in with_kasan and "no5lvl" not in without:
        return None
    return f"KASAN kernel: rc {rc}, -append {with_kasan}; other: rc {rc2}, -append {without}"


def one_vcpu_keeps_barriers(tmp, kdir):
    """--maxcpus gives a one-vCPU guest a second possible CPU (QEMU then emits its
    fences: qemu/run's comment), and only when asked."""
    rc, n, _t = run(tmp, kdir, INIT, INIT, extra=["--smp", "1", "--maxcpus", "2"])
    with open(os.path.join(tmp, "starts.args")) as f:
        asked = f.read()
    rc2, n2, _t = run(tmp, kdir, INIT, INIT, extra=["--smp", "1"])
    with open(os.path.join(tmp, "starts.args")) as f:
        plain = f.read()
    if rc == 0 and rc2 == 0 and " -smp 1,maxcpus=2 " in asked and " -smp 1 " in plain:
        return None
    return f"rc {rc}, {rc2}; -smp with --maxcpus 2: {' -smp 1,maxcpus=2 ' in asked}"


def ns_of_sets_one_controllers_namespaces(tmp, kdir):
    """--ns-of CTRL:N gives controller CTRL N namespaces and leaves the others --ns (the
    scale scenario's one controller with many namespaces)."""
    rc, n, _t = run(tmp, kdir, INIT, INIT, extra=["--ctrls", "3", "--ns", "2", "--ns-of", "1:5"])
    with open(os.path.join(tmp, "starts.args")) as f:
        args = f.read()
    per = [args.count(f"bus=nvme{c},") for c in range(3)]
    if rc == 0 and n == 1 and per == [2, 5, 2]:
        return None
    return f"rc {rc}, QEMU started {n} times, namespaces per controller {per} (want [2, 5, 2])"


def retried_boot_starts_a_new_trace(tmp, kdir):
    """A boot booted again keeps only its own trace: the failed boot's firmware enabled
    each controller too, and a count from the trace's start took those in (seen: 71
    enables where a scenario made 68)."""
    trace = os.path.join(tmp, "boot.trace")
    if os.path.exists(trace):
        os.unlink(trace)
    rc, n, _t = run(tmp, kdir, KASAN + "|sleep 30|" + INIT, INIT,
                    extra=["--trace", "pci_nvme_mmio_start_success", "--trace-file", trace])
    try:
        with open(trace) as f:
            lines = len(f.read().splitlines())
    except FileNotFoundError:
        lines = 0
    if rc == 0 and n == 2 and lines == 1:
        return None
    return f"rc {rc}, QEMU started {n} times, {lines} trace lines (want 1)"


def known_warnings(tmp):
    """--known-warning FUNCTION lets the C driver's warning at FUNCTION through, and
    nothing else: the same warning with an rnvme frame, another warning, or a known one
    whose trace never ends fail the log check. Returns (name, why or None) per case."""
    warn = ("[    1.39] WARNING: block/blk-settings.c:392 at blk_validate_limits+0x62c/0x670, "
            "CPU#0: kworker/u8:4/68")
    trace = ["[    1.40] Call Trace:", "[    1.40]  nvme_update_ns_info_block+0xa32/0xb70 "
             "[nvme_core]"]
    end = "[    1.41] ---[ end trace 0000000000000000 ]---"
    cases = [
        ("known_c_warning_passes", [warn] + trace + [end], 0),
        ("known_warning_in_rnvme_fails",
         [warn, "[    1.40] Call Trace:", "[    1.40]  scan_namespaces+0x1/0x2 [rnvme]", end], 1),
        ("other_warning_fails",
         [warn.replace("blk_validate_limits", "blk_mq_unquiesce_tagset")] + trace + [end], 1),
        ("unended_known_warning_fails", [warn] + trace, 1),
        ("report_inside_known_warning_fails",
         [warn, trace[0], "[    1.40] BUG: KASAN: slab-use-after-free in foo+0x1/0x2",
          trace[1], end], 1),
        # The kernel disabling an interrupt line is named by its header, not only its trace.
        ("interrupt_line_disabled_fails",
         ['[    1.40] irq 10: nobody cared (try booting with the "irqpoll" option)'], 1),
    ]
    out = []
    for name, lines, want in cases:
        log = os.path.join(tmp, name + ".log")
        with open(log, "w") as f:
            f.write("\n".join(INIT.split("|") + lines) + "\n")
        rc = subprocess.run([os.path.join(ROOT, "qemu", "run"), "--check-log", log,
                             "--known-warning", "blk_validate_limits"],
                            capture_output=True).returncode
        ok = (rc == 0) if want == 0 else (rc != 0)
        out.append((name, None if ok else f"qemu/run --check-log exited {rc}"))
    return out


def main():
    kdir = sys.argv[1]
    checks = [
        # A report while booting: the guest is stopped at once (not after the 30 s the
        # stand-in would go on for), booted again, and the second boot's verdict counts.
        ("boot_report_stops_the_guest_and_boots_again", KASAN + "|sleep 30|" + INIT, INIT,
         lambda rc, n, t: rc == 0 and n == 2 and t < 25),
        # A report while booting, noticed only once the guest said it had booted: the test
        # has started, so it is not run again, and the report fails the run.
        ("report_seen_after_init_is_not_run_again", KASAN + "|" + INIT + "|sleep 1", INIT,
         lambda rc, n, t: rc == 3 and n == 1),
        # A clean boot runs once.
        ("clean_boot_runs_once", INIT, INIT, lambda rc, n, t: rc == 0 and n == 1),
        # A guest gone before /init without a report (QEMU exits on a triple fault) is
        # booted again; one gone after /init is not, and the run fails as unfinished.
        ("silent_death_while_booting_boots_again", "[    1.17] sched_clock: Marking stable|exit 0",
         INIT, lambda rc, n, t: rc == 0 and n == 2),
        ("silent_death_after_init_is_not_run_again", INIT + "|exit 0", INIT,
         lambda rc, n, t: rc == 5 and n == 1),
        # /init has started but waits for the kernel's clocksource swap: a kernel that
        # fails there has run nothing of the test and is booted again.
        ("oops_before_booted_line_boots_again", CLOCK_OOPS + "|exit 0", INIT,
         lambda rc, n, t: rc == 0 and n == 2),
        # A QEMU that fails before the kernel printed anything (bad arguments) is not.
        ("qemu_failing_before_the_kernel_is_not_run_again", "exit 1", INIT,
         lambda rc, n, t: rc == 4 and n == 1),
    ]
    with tempfile.TemporaryDirectory(prefix="rnvme-fakeqemu-") as tmp:
        fake = os.path.join(tmp, "qemu-system-x86_64")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, 0o755)
        for name, first, again, ok in checks:
            rc, n, took = run(tmp, kdir, first, again)
            if ok(rc, n, took):
                print(f"PASS {name}")
            else:
                print(f"FAIL {name}: qemu/run exited {rc} after {took:.1f} s, "
                      f"QEMU started {n} times")
        why = kasan_kernel_boots_4level(tmp, kdir)
        print("PASS kasan_kernel_boots_4level" if why is None
              else f"FAIL kasan_kernel_boots_4level: {why}")
        why = retried_boot_starts_a_new_trace(tmp, kdir)
        print("PASS retried_boot_starts_a_new_trace" if why is None
              else f"FAIL retried_boot_starts_a_new_trace: {why}")
        why = ns_of_sets_one_controllers_namespaces(tmp, kdir)
        print("PASS ns_of_sets_one_controllers_namespaces" if why is None
              else f"FAIL ns_of_sets_one_controllers_namespaces: {why}")
        why = one_vcpu_keeps_barriers(tmp, kdir)
        print("PASS one_vcpu_keeps_barriers" if why is None
              else f"FAIL one_vcpu_keeps_barriers: {why}")
        for name, why in known_warnings(tmp):
            print(f"PASS {name}" if why is None else f"FAIL {name}: {why}")


if __name__ == "__main__":
    main()
