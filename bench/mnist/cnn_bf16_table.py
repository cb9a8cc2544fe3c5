#!/usr/bin/env python3
"""The table of bench/mnist/cnn_bf16.sh: cnn_bf16_table.py CSV "CPU" "NOTE" -> markdown.

Per layout and implementation/precision: seconds per epoch (each run's mean over its epochs, then
the median over the rounds) and the test accuracy after the last epoch (the mean over the
rounds, i.e. over seeds). Then the ratios with their goals, each printed met or short:
hddp bf16 never slower than hddp float (>= 1.0x); hddp bf16 >= 2x PyTorch's bf16 autocast where
the CPU has AMX (1.5x with AVX512_BF16 alone, 1x without either); hddp float >= 2.5x PyTorch
float; and where 1x1 and 1x2 were both run, hddp at 2 threads >= 1.9x one thread.
"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
cpu, note = sys.argv[2], sys.argv[3]
layouts = sorted({(int(r["ranks"]), int(r["threads"])) for r in rows}, key=lambda l: (l[0] * l[1], -l[0]))
units = sorted({r["bf16_unit"] for r in rows if r["impl"] == "hddp" and r["precision"] == "bf16"})
bf16_goal = 2.0 if "amx" in units else 1.5 if "avx512bf16" in units else 1.0


def per_epoch(layout, impl, prec):
    runs = {}
    for r in rows:
        if (int(r["ranks"]), int(r["threads"])) == layout and r["impl"] == impl and r["precision"] == prec:
            runs.setdefault(r["rep"], []).append(r)
    if not runs:
        return None, None
    secs = [statistics.mean(float(e["train_s"]) for e in v) for v in runs.values()]
    acc = [float(max(v, key=lambda e: int(e["epoch"]))["test_accuracy"]) for v in runs.values()]
    return statistics.median(secs), statistics.mean(acc)


def verdict(x, goal):
    return f"{x:.2f}x ({'met' if x >= goal else 'short'}, goal {goal:g}x)"


print(f"CPU: {cpu}; hddp's bf16 unit: {', '.join(units) or '-'}. {note}\n")
print("| ranks x threads | hddp float s/epoch | hddp bf16 | PyTorch float | PyTorch bf16 autocast | "
      "hddp bf16 / float | vs PyTorch bf16 | hddp float vs PyTorch float | accuracy hddp float / bf16 / PyTorch float / bf16 |")
print("|---|---|---|---|---|---|---|---|---|")
t = {}
for l in layouts:
    hf, af = per_epoch(l, "hddp", "float")
    hb, ab = per_epoch(l, "hddp", "bf16")
    pf, apf = per_epoch(l, "pytorch", "float")
    pb, apb = per_epoch(l, "pytorch", "bf16")
    t[l] = (hf, hb)
    cells = [f"{l[0]} x {l[1]}"] + [f"{x:.2f}" if x else "-" for x in (hf, hb, pf, pb)]
    cells.append(verdict(hf / hb, 1.0) if hf and hb else "-")
    cells.append(verdict(pb / hb, bf16_goal) if pb and hb else "-")
    cells.append(verdict(pf / hf, 2.5) if pf and hf else "-")
    cells.append(" / ".join(f"{100 * a:.2f} %" if a is not None else "-" for a in (af, ab, apf, apb)))
    print("| " + " | ".join(cells) + " |")
if (1, 1) in t and (1, 2) in t:
    print()
    for i, prec in enumerate(("float", "bf16")):
        one, two = t[(1, 1)][i], t[(1, 2)][i]
        if one and two:
            print(f"- hddp {prec}, one rank, 2 threads against 1: {verdict(one / two, 1.9)}")
