#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make mutants`: plants realistic bugs in a copy of the driver, one at a time, and runs
the test scenarios that should catch each. A mutant that survives means a missing test.

    scripts/mutants.py [NAME...]      every mutant of scripts/mutants.toml, or those named

For each mutant: the working tree (tracked and new files, not out/ or .git) is copied to
$RNVME_CACHE/mutants/tree-K, the mutant's `from` text (which must occur exactly once in its
file) is replaced by its `to`, and that copy's scripts/test.sh runs the host unit tests and
the mutant's scenarios (RNVME_TEST_ONLY, on the flavour the scenario names). Every VM is
capped: a baseline's at RNVME_VM_TIMEOUT_CAP seconds (default 600), a mutant's at two and
a half times the longest of its scenarios in the baseline (at least 180 s, at most that
cap), so a bug that hangs the guest costs minutes, not the full cap twice. Logs:
out/mutants/<name>/. RNVME_MUTANTS_JOBS mutants (default 2) run at once, each in its own
copy, each copy's scenarios one at a time.

A kill must be evidence, not noise:
- the baseline: each set of scenarios runs once on the unmodified copy first (once per
  set, shared by the mutants that name it); only a test that passed there can kill;
- a test that passed in the baseline and fails (or goes missing) with the mutant kills it,
  except the `docs:` checks, which read the tree as text (a planted bug's text is gone);
  a failure of a test that already failed in the baseline counts for nothing;
- every kill is run again: the mutant is killed only if a test of the baseline's passes
  fails in both runs; otherwise it is a flaky kill, listed and not counted;
- a mutant that does not build, or does not apply, is an error, not a kill.

Prints every mutant's verdict, the survivors, flaky kills and errors, then `N mutants, K
killed` last; exits non-zero unless every mutant was killed. The tree itself is never
modified.

A full run takes hours, longer than a working session: it resumes. Each baseline and each
verdict is saved in scripts/mutants.state.json as it is reached, keyed by a hash of the
tree (every file the copy takes but the Markdown ones, which no build or scenario reads,
and the state itself); a run on the same tree takes the saved ones and runs only the rest,
and the total it prints is the time of every part. The state is a file of the tree, not of
out/, so that a run split across machines resumes once it is committed. A changed tree
starts afresh, as does RNVME_MUTANTS_FRESH=1.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import threading
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("RNVME_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rnvme")


MAX_CAP = int(os.environ.get("RNVME_VM_TIMEOUT_CAP", "600"))

# Tests every scenario has, which fail whatever went wrong (a hang, an Oops): a kill is named
# after a test of the scenario itself when one failed too.
GENERIC = ("guest exited 0, kernel log clean", "every result the guest counted was received")


def durations(logs):
    """{scenario: seconds} from a run's log directory."""
    d = {}
    try:
        with open(os.path.join(logs, "durations")) as f:
            for line in f:
                s, _, name = line.strip().partition(" ")
                if s.isdigit():
                    d[name] = int(s)
    except OSError:
        pass
    return d


def mutant_cap(m, base):
    """A mutant's VM cap: two and a half times its slowest scenario in the baseline, within
    limits (a scenario's time moves by far less than that from run to run)."""
    longest = max((base.get("durations", {}).get(s, MAX_CAP) for s in m["scenarios"]))
    return min(MAX_CAP, max(180, 5 * longest // 2))


def killer_name(both):
    """The test a kill is named after: the first of the scenario's own that failed, else a
    generic one, else one that went missing (a test the run never reached says where the
    guest stopped, not what went wrong)."""
    def rank(n):
        if both[n].startswith("missing"):
            return 2
        return 1 if n.split(": ", 1)[-1] in GENERIC else 0
    return min(both, key=lambda n: (rank(n), n))


STATE = os.path.join("scripts", "mutants.state.json")


def tree_files():
    """The working tree's files as it is (committed or not), without build products or the
    saved state."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    return sorted(f.decode() for f in files
                  if f and f.decode() != STATE and os.path.exists(os.path.join(ROOT, f.decode())))


def tree_hash():
    """What the saved verdicts are valid for: every file but the Markdown ones."""
    h = hashlib.sha256()
    for f in tree_files():
        if f.endswith(".md"):
            continue
        h.update(f.encode() + b"\0")
        with open(os.path.join(ROOT, f), "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def load_state(path, tree):
    """The baselines and verdicts saved for this tree, or none."""
    if os.environ.get("RNVME_MUTANTS_FRESH"):
        return {}, {}
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return {}, {}
    if s.get("tree") != tree:
        return {}, {}
    return s.get("baselines", {}), s.get("verdicts", {})


def save_state(path, tree, baselines, verdicts):
    with open(path + ".tmp", "w") as f:
        json.dump({"tree": tree, "baselines": baselines, "verdicts": verdicts}, f, indent=1)
    os.replace(path + ".tmp", path)


def copy_tree(dst):
    """The working tree as it is (committed or not), without build products."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    for f in tree_files():
        os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(dst, f))


def apply(tree, m):
    path = os.path.join(tree, m["file"])
    with open(path) as f:
        text = f.read()
    n = text.count(m["from"])
    if n != 1:
        return f"its `from` text occurs {n} times in {m['file']} (want exactly once)"
    with open(path, "w") as f:
        f.write(text.replace(m["from"], m["to"]))
    return None


def run(m, tree, logs, cap=None):
    flavours = sorted({s.rsplit("-", 1)[1] for s in m["scenarios"]})
    env = dict(os.environ,
               RNVME_TEST_FLAVOURS=" ".join(flavours),
               RNVME_TEST_ONLY="^(" + "|".join(map(re.escape, m["scenarios"])) + ")$",
               RNVME_TEST_LOGS=logs,
               RNVME_VM_TIMEOUT_CAP=str(cap or MAX_CAP),
               RNVME_TEST_JOBS="1")
    env.pop("RNVME_CI", None)
    os.makedirs(logs, exist_ok=True)
    with open(os.path.join(logs, "..", os.path.basename(logs) + ".out"), "w") as out:
        p = subprocess.run(["bash", os.path.join(tree, "scripts", "test.sh")], cwd=tree,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        out.write(p.stdout)
    return p.returncode, p.stdout


def results(out):
    """The tests a run of scripts/test.sh passed, and those it failed (a test the manifest
    lists that the run never reported is failed), as {"scenario: test": why}."""
    passed, failed = set(), {}
    for line in out.splitlines():
        if line.startswith("PASS  "):
            passed.add(line[6:])
        elif line.startswith("FAIL  "):
            rest = line[6:]
            if rest.startswith("manifest: "):
                rest = rest[len("manifest: "):]
            parts = rest.split(": ", 2)
            name = ": ".join(parts[:2])
            failed[name] = parts[2] if len(parts) > 2 else ""
    return passed - set(failed), failed


def killers(baseline, out):
    """The tests that passed in the baseline and failed in this run: {name: why}. The docs
    checks read the tree as text (one of them fails whenever a planted bug's text is gone):
    they see the change, not what it does, so they never kill."""
    _, failed = results(out)
    return {n: why for n, why in failed.items() if n in baseline and not n.startswith("docs: ")}


JOBS = os.environ.get("RNVME_MUTANTS_JOBS", "2")


class Runner:
    """Mutants run `jobs` at a time, each in a tree copy of its own
    ($RNVME_CACHE/mutants/tree-K) whose scripts/test.sh runs one VM at a time: a VM under
    TCG keeps about one of the host's CPUs busy. A baseline is run once, by the first mutant
    that needs it; the others that name the same scenarios wait for it."""

    def __init__(self, state, thash, baselines, verdicts, out_dir, total):
        self.state, self.thash = state, thash
        self.baselines, self.verdicts = baselines, verdicts
        self.out_dir, self.total = out_dir, total
        self.lock = threading.Lock()
        self.pending = {}  # baseline key -> Event, set once the baseline is saved

    def say(self, text):
        with self.lock:
            print(text, flush=True)

    def save(self):
        with self.lock:
            save_state(self.state, self.thash, self.baselines, self.verdicts)

    def baseline(self, m, tree):
        """The tests the mutant's scenarios passed unmodified (run now unless saved)."""
        key = "+".join(sorted(m["scenarios"]))
        with self.lock:
            mine = key not in self.baselines and key not in self.pending
            if mine:
                self.pending[key] = threading.Event()
            ev = self.pending.get(key)
        if mine:
            try:
                t0 = time.monotonic()
                copy_tree(tree)
                logs = os.path.join(self.out_dir, "baseline-" + key)
                _, out = run(m, tree, logs)
                passed, failed = results(out)
                with self.lock:
                    self.baselines[key] = {"passed": sorted(passed),
                                           "durations": durations(logs),
                                           "seconds": round(time.monotonic() - t0)}
                self.save()
                note = f", {len(failed)} failed there (they cannot kill)" if failed else ""
                self.say(f"  baseline {', '.join(sorted(m['scenarios']))}: {len(passed)} "
                         f"tests passed{note}")
            finally:
                # A waiter finds no baseline if this failed, and fails too.
                ev.set()
        elif ev is not None:
            ev.wait()
        return self.baselines[key]

    def mutant(self, i, m, tree):
        self.say(f"[{i}/{self.total}] {m['name']}: {m['what']}")
        base = self.baseline(m, tree)
        t0 = time.monotonic()
        baseline = set(base["passed"])
        cap = mutant_cap(m, base)
        copy_tree(tree)
        err = apply(tree, m)
        if err:
            kind, verdict = "error", f"ERROR: does not apply: {err}"
        elif not baseline:
            kind, verdict = "error", "ERROR: nothing passed in the baseline (see its log)"
        else:
            rc, out = run(m, tree, os.path.join(self.out_dir, m["name"]), cap)
            fails = [line[6:] for line in out.splitlines() if line.startswith("FAIL  ")]
            first = killers(baseline, out)
            if any(f.startswith("build-") for f in fails):
                kind, verdict = "error", "ERROR: the mutant does not build (see its log)"
            elif first:
                # Again, to tell a kill from a flaky test.
                _, out2 = run(m, tree, os.path.join(self.out_dir, m["name"] + "-again"), cap)
                both = {n: w for n, w in killers(baseline, out2).items() if n in first}
                if both:
                    name = killer_name(both)
                    kind, verdict = "killed", f"killed by {name}: {both[name][:140]}"
                    if len(both) > 1:
                        verdict += f" (and {len(both) - 1} more, in both runs)"
                else:
                    kind = "flaky"
                    verdict = ("FLAKY: the tests that failed once passed again: "
                               + ", ".join(sorted(first))[:200])
            elif rc != 0 and not fails:
                kind, verdict = "error", f"ERROR: test.sh exited {rc} without a FAIL line"
            else:
                kind, verdict = "survived", "SURVIVED: no test of the baseline's passes failed"
        with self.lock:
            self.verdicts[m["name"]] = {"kind": kind, "verdict": verdict,
                                        "scenarios": m["scenarios"],
                                        "seconds": round(time.monotonic() - t0)}
        self.save()
        self.say(line_of(m["name"], self.verdicts[m["name"]]))

    def work(self, k, queue):
        tree = os.path.join(CACHE, "mutants", f"tree-{k}")
        while True:
            with self.lock:
                if not queue:
                    break
                i, m = queue.pop(0)
            self.mutant(i, m, tree)
        shutil.rmtree(tree, ignore_errors=True)


def main():
    with open(os.path.join(ROOT, "scripts", "mutants.toml"), "rb") as f:
        mutants = tomllib.load(f)["mutant"]
    names = [m["name"] for m in mutants]
    if len(set(names)) != len(names):
        sys.exit("mutants.toml: duplicate names")
    if not re.fullmatch(r"[1-9][0-9]*", JOBS):
        sys.exit(f"RNVME_MUTANTS_JOBS must be a positive number, not '{JOBS}'")
    want = sys.argv[1:]
    for w in want:
        if w not in names:
            sys.exit(f"no mutant named {w}: {' '.join(names)}")
    todo = [m for m in mutants if not want or m["name"] in want]
    out_dir = os.path.join(ROOT, "out", "mutants")
    os.makedirs(out_dir, exist_ok=True)
    state = os.path.join(ROOT, STATE)
    thash = tree_hash()
    # Saved baselines: {"scenario+scenario": {"passed": [...], "seconds": s}}; verdicts:
    # {name: {"kind": killed|survived|flaky|error, "verdict": str, "scenarios": [...],
    # "seconds": s}}.
    baselines, verdicts = load_state(state, thash)
    resumed = sum(1 for m in todo if m["name"] in verdicts)
    if resumed:
        print(f"resuming: {resumed} of {len(todo)} verdicts saved for this tree "
              f"({state})", flush=True)
    queue = [(i, m) for i, m in enumerate(todo, 1) if m["name"] not in verdicts]
    r = Runner(state, thash, baselines, verdicts, out_dir, len(todo))
    t0 = time.monotonic()
    workers = [threading.Thread(target=r.work, args=(k, queue))
               for k in range(min(int(JOBS), max(len(queue), 1)))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    missing = [m["name"] for m in todo if m["name"] not in verdicts]
    if missing:
        sys.exit(f"no verdict for: {' '.join(missing)} (a worker failed; see above)")
    print()
    print("\n".join(line_of(m["name"], verdicts[m["name"]]) for m in todo))
    for what, kind in (("survivors", "survived"), ("flaky kills", "flaky"),
                       ("errors", "error")):
        lst = [m["name"] for m in todo if verdicts[m["name"]]["kind"] == kind]
        if lst:
            print(f"{what}: {' '.join(lst)}")
    keys = {"+".join(sorted(m["scenarios"])) for m in todo}
    total = (sum(verdicts[m["name"]]["seconds"] for m in todo)
             + sum(baselines[k]["seconds"] for k in keys if k in baselines))
    print(f"{len(keys)} baselines, {total / 60:.0f} min of runs"
          + (f" (in parts: {resumed} verdicts from earlier runs)" if resumed else "")
          + f"; this run took {(time.monotonic() - t0) / 60:.0f} min with {JOBS} at a time")
    killed = sum(1 for m in todo if verdicts[m["name"]]["kind"] == "killed")
    print(f"{len(todo)} mutants, {killed} killed")
    return 0 if killed == len(todo) else 1


def line_of(name, v):
    return f"  {name}: {v['verdict']} [{', '.join(v['scenarios'])}, {v['seconds']} s]"


if __name__ == "__main__":
    sys.exit(main())
