#!/usr/bin/env python3
"""The GEMM table of bench/results/gemm.md from bench_gemm runs (bench/gemm_table.sh makes them).

Usage: python3 bench/gemm_table.py RUN.json [RUN.json ...] [--csv OUT.csv]
Each RUN.json: one bench_gemm process (OMP_NUM_THREADS=T, --benchmark_repetitions=R,
--benchmark_enable_random_interleaving=true, --benchmark_out_format=json), with the anchors'
kernels as that process had them (context openblas_kernel, blis_kernel: "detected" runs and
AVX-512-forced runs). Per shape and thread count: hddp's median (the configured choice, and
each micro-kernel set with its built-in blocking), every anchor's median under the kernel it
ran, and hddp over the best anchor: min over anchors of anchor time / hddp time, both from
the same process (> 1: hddp faster). % peak is against the median of the run's interleaved
peak/<s|d> probe. Backends whose results were wrong are shown as such and
left out. Shapes under 2 MFLOP are shown in ns. A CNN's named products (gemm/<backend>/s/NT/
12544x64x288/conv2_fwd) are shown as "s/NT/12544x64x288 conv2_fwd", after the others.
--csv writes one row per cell for bench/check_claims.py.
"""
import csv
import json
import re
import sys

UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(path):
    """(threads, {label: kernel}, {(backend, shape): record}, errors {(backend, shape): message})."""
    run = json.load(open(path))
    ctx = run["context"]
    threads = int(ctx["omp_max_threads"])
    kernels = {"openblas": ctx.get("openblas_kernel", "?"), "blis": ctx.get("blis_kernel", "?").split(" ")[0]}
    meds, errors, peak = {}, {}, {}
    for b in run["benchmarks"]:
        parts = b["run_name"].split("/")  # gemm/<backend>/<s|d>/<NN|NT|TN>/<MxNxK>/... or peak/<s|d>/...
        if parts[0] == "peak":
            if b.get("aggregate_name") == "median":
                peak[parts[1]] = b["GFLOPS"]
            continue
        backend, shape = parts[1], "/".join(parts[2:5])
        if len(parts) > 5 and re.fullmatch(r"[a-z][a-z0-9_]*", parts[5]) and parts[5] != "real_time":
            shape += " " + parts[5]  # a named product: gemm/<backend>/s/NT/12544x64x288/conv2_fwd
        if b.get("error_occurred"):
            errors[(backend, shape)] = b.get("error_message", "error")
            continue
        if b.get("aggregate_name") != "median":
            continue
        ns = b["real_time"] * UNIT_NS[b["time_unit"]]
        meds[(backend, shape)] = {"ns": ns, "gflops": b["GFLOPS"], "peak_pct": b["peak_pct"]}
    # % peak against the interleaved probe's median where the run has it (else the start-up one).
    for (backend, shape), r in meds.items():
        if shape[0] in peak:
            r["peak_pct"] = 100 * r["gflops"] / peak[shape[0]]
    ctx = dict(ctx, peak_median=peak)
    return threads, kernels, meds, errors, ctx


def dims_of(shape):
    """(M, N, K) of "s/NT/12544x64x288" or "s/NT/12544x64x288 conv2_fwd"."""
    return tuple(int(x) for x in shape.split(" ")[0].split("/")[2].split("x"))


def shape_key(shape):
    """Unnamed shapes by precision and size; named ones (a CNN's products) after them, by name."""
    prec, trans, _ = shape.split(" ")[0].split("/")
    m, n, k = dims_of(shape)
    name = shape.split(" ")[1] if " " in shape else ""
    return (name != "", prec, name, m * n * k, m, n, k, trans)


def cell(r, shape):
    """Tiny shapes (under 2 MFLOP) in ns, the rest in GFLOP/s with % of the peak."""
    if r is None:
        return "-"
    if isinstance(r, str):
        return r
    m, n, k = dims_of(shape)
    return f"{r['ns']:.0f} ns" if 2 * m * n * k < 2e6 else f"{r['gflops']:.1f} ({r['peak_pct']:.0f} %)"


def main(argv):
    csv_out = None
    if "--csv" in argv:
        i = argv.index("--csv")
        csv_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if not argv:
        sys.exit(__doc__)
    runs = [load(p) for p in argv]
    # Columns: hddp's own from the first run of each thread count; anchors per (name, kernel).
    anchor_cols = []
    for _, kernels, meds, errors, ctx in runs:
        for name in ("openblas", "blis"):
            col = (name, kernels[name])
            if col not in anchor_cols and any(b == name for (b, _) in list(meds) + list(errors)):
                anchor_cols.append(col)
        print(f"- OMP_NUM_THREADS={ctx.get('omp_max_threads')}, OPENBLAS_CORETYPE={ctx.get('openblas_coretype_env')}: "
              f"OpenBLAS ran {kernels['openblas']}, BLIS {ctx.get('blis_kernel', '-')}; FMA peak "
              + (f"float {ctx['peak_median']['s']:.1f}, double {ctx['peak_median']['d']:.1f} GFLOP/s (median, interleaved); "
                 if {'s', 'd'} <= set(ctx['peak_median']) else f"{ctx.get('fma_peak')}; ") +
              f"hddp {ctx.get('hddp_config')}")
        if ctx.get("anchors_absent"):
            print(f"  - left out: {ctx['anchors_absent']}")
    hddp_cols = sorted({b for (_, _, meds, _, _) in runs for (b, _) in meds if b.startswith("hddp")},
                       key=lambda b: (b != "hddp", b == "hddp-avx2", b))
    rows = []
    threads_list = sorted({r[0] for r in runs})
    shapes = sorted({s for r in runs for (_, s) in r[2]}, key=shape_key)
    for t in threads_list:
        mine = [r for r in runs if r[0] == t]
        for shape in shapes:
            first = mine[0][2]
            if ("hddp", shape) not in first:
                continue
            cells = {c: first.get((c, shape)) for c in hddp_cols}
            best, best_name = None, "-"
            for _, kernels, meds, errors, _ in mine:
                for name in ("openblas", "blis"):
                    col = (name, kernels[name])
                    if (name, shape) in errors:
                        cells[col] = "wrong results"
                        continue
                    a, h = meds.get((name, shape)), meds.get(("hddp", shape))
                    if a is None:
                        continue
                    cells[col] = a
                    if h is not None:
                        ratio = a["ns"] / h["ns"]
                        if best is None or ratio < best:
                            best, best_name = ratio, f"{name} {kernels[name]}"
            rows.append((shape, t, cells, best, best_name))
    head = ["shape", "threads"] + [f"{c} GFLOP/s (% peak)" if c == "hddp" else c for c in hddp_cols] + \
           [f"{'OpenBLAS' if n == 'openblas' else 'BLIS'} {k}" for n, k in anchor_cols] + ["best anchor", "hddp / best anchor"]
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for shape, t, cells, best, best_name in rows:
        vals = [cell(cells.get(c), shape) for c in hddp_cols] + [cell(cells.get(c), shape) for c in anchor_cols]
        ratio = f"**{best:.2f}**" if best is not None and best < 1 else (f"{best:.2f}" if best is not None else "-")
        print(f"| {shape} | {t} | " + " | ".join(vals) + f" | {best_name} | {ratio} |")
    if csv_out:
        with open(csv_out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["shape", "threads", "column", "ns", "gflops", "peak_pct", "note"])
            for shape, t, cells, best, best_name in rows:
                for c, r in cells.items():
                    name = c if isinstance(c, str) else f"{c[0]} {c[1]}"
                    if isinstance(r, dict):
                        w.writerow([shape, t, name, f"{r['ns']:.1f}", f"{r['gflops']:.2f}", f"{r['peak_pct']:.1f}", ""])
                    elif isinstance(r, str):
                        w.writerow([shape, t, name, "", "", "", r])
                if best is not None:
                    w.writerow([shape, t, "hddp / best anchor", "", "", "", f"{best:.3f} vs {best_name}"])


if __name__ == "__main__":
    main(sys.argv[1:])
