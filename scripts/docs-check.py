#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What the docs say that the code can contradict, checked against the code.

    scripts/docs-check.py

Prints `PASS check` or `FAIL check: why` for each check (scripts/test.sh reports them as
`docs: check`) and exits 1 if any failed:

- ARCHITECTURE.md's count of unsafe code outside src/kernel_ext ("Outside `kernel_ext`
  there are N `unsafe` blocks and M `unsafe fn`") is the code's: `unsafe {` blocks and
  `unsafe fn` (and `unsafe impl`, which the sentence must then name too) in rnvme.rs and
  src/ less src/kernel_ext/, comments and strings left out;
- every Rust item ARCHITECTURE.md names in backquotes as a path (`Shared::reset`), a call
  (`admin.close()`) or a macro (`try_pin_init!`) exists in the code: its last segment,
  and every segment naming a type (capitalised), occur as words in rnvme.rs or src/,
  comments left out (paths into the `kernel` crate or `core` are not checked);
- the numbers a script can compute: every "N tests in all" in README.md and docs/ is the
  manifest's total (scripts/test.manifest); every "N planted bugs" or "N mutants" is the
  number of mutants in scripts/mutants.toml, and docs/testing.md's mutant table
  (between `<!-- mutants-begin -->` and `<!-- mutants-end -->`) lists exactly those
  mutants, in that order, with their scenarios;
- README.md's module parameter table has a row for every parameter src/core/params.rs
  declares (and none other), with the declared default.
"""

import glob
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

NUMBER_WORDS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def strip_rust(text, keep_strings=False):
    """Rust source without comments (and, unless keep_strings, without the contents of
    string literals), line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 8])
                          and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            if c == "r":
                m = re.match(r'r(#*)"', text[i:])
                end = '"' + m.group(1)
                j = text.find(end, i + m.end())
                j = n if j < 0 else j + len(end)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            body = text[i:j]
            out.append(body if keep_strings else '""' + "\n" * body.count("\n"))
            i = j
        elif c == "'" and (text[i + 1:i + 2] == "\\" or text[i + 2:i + 3] == "'"):
            # A char literal (not a lifetime).
            j = text.find("'", i + 2 if text[i + 1] != "\\" else i + 3)
            out.append("' '")
            i = n if j < 0 else j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_files():
    files = [os.path.join(ROOT, "rnvme.rs")]
    files += sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.rs"), recursive=True))
    return files


def number(word):
    word = word.lower()
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)


def check_unsafe_count():
    """ARCHITECTURE.md's count of unsafe code outside src/kernel_ext."""
    blocks = fns = impls = 0
    where = []
    ext = os.path.join(ROOT, "src", "kernel_ext") + os.sep
    for path in rust_files():
        if path.startswith(ext):
            continue
        with open(path, encoding="utf-8") as f:
            code = strip_rust(f.read())
        b = len(re.findall(r"\bunsafe\s*\{", code))
        fn = len(re.findall(r'\bunsafe\s+(?:extern\s+""\s+)?fn\b', code))
        im = len(re.findall(r"\bunsafe\s+impl\b", code))
        if b or fn or im:
            where.append(f"{os.path.relpath(path, ROOT)} {b}/{fn}/{im}")
        blocks, fns, impls = blocks + b, fns + fn, impls + im
    text = " ".join(read("ARCHITECTURE.md").split())
    m = re.search(r"Outside `kernel_ext` there (?:are|is) (\w+) `unsafe` blocks?"
                  r"(?:, (\w+) `unsafe impl`s?)? and (\w+) `unsafe fn`s?", text)
    if not m:
        return ["ARCHITECTURE.md no longer says \"Outside `kernel_ext` there are N `unsafe` "
                "blocks and M `unsafe fn`\": the count cannot be checked"]
    said = (number(m.group(1)), number(m.group(2) or "zero"), number(m.group(3)))
    code = (blocks, impls, fns)
    if said != code:
        return [f"ARCHITECTURE.md says {said[0]} unsafe blocks, {said[1]} unsafe impl, "
                f"{said[2]} unsafe fn outside kernel_ext; the code has {blocks}, {impls}, "
                f"{fns} (blocks/fn/impl per file: {'; '.join(where)})"]
    return []


def markdown_code_spans(text):
    """The inline code spans of a Markdown text, fenced blocks left out."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", text)


EXTERNAL = {"kernel", "core", "alloc", "std", "bindings"}


def check_architecture_names():
    """Every Rust item ARCHITECTURE.md names exists in the code."""
    words = set()
    for path in rust_files():
        with open(path, encoding="utf-8") as f:
            words.update(re.findall(r"[A-Za-z_]\w*", strip_rust(f.read(), keep_strings=True)))
    names = []
    for span in markdown_code_spans(read("ARCHITECTURE.md")):
        span = span.strip()
        if re.fullmatch(r"[A-Za-z_][\w.]*(?:::[A-Za-z_]\w*)*(?:\(\)|!)?", span):
            if "::" in span or span.endswith(("()", "!")):
                names.append(span)
        else:
            names += re.findall(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+", span)
    missing = []
    for name in dict.fromkeys(names):
        segs = re.split(r"::|\.", name.rstrip("()!"))
        if segs[0] in EXTERNAL:
            continue
        want = [segs[-1]] + [s for s in segs[:-1] if s[:1].isupper()]
        absent = [s for s in want if s not in words]
        if absent:
            missing.append(f"`{name}` ({', '.join(absent)} not in rnvme.rs or src/)")
    return [f"{len(missing)} name(s) not in the code: " + "; ".join(missing)] if missing else []


def manifest_total():
    sys.dont_write_bytecode = True  # no __pycache__ left in scripts/
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import manifest
    return len(manifest.load(os.path.join(ROOT, "scripts", "test.manifest")))


def check_test_counts():
    """Every "N tests in all" in the docs is the manifest's total."""
    total = manifest_total()
    bad, found = [], 0
    for doc in DOCS:
        for m in re.finditer(r"(\d[\d,]*) tests in all", read(doc)):
            found += 1
            if int(m.group(1).replace(",", "")) != total:
                bad.append(f"{doc} says {m.group(0)}; scripts/test.manifest lists {total}")
    if not found:
        bad.append('no "N tests in all" in README.md or docs/ (the scenario table has one)')
    return bad


def check_mutants():
    """Mutant counts and docs/testing.md's mutant table against scripts/mutants.toml."""
    with open(os.path.join(ROOT, "scripts", "mutants.toml"), "rb") as f:
        mutants = tomllib.load(f)["mutant"]
    total = len(mutants)
    bad = []
    for doc in DOCS:
        for m in re.finditer(r"(\d+) (?:planted bugs|mutants)\b", read(doc)):
            if int(m.group(1)) != total:
                bad.append(f"{doc} says {m.group(0)}; scripts/mutants.toml has {total}")
    doc = "docs/testing.md"
    if not os.path.exists(os.path.join(ROOT, doc)):
        return bad + [f"no {doc}"]
    block = re.search(r"<!-- mutants-begin -->(.*?)<!-- mutants-end -->", read(doc), re.S)
    if not block:
        return bad + [f"{doc} has no <!-- mutants-begin --> ... <!-- mutants-end --> table"]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block.group(1).splitlines() if line.startswith("| `")]
    listed = [(r[0].strip("`"), r[2] if len(r) > 2 else "") for r in rows]
    want = [(m["name"], ", ".join(m["scenarios"])) for m in mutants]
    if [n for n, _ in listed] != [n for n, _ in want]:
        extra = sorted({n for n, _ in listed} - {n for n, _ in want})
        gone = sorted({n for n, _ in want} - {n for n, _ in listed})
        why = f"{doc}'s mutant table lists {len(listed)} mutants, mutants.toml has {total}"
        if extra:
            why += "; not in mutants.toml: " + " ".join(extra)
        if gone:
            why += "; not in the table: " + " ".join(gone)
        if not extra and not gone:
            why += "; the order differs"
        bad.append(why)
    else:
        for (name, scen), (_, want_scen) in zip(listed, want):
            if scen != want_scen:
                bad.append(f"{doc}: `{name}` runs in {want_scen}, the table says {scen}")
    return bad


def check_mutants_apply():
    """Every planted bug's `from` occurs exactly once in its file: one that no longer applies
    would be reported by `make mutants` as an error, not planted, and tests nothing."""
    with open(os.path.join(ROOT, "scripts", "mutants.toml"), "rb") as f:
        mutants = tomllib.load(f)["mutant"]
    bad = []
    for m in mutants:
        path = os.path.join(ROOT, m["file"])
        if not os.path.exists(path):
            bad.append(f"{m['name']}: no {m['file']}")
            continue
        n = read(m["file"]).count(m["from"])
        if n != 1:
            bad.append(f"{m['name']}: its text occurs {n} times in {m['file']}")
    return bad


def parameter_table():
    """README.md's parameter table (the one whose header starts `| parameter |`):
    {name: default}."""
    rows, inside = {}, False
    for line in read("README.md").splitlines():
        if line.startswith("| parameter |"):
            inside = True
        elif inside and not line.startswith("|"):
            break
        elif inside:
            m = re.match(r"\| `(\w+)` \| ([^|]*) \|", line)
            if m:
                rows[m.group(1)] = m.group(2).strip()
    return rows


def check_parameters():
    """README.md's parameter table against the declared parameters and defaults."""
    declared = {}
    src = strip_rust(read("src/core/params.rs"), keep_strings=True)
    for m in re.finditer(r"module_param_(?:uint|bool)!\(\s*(\w+),\s*([^,]+),", src):
        declared[m.group(1)] = m.group(2).strip()
    for m in re.finditer(r"module_param_choice!\(\s*(\w+),\s*\[\s*\"([^\"]*)\"", src):
        declared[m.group(1)] = m.group(2)
    for m in re.finditer(r"module_param_string!\(\s*(\w+),", src):
        declared[m.group(1)] = None
    if len(declared) < 2:
        return ["found no module parameters in src/core/params.rs"]
    rows = parameter_table()
    if not rows:
        return ["README.md has no `| parameter |` table"]
    bad = []
    for name, default in declared.items():
        if name not in rows:
            bad.append(f"`{name}` has no row in README.md's parameter table")
        elif default is not None and rows[name] != default:
            bad.append(f"README.md gives `{name}` the default {rows[name]}, the code {default}")
    for name in rows:
        if name not in declared:
            bad.append(f"README.md's parameter table has `{name}`, which the code does not declare")
    return bad


CHECKS = [
    ("ARCHITECTURE.md's unsafe count outside kernel_ext is the code's", check_unsafe_count),
    ("every Rust item ARCHITECTURE.md names exists in the code", check_architecture_names),
    ("test counts in README.md and docs are the manifest's", check_test_counts),
    ("mutant counts and the mutant table are scripts/mutants.toml's", check_mutants),
    ("every planted bug of scripts/mutants.toml applies to the tree once", check_mutants_apply),
    ("module parameters in README.md are the code's, with their defaults",
     check_parameters),
]


def main():
    failed = 0
    for name, check in CHECKS:
        try:
            problems = check()
        except Exception as e:  # a check that cannot run is a failure, not a pass
            problems = [f"the check itself failed: {type(e).__name__}: {e}"]
        if problems:
            failed += 1
            print(f"FAIL {name}: {' | '.join(problems)}")
        else:
            print(f"PASS {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
