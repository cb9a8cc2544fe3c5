#!/usr/bin/env python3
"""The table of bench/gemm/gemm_bf16_vs_pytorch.sh: gemm_bf16_table.py JSONL "CPU" "NOTE" -> markdown.

Per shape the median GFLOP/s over the rounds of hddp's gemm_bf16 with bf16 inputs and with float
inputs, and of PyTorch's bf16 matmul (oneDNN), one thread; then the goals, each met or short:
hddp with bf16 inputs >= 1.0x PyTorch on every shape, and at 2048^3 >= 60 % of the AMX probe
(bench_peak's amx-bf16 row, median over the same rounds).
"""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cpu, note = sys.argv[2], sys.argv[3]


def med(impl, inp, shape):
    v = [r["gflops"] for r in rows if r["impl"] == impl and r["input"] == inp and (r["op"], r["M"], r["N"], r["K"]) == shape]
    return statistics.median(v) if v else None


shapes = sorted({(r["op"], r["M"], r["N"], r["K"]) for r in rows if r["impl"] == "pytorch"}, key=lambda s: (s[0], -s[1] * s[2] * s[3]))
probe = statistics.median([r["gflops"] for r in rows if r["impl"] == "probe"] or [0])
print(f"CPU: {cpu}. {note}. One thread, GFLOP/s, median over the rounds; AMX probe {probe:.0f} GFLOP/s.\n")
print("| op | M x N x K | hddp, bf16 inputs | hddp, float inputs | PyTorch bf16 (oneDNN) | hddp (bf16 in) / PyTorch | hddp (float in) / PyTorch |")
print("|---|---|---|---|---|---|---|")
short = []
for s in shapes:
    b, h, p = med("hddp", "bf16", s), med("hddp", "float", s), med("pytorch", "bf16", s)
    rb = b / p if b and p else None
    rh = h / p if h and p else None
    if rb is not None and rb < 1.0:
        short.append(f"{s[1]}x{s[2]}x{s[3]}")
    f = lambda x: f"{x:.0f}" if x else "-"
    print(f"| {s[0]} | {s[1]} x {s[2]} x {s[3]} | {f(b)} | {f(h)} | {f(p)} | {rb:.2f}x | {rh:.2f}x |" if rb and rh else
          f"| {s[0]} | {s[1]} x {s[2]} x {s[3]} | {f(b)} | {f(h)} | {f(p)} | - | - |")
print()
print(f"- hddp (bf16 inputs) >= 1.0x PyTorch on every shape: {'met' if not short else 'short at ' + ', '.join(short)}")
big = med("hddp", "bf16", ("NN", 2048, 2048, 2048))
if big and probe:
    print(f"- 2048^3 at {100 * big / probe:.0f} % of the AMX probe: {'met' if big >= 0.6 * probe else 'short'} (goal 60 %)")
