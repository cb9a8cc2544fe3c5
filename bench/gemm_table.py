#!/usr/bin/env python3
"""The GEMM table of bench/RESULTS.md from bench_gemm runs, one JSON file per thread count.

Usage: python3 bench/gemm_table.py RUN.json [RUN.json ...]
Each RUN.json: OMP_NUM_THREADS=T bench_gemm --benchmark_repetitions=R
--benchmark_enable_random_interleaving=true --benchmark_out=RUN.json --benchmark_out_format=json
(bench/gemm_table.sh runs them). Per shape and thread count: the median of every backend
(hddp once per micro-kernel, OpenBLAS), its percentage of the FMA peak that bench_gemm measured
at start-up (bench_peak's probe, widest instruction set, same precision and thread count), and
each hddp kernel's speed over OpenBLAS's (> 1: hddp faster). Tiny shapes are shown in ns.
"""
import json
import sys


def medians(run):
    """{(threads, backend, shape): (real_time_ns, gflops, peak_pct)} from one run's medians."""
    threads = int(run["context"]["omp_max_threads"])
    out = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")  # gemm/<backend>/<s|d>/<NN|NT|TN>/<MxNxK>/...
        backend, shape = parts[1], "/".join(parts[2:5])
        ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        out[(threads, backend, shape)] = (ns, b["GFLOPS"], b["peak_pct"])
    return out


def shape_key(shape):
    prec, trans, dims = shape.split("/")
    m, n, k = (int(x) for x in dims.split("x"))
    return (prec, m * n * k, m, n, k, trans)


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    rows = {}
    for run in runs:
        ctx = run["context"]
        print(f"- OMP_NUM_THREADS={ctx.get('omp_max_threads')}: FMA peak {ctx.get('fma_peak')}; "
              f"hddp default kernel {ctx.get('hddp_kernel')}")
        rows.update(medians(run))
    hddp = sorted({b for (_, b, _) in rows if b.startswith("hddp-")}, reverse=True)  # avx512 first
    cols = hddp + ["openblas"]
    print()
    print("| shape | threads | " + " | ".join(f"{c} (% peak)" for c in cols) + " | " +
          " | ".join(f"{h.removeprefix('hddp-')} / OpenBLAS" for h in hddp) + " |")
    print("|---|---|" + "---|" * (len(cols) + len(hddp)))
    keys = sorted({(s, t) for (t, _, s) in rows}, key=lambda st: (shape_key(st[0]), st[1]))
    for shape, t in keys:
        if (t, "openblas", shape) not in rows:
            continue
        cells = []
        for c in cols:
            r = rows.get((t, c, shape))
            if r is None:
                cells.append("-")
            elif r[0] < 10000:
                cells.append(f"{r[0]:.0f} ns")
            else:
                cells.append(f"{r[1]:.1f} GFLOP/s ({r[2]:.0f} %)")
        ob = rows[(t, "openblas", shape)][0]
        ratios = [f"{ob / rows[(t, h, shape)][0]:.2f}" if (t, h, shape) in rows else "-" for h in hddp]
        print(f"| {shape} | {t} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
