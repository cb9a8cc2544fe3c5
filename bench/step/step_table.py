#!/usr/bin/env python3
"""The table and the goals of bench/step_vs_pytorch.sh from its raw CSV (one row per run).
Usage: step_table.py CSV "CPU" BATCH REPS "NOTE" [PRECISION]   -> markdown on stdout
Goals, each printed as met or short with the measured value:
  the step >= 2x PyTorch at W = 256, >= 1.5x at W >= 1024 (1 and 2 ranks of 1 thread);
  at W >= 1024 the time outside GEMM <= 10 % of the step and the step <= 1.15x its GEMM limit;
  1 rank x 2 threads >= 1.8x faster than 1 x 1 at W >= 1024.
PRECISION bf16 (hddp --precision bf16 against PyTorch's bf16 autocast): the step >= 2x PyTorch's
at every layout; the GEMM limit is the float one, shown but not a goal.
"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
cpu, batch, reps, note = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
bf16 = len(sys.argv) > 6 and sys.argv[6] == "bf16"
med = {}
for key in {(int(r["width"]), int(r["ranks"]), int(r["threads"]), r["impl"]) for r in rows}:
    med[key] = statistics.median(float(r["step_s"]) for r in rows
                                 if (int(r["width"]), int(r["ranks"]), int(r["threads"]), r["impl"]) == key)
configs = sorted({k[:3] for k in med})

print(f"CPU: {cpu}; batch {batch} per rank; median of {reps} interleaved rounds.")
print(f"{note}\n")
print("| W | ranks x threads | hddp us/step | PyTorch us/step | hddp faster by | GEMM-bound limit us | step / limit | outside GEMM |")
print("|---|---|---|---|---|---|---|---|")
for w, p, t in configs:
    h, pt, lim = med[(w, p, t, "hddp")], med[(w, p, t, "pytorch")], med[(w, p, t, "gemm_limit")]
    print(f"| {w} | {p} x {t} | {h*1e6:,.0f} | {pt*1e6:,.0f} | {pt/h:.2f}x | {lim*1e6:,.0f} | {h/lim:.2f} | "
          f"{100*(1-lim/h):.0f} % |")

print("\nGoals:\n")
goals = []
for w, p, t in configs:
    h, pt, lim = med[(w, p, t, "hddp")], med[(w, p, t, "pytorch")], med[(w, p, t, "gemm_limit")]
    if bf16:
        goals.append((f"W={w}, {p} x {t}: bf16 step vs PyTorch's bf16 autocast >= 2x", pt / h, pt / h >= 2.0, "x"))
        continue
    if t == 1:
        want = 2.0 if w < 1024 else 1.5
        goals.append((f"W={w}, {p} x {t}: step vs PyTorch >= {want}x", pt / h, pt / h >= want, "x"))
    if w >= 1024:
        goals.append((f"W={w}, {p} x {t}: step / GEMM limit <= 1.15", h / lim, h / lim <= 1.15, ""))
        goals.append((f"W={w}, {p} x {t}: outside GEMM <= 10 %", 100 * (1 - lim / h), 1 - lim / h <= 0.10, " %"))
    if w >= 1024 and (p, t) == (1, 2) and (w, 1, 1, "hddp") in med:
        s = med[(w, 1, 1, "hddp")] / h
        goals.append((f"W={w}: 1 x 2 threads vs 1 x 1 >= 1.8x", s, s >= 1.8, "x"))
for text, value, ok, unit in goals:
    print(f"- {text}: {value:.2f}{unit} - {'met' if ok else 'SHORT'}")
