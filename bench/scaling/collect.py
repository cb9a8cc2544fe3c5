#!/usr/bin/env python3
"""The scaling study's raw outputs (bench/scaling/run.sh: OUT/raw/) as one CSV on stdout.

  collect.py RAW_DIR CPU_MODEL CPU_FM > scaling.csv
  collect.py --md scaling.csv > scaling.md        (the table bench/results/scaling.md quotes)

One row per workload and layout: the median over the repetitions of the program's own
measure (GFLOP/s from bench_gemm, seconds from bench_elementwise, bench_layers and the drivers'
--stats-json step_s), the speed-up over 1 rank x 1 thread of the same workload, the parallel
efficiency (speed-up / cores), the placement and the CPU.
"""
import glob
import json
import os
import re
import statistics
import sys

# workload -> (file prefix, how to read one file, unit, higher is better)
GEMM = {"sgemm_1024": "NN/1024x1024x1024", "sgemm_thin": "NT/256x4096x4096"}


def bench_rows(path):
    """Google Benchmark JSON: name -> median (real_time in s, or the GFLOPS counter)."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b.get("run_name", b["name"])
        seconds = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        out[name] = (b["GFLOPS"], "gflops") if "GFLOPS" in b else (seconds, "s")
    return out


def summary_step(path):
    """A driver's --stats-json: its summary's seconds per step."""
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return [l for l in lines if l.get("type") == "summary"][-1]["step_s"]


def collect(raw, cpu, fm):
    values = {}  # (workload, ranks, threads) -> (value, unit)
    for path in glob.glob(os.path.join(raw, "*-1x*.json")):
        kind, t = re.match(r".*/(\w+)-1x(\d+)\.json$", path).groups()
        for name, (v, unit) in bench_rows(path).items():
            if kind == "gemm":
                w = next(k for k, shape in GEMM.items() if shape in name)
            elif kind == "elementwise":
                w = f"{name.split('/')[0]}_16Mi"  # the library's threaded entry point (adam_update, tanh_forward)
            else:
                w = "mlp_step_bench"
            values[(w, 1, int(t))] = (v, unit)
    runs = {}
    for path in glob.glob(os.path.join(raw, "*-*x*-*.jsonl")):
        w, p, t = re.match(r".*/(\w+)-(\d+)x(\d+)-\d+\.jsonl$", path).groups()
        runs.setdefault((f"{w}_step", int(p), int(t)), []).append(summary_step(path))
    for key, v in runs.items():
        values[key] = (statistics.median(v), "s")
    print("workload,ranks,threads,cores,unit,value,speedup,efficiency,placement,cpu_model,cpu_family_model")
    for (w, p, t), (v, unit) in sorted(values.items()):
        base = values.get((w, 1, 1))
        speedup = (v / base[0] if unit == "gflops" else base[0] / v) if base else float("nan")
        placement = open(os.path.join(raw, f"placement-{p}x{t}.txt")).read().strip()
        print(f'{w},{p},{t},{p * t},{unit},{v:.6g},{speedup:.4f},{speedup / (p * t):.4f},"{placement}","{cpu}","{fm}"')


def table(path):
    import csv
    rows = list(csv.DictReader(open(path)))
    print(f"CPU: {rows[0]['cpu_model']} ({rows[0]['cpu_family_model']})\n")
    print("| workload | ranks x threads | measure | speed-up over 1 x 1 | efficiency |")
    print("|---|---|---|---|---|")
    for r in rows:
        unit = "GFLOP/s" if r["unit"] == "gflops" else "s"
        print(f"| {r['workload']} | {r['ranks']} x {r['threads']} | {float(r['value']):.4g} {unit} | "
              f"{float(r['speedup']):.2f} | {100 * float(r['efficiency']):.0f} % |")


if __name__ == "__main__":
    table(sys.argv[2]) if sys.argv[1] == "--md" else collect(*sys.argv[1:4])
