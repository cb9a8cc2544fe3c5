#!/usr/bin/env python3
"""bench/at_scale's small numeric helpers and its markdown tables (bench/RESULTS.md "At scale").

  tables.py fit PINGPONG.csv        alpha (s) and bandwidth (B/s) of t = alpha + bytes / bw,
                                    least squares on relative error (as fit_alpha_beta)
  tables.py validation DIR          the 2-rank validation: calibration, replay vs bench_allreduce
  tables.py summary OUT             replay per model and P, the in-simulator check, Horovod
"""
import csv
import glob
import json
import os
import statistics
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def fit(path):
    pts = [(float(r["bytes"]), float(r["seconds"])) for r in rows(path)]
    # Weighted least squares with weights 1/t^2 (relative error), a = alpha, b = 1/bw.
    sw = swb = swbb = swt = swbt = 0.0
    for b, t in pts:
        w = 1.0 / (t * t)
        sw, swb, swbb, swt, swbt = sw + w, swb + w * b, swbb + w * b * b, swt + w * t, swbt + w * b * t
    det = sw * swbb - swb * swb
    a, beta = (swt * swbb - swb * swbt) / det, (sw * swbt - swb * swt) / det
    if a < 0 or beta <= 0:
        a, beta = max(a, 0.0), max(swbt / swbb, 1e-15)
    return a, 1.0 / beta


def bench_steps(d):
    """Per mode, the median over runs of bench_allreduce's median step (ms)."""
    per = {}
    for f in sorted(glob.glob(os.path.join(d, "bench-*.json"))):
        for b in json.load(open(f))["benchmarks"]:
            if b.get("run_type") == "aggregate":
                continue
            for k, v in b.items():
                if k.endswith("_ms") and not k.endswith(("_comm_ms", "_exposed_ms")):
                    per.setdefault(k[:-3], []).append(v)
    return {k: (statistics.median(v), min(v), max(v)) for k, v in per.items()}


def validation(d):
    out = []
    real = {r["bytes"]: float(r["seconds"]) for r in rows(os.path.join(d, "pingpong-real.csv"))}
    sim = {r["bytes"]: float(r["seconds"]) for r in rows(os.path.join(d, "pingpong-smpi.csv"))}
    out.append("Ping-pong, one way (real Open MPI here vs SMPI on the fitted platform):\n")
    out.append("| bytes | real | SMPI | SMPI / real |\n|---:|---:|---:|---:|")
    for b in real:
        if b in sim and real[b] > 0:
            out.append(f"| {b} | {real[b] * 1e6:.2f} µs | {sim[b] * 1e6:.2f} µs | {sim[b] / real[b]:.2f} |")
    rep = {(r["ranks"], r["mode"]): r for r in rows(os.path.join(d, "replay-here.csv"))}
    meas = bench_steps(d)
    out.append("\nWide-MLP step, 2 ranks (replay vs bench_allreduce measured; medians of 3 runs [min..max]):\n")
    out.append("| mode | replay | measured | replay / measured | goal (within 25 %) |\n|---|---:|---:|---:|---|")
    lines = []
    for label, key, bench in [("compute only (1 rank)", ("1", "blocking"), "local"),
                              ("blocking", ("2", "blocking"), "blocking"),
                              ("overlapped (Test mode)", ("2", "overlapped"), "test")]:
        if key not in rep or bench not in meas:
            continue
        p = float(rep[key]["step_ms"])
        m, lo, hi = meas[bench]
        ok = abs(p / m - 1) <= 0.25
        out.append(f"| {label} | {p:.2f} ms | {m:.2f} ms [{lo:.2f}..{hi:.2f}] | {p / m:.2f} | {'met' if ok else 'short'} |")
        lines.append(f"{label},{p:.4f},{m:.4f},{p / m:.4f}")
    with open(os.path.join(d, "validation.csv"), "w") as f:
        f.write("mode,replay_ms,measured_ms,ratio\n" + "\n".join(lines) + "\n")
    return "\n".join(out)


def ms(v):
    v = float(v)
    return f"{v * 1e3:.2f} µs" if v < 1 else f"{v:.2f} ms" if v < 100 else f"{v:.1f} ms"


def nbytes(b):
    b = int(b)
    return f"{b / 1048576:.2f} MiB" if b >= 1048576 else f"{b / 1024:.1f} KiB" if b >= 1024 else f"{b} B"


def summary(o):
    out = []
    rep = rows(os.path.join(o, "replay.csv"))
    models = list(dict.fromkeys(r["model"] for r in rep))
    out.append("| model | nodes | compute | blocking step (eff.) | overlapped step (eff.) | exposed | best cap: step (eff.) |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    for m in models:
        by = {}
        for r in rep:
            if r["model"] == m:
                by.setdefault(int(r["ranks"]), {})[r["mode"]] = r
        for p in sorted(by):
            if p not in (2, 16, 64, 256, 1024):
                continue
            b, v, best = by[p]["blocking"], by[p]["overlapped"], by[p].get("overlapped_best")
            comp = float(b["forward_ms"]) + float(b["backward_ms"]) + float(b["other_ms"])
            cap = f"{nbytes(best['cap_bytes'])}: {ms(best['step_ms'])} ({100 * float(best['efficiency']):.0f} %)" if best else "-"
            out.append(f"| {m} | {p} | {ms(comp)} | {ms(b['step_ms'])} ({100 * float(b['efficiency']):.0f} %) | "
                       f"{ms(v['step_ms'])} ({100 * float(v['efficiency']):.0f} %) | {ms(v['exposed_ms'])} | {cap} |")
    chk = os.path.join(o, "check.csv")
    if os.path.exists(chk):
        out.append("\nReplay vs the step simulated inside SMPI (overlapped, cap 25 MiB):\n")
        out.append("| model | nodes | replay | SMPI | replay / SMPI | exposed replay / SMPI | simulation wall |\n|---|---:|---:|---:|---:|---:|---:|")
        for r in rows(chk):
            out.append(f"| {r['model']} | {r['ranks']} | {ms(r['replay_step_ms'])} | {ms(r['smpi_step_ms'])} | "
                       f"{float(r['step_ratio']):.4f} | {ms(r['replay_exposed_ms'])} / {ms(r['smpi_exposed_ms'])} | {r['sim_seconds']} s |")
    hv = sorted(glob.glob(os.path.join(o, "horovod-*.csv")))
    if hv:
        out.append("\nHorovod's network (25 Gbit/s links), same node rate:\n")
        out.append("| model | nodes | blocking eff. | overlapped eff. |\n|---|---:|---:|---:|")
        for f in hv:
            by = {}
            for r in rows(f):
                by.setdefault(r["ranks"], {})[r["mode"]] = r
            for p, d in by.items():
                out.append(f"| {d['blocking']['model']} | {p} | {100 * float(d['blocking']['efficiency']):.0f} % | "
                           f"{100 * float(d['overlapped']['efficiency']):.0f} % |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("fit", "validation", "summary"):
        sys.exit(__doc__)
    if sys.argv[1] == "fit":
        a, bw = fit(sys.argv[2])
        print(f"{a:.9g} {bw:.9g}")
    elif sys.argv[1] == "validation":
        print(validation(sys.argv[2]))
    else:
        print(summary(sys.argv[2]))
