#!/usr/bin/env python3
"""The guide and the README against the tree: every path they name exists, every file a layout
row names is in its folder, and the programs the guide promises stay in their line budgets
(examples/cnn_classifier.cpp at most 120 lines; drivers/mnist_train/main.cpp at most 250, no
function over 80). Usage: check_docs.py <source dir>."""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
folders = "kernels|core|data|distributed|train|drivers|examples|bench|tests|slurm|scripts|cmake|tune|docs"
path_re = re.compile(r"(?<![\w/.-])((?:%s)/[\w./-]*\w)" % folders)
errors = []

for doc in ["README.md", "docs/library.md"]:
    text = (root / doc).read_text()
    for m in path_re.finditer(text):
        p = m.group(1)
        if "*" in p or "<" in p:
            continue
        if not (root / p).exists() and not (root / "docs" / p).exists():
            errors.append(f"{doc}: names '{p}', which does not exist")
    # Layout rows: "| `folder/` | ... `name.h` ..." -> each bare file name is somewhere in folder.
    for row in re.finditer(r"^\| `(\w+)/` \|(.*)\|\s*$", text, re.M):
        folder, cells = root / row.group(1), row.group(2)
        for name in re.findall(r"`([\w-]+\.(?:h|cpp|py|sh|gp|md|sbatch|def))`", cells):
            if not any(folder.rglob(name)):
                errors.append(f"{doc}: the {row.group(1)}/ row names '{name}', not found under {row.group(1)}/")
    # Headers named as <hddp/x/y.h>.
    for m in re.finditer(r"<hddp/(\w+)/([\w.]+\.h)>", text):
        if not (root / m.group(1) / m.group(2)).exists():
            errors.append(f"{doc}: includes <hddp/{m.group(1)}/{m.group(2)}>, which does not exist")


def functions(lines):
    """(name, first line, length) of each function defined at column 0 or one indent of a namespace."""
    out, start, name = [], None, None
    for i, line in enumerate(lines):
        if start is None and re.match(r"^[A-Za-z].*\)\s*(const\s*)?\{\s*$", line) and not line.startswith(("namespace", "struct", "class", "enum")):
            start, name = i, line.split("(")[0].split()[-1]
        elif start is not None and line.startswith("}"):
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def budget(path, max_lines, max_function=None):
    lines = (root / path).read_text().splitlines()
    if len(lines) > max_lines:
        errors.append(f"{path}: {len(lines)} lines, the budget is {max_lines}")
    if max_function:
        for name, at, n in functions(lines):
            if n > max_function:
                errors.append(f"{path}:{at}: {name}() is {n} lines, the budget is {max_function}")


budget("examples/cnn_classifier.cpp", 120)
budget("drivers/mnist_train/main.cpp", 250, 80)

for e in errors:
    print("FAIL:", e)
if not errors:
    print("docs: every path README.md and docs/library.md name exists; the programs fit their budgets")
sys.exit(1 if errors else 0)
