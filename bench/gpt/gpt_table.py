#!/usr/bin/env python3
"""Tables of bench/gpt's raw CSVs.

  gpt_table.py loss CSV CPU [PDF]   gpt_loss.sh's validation losses: the mean over the seeds per
                                    step, hddp against PyTorch, the goal (within 0.05 nats after
                                    the last step); PDF: the curves (gnuplot), every seed
  gpt_table.py rows KIND FILE ARGS  one run's CSV rows from its output (the scripts call it):
                                    loss-hddp STATS SEED, loss-pytorch LOG SEED,
                                    step-hddp STATS PREC CONFIG LAYOUT REP, step-pytorch LOG ...
  gpt_table.py layers JSON... CPU   bench_gpt's rows (one JSON per thread count, Google Benchmark's
                                    --benchmark_out): the median time, GFLOP/s and % of the probe
  gpt_table.py step CSV CPU         gpt_step.sh's steps: the median ms per step of each side per
                                    config, layout and precision, the ratios and the goals (2x
                                    PyTorch in float, 2x its bf16 autocast in bf16), peak memory
"""
import csv
import statistics
import subprocess
import sys
from collections import defaultdict


def loss(path, cpu, pdf=None):
    rows = list(csv.DictReader(open(path)))
    by = defaultdict(list)  # (impl, step) -> losses
    seeds = defaultdict(set)
    for r in rows:
        by[(r["impl"], int(r["step"]))].append(float(r["val_loss"]))
        seeds[r["impl"]].add(r["seed"])
    steps = sorted({s for (_, s) in by})
    n = min(len(v) for v in seeds.values())
    print(f"### Validation loss, hddp against PyTorch ({cpu})\n")
    print(f"Mean over {n} seeds, nats per byte, 2 ranks x 1 thread, batch 12 per rank.\n")
    print("| step | hddp | PyTorch | hddp - PyTorch |")
    print("|---|---|---|---|")
    for s in steps:
        h, t = statistics.mean(by[("hddp", s)]), statistics.mean(by[("pytorch", s)])
        print(f"| {s} | {h:.4f} | {t:.4f} | {h - t:+.4f} |")
    last = steps[-1]
    d = statistics.mean(by[("hddp", last)]) - statistics.mean(by[("pytorch", last)])
    print(f"\nGoal: within 0.05 nats after step {last}: {'met' if abs(d) <= 0.05 else 'short'} ({d:+.4f}).")
    if pdf:
        data = {}
        for r in rows:
            data.setdefault((r["impl"], r["seed"]), []).append((int(r["step"]), float(r["val_loss"])))
        script = [f"set terminal pdfcairo size 7in,4in", f"set output '{pdf}'",
                  f"set title 'Validation loss, 2 ranks x 1 thread ({cpu})' noenhanced", "set xlabel 'step'",
                  "set ylabel 'loss (nats per byte)'", "set key top right", "set grid"]
        plots, blocks = [], []
        for (impl, seed), pts in sorted(data.items()):
            color = "#1f77b4" if impl == "hddp" else "#ff7f0e"
            plots.append(f"'-' with linespoints lw 2 pt 7 ps 0.5 lc rgb '{color}' title '{impl} seed {seed}'")
            blocks.append("\n".join(f"{s} {v}" for s, v in sorted(pts)) + "\ne")
        script.append("plot " + ", ".join(plots))
        subprocess.run(["gnuplot"], input="\n".join(script + blocks) + "\n", text=True, check=True)


def step(path, cpu):
    rows = list(csv.DictReader(open(path)))
    by = defaultdict(list)
    rss = defaultdict(list)
    for r in rows:
        key = (r["config"], r["layout"], r["precision"], r["impl"])
        by[key].append(float(r["step_ms"]))
        rss[key].append(float(r["peak_rss_mb"]))
    configs = []
    for r in rows:
        if (r["config"], r["layout"]) not in configs:
            configs.append((r["config"], r["layout"]))
    print(f"### The training step, hddp against PyTorch DDP ({cpu})\n")
    print("Median of the rounds' medians, ms per step; peak RSS of rank 0 in MB.\n")
    print("| config | ranks x threads | hddp float | PyTorch float | ratio | hddp bf16 | PyTorch bf16 autocast | ratio | memory hddp / PyTorch (float) |")
    print("|---|---|---|---|---|---|---|---|---|")
    short = []
    for c, l in configs:
        def med(p, i):
            v = by.get((c, l, p, i))
            return statistics.median(v) if v else float("nan")
        hf, tf, hb, tb = med("float", "hddp"), med("float", "pytorch"), med("bf16", "hddp"), med("bf16", "pytorch")
        mh = statistics.median(rss.get((c, l, "float", "hddp"), [float("nan")]))
        mt = statistics.median(rss.get((c, l, "float", "pytorch"), [float("nan")]))
        print(f"| {c} | {l} | {hf:.1f} | {tf:.1f} | {tf / hf:.2f}x | {hb:.1f} | {tb:.1f} | {tb / hb:.2f}x | {mh:.0f} / {mt:.0f} |")
        for what, r in (("float", tf / hf), ("bf16", tb / hb)):
            if not r >= 2.0:
                short.append(f"{c} {l} {what} {r:.2f}x")
    print("\nGoal: 2x PyTorch per step (float against float, bf16 against its bf16 autocast): " +
          ("met everywhere." if not short else "short at " + ", ".join(short) + "."))


def layers(paths, cpu):
    import json
    table, order = {}, []  # name -> its median row per file (thread count), in the files' order
    for path in paths:
        for b in json.load(open(path))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            if b["run_name"] not in order:
                order.append(b["run_name"])
            table.setdefault(b["run_name"], []).append(b)
    threads = [int(json.load(open(p))["context"]["omp_max_threads"]) for p in paths]
    order.sort()
    print(f"### The step and its parts against the probe ({cpu})\n")
    print("bench_gpt, median of 3 repetitions; GFLOP/s counts a forward's flops three times; % of the FMA probe")
    print("(float rows) or of the bf16 unit's probe (bf16 rows) at the same thread count; the element-wise")
    print("rows in GB/s of values read and written.\n")
    head = " | ".join(f"{t} thread{'s' if t > 1 else ''} ms | GFLOP/s | % of probe" for t in threads)
    print(f"| row | {head} |")
    print("|---|" + "---|---|---|" * len(threads))
    for name in order:
        cells = []
        for b in table[name]:
            ms = b["real_time"]
            if "GFLOPS" in b:
                cells.append(f"{ms:.2f} | {b['GFLOPS']:.0f} | {b['peak_pct']:.0f} %")
            else:
                cells.append(f"{ms:.2f} | {b['GBps']:.1f} GB/s | -")
        print(f"| {name.removesuffix('/real_time')} | " + " | ".join(cells) + " |")


def rows(kind, path, *args):
    import json
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    if kind == "loss-hddp":
        for e in lines:
            if e["type"] == "eval":
                print(f"hddp,float,{args[0]},{e['step']},{e['val_loss']},{e['elapsed_train_s']}")
    elif kind == "loss-pytorch":
        for e in lines:
            print(f"pytorch,float,{args[0]},{e['step']},{e['val_loss']},{e['train_s']}")
    elif kind == "step-hddp":
        s = lines[-1]
        print(f"hddp,{','.join(args)},{s['step_ms_median']},{s['peak_rss_mb']}")
    elif kind == "step-pytorch":
        e = lines[-1]
        print(f"pytorch,{','.join(args)},{e['step_ms']},{e['peak_rss_mb']}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "rows":
        rows(*sys.argv[2:])
    elif mode == "layers":
        layers(sys.argv[2:-1], sys.argv[-1])
    elif mode == "loss":
        loss(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        step(sys.argv[2], sys.argv[3])
