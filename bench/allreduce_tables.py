#!/usr/bin/env python3
"""bench_allreduce JSON runs -> the markdown tables of bench/results/allreduce.md.

Usage: allreduce_tables.py 'P_RANKS_GLOB' '1_RANK_GLOB'   (quoted globs of --benchmark_out files)
       allreduce_tables.py pairs RUN.json [RUN.json ...]   (the latency table, below)
Every figure is the median over the runs of each run's own median, [min..max] over the runs.

The latency table from bench_allreduce's pairs/ benchmarks: each RUN.json is
bench_allreduce --benchmark_filter='^pairs/' --benchmark_out=RUN.json --benchmark_out_format=json
under mpiexec. Per size and variant: the median over runs of the per-op time, and of the
per-iteration ratio to in-place MPI_Allreduce [min..max over runs].
"""
import collections
import glob
import json
import re
import statistics
import sys


def load(pattern):
    data, loads = collections.defaultdict(list), []
    for f in sorted(glob.glob(pattern)):
        j = json.load(open(f))
        loads.append(round(j["context"].get("load_avg", [float("nan")])[0], 1))
        for b in j["benchmarks"]:
            if b.get("run_type") != "aggregate":
                data[re.sub(r"/iterations:\d+/(real|manual)_time", "", b["name"])].append(b)
    return data, loads


def med(runs, k):
    v = [r[k] for r in runs if k in r]
    return statistics.median(v) if v else float("nan")


def rng(runs, k, fmt="{:+.0f}"):
    v = [r[k] for r in runs if k in r]
    return f" [{fmt.format(min(v))}..{fmt.format(max(v))}]" if len(v) > 1 else ""


def t(us):
    if us != us:
        return "–"
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs" if us >= 10 else f"{us:.2f} µs"


def sizes(data, prefix):
    out = []
    for n in data:
        m = re.match(prefix + r"([0-9]+(B|KiB|MiB))", n)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def main():
    dp, lp = load(sys.argv[1])
    d1, l1 = load(sys.argv[2]) if len(sys.argv) > 2 else ({}, [])
    runs = lambda d: max((len(v) for v in d.values()), default=0)
    print(f"{runs(dp)} runs with P ranks, {runs(d1)} with 1 rank; load average at the start of each part: {lp}, {l1}\n")

    print("Latency and algorithm bandwidth (bytes / time):\n")
    print("| bytes | MPI_Allreduce | GB/s | Iallreduce+Wait, binomial | GB/s | Iallreduce+Wait, rabenseifner | GB/s | 1 rank MPI_Allreduce |")
    print("|---|---|---|---|---|---|---|---|")
    for s in sizes(dp, "allreduce/blocking/"):
        a, b = dp[f"allreduce/blocking/{s}"], dp.get(f"allreduce/iallreduce_wait/{s}/nbc:binomial", [])
        c, a1 = dp.get(f"allreduce/iallreduce_wait/{s}/nbc:rabenseifner", []), d1.get(f"allreduce/blocking/{s}", [])
        print(f"| {s} | {t(med(a, 'median_us'))} | {med(a, 'algbw_GBps'):.3g} | {t(med(b, 'median_us'))} | "
              f"{med(b, 'algbw_GBps'):.3g} | {t(med(c, 'median_us'))} | {med(c, 'algbw_GBps'):.3g} | {t(med(a1, 'median_us'))} |")

    print("\nThe reducer vs raw MPI of the same bytes (one step, one bucket): overhead over MPI_Allreduce "
          "[range over runs], and over Iallreduce+Wait with the same libnbc algorithm; medians of per-iteration ratios:\n")
    print("| bytes | MPI_Allreduce | Iallreduce+Wait (rab.) | 1/P pass alone | reducer blocking | reducer test (default) | reducer thread | reducer test, binomial |")
    print("|---|---|---|---|---|---|---|---|")
    for s in sizes(dp, "allreduce/reducer/blocking/"):
        bl = dp[f"allreduce/reducer/blocking/{s}"]
        row = [s, t(med(bl, "allreduce_us")), t(med(dp[f"allreduce/reducer/test/{s}"], "iallreduce_us")),
               t(med(bl, "average_us"))]
        for m in ["blocking", "test", "thread", "test_binomial"]:
            r = dp[f"allreduce/reducer/{m}/{s}"]
            vs_i = "" if m == "blocking" else f"; {med(r, 'overhead_vs_iallreduce_pct'):+.0f} % vs Iallreduce"
            row.append(f"{t(med(r, 'reducer_us'))} ({med(r, 'overhead_pct'):+.0f} %{rng(r, 'overhead_pct')}{vs_i})")
        print("| " + " | ".join(row) + " |")

    print("\nOverlap: an Iallreduce alongside compute of the same length; overlap % = 100 (1 - (overall - "
          "compute) / pure), compute from the run without communication:\n")
    print("| bytes | libnbc algorithm | strategy | pure comm | compute | overall | exposed | overlap % | per iteration |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, r in dp.items():
        if not n.startswith("overlap/") or "poll_us" in n:
            continue
        _, strat, size, nbc = n.split("/")
        ex = statistics.median(x["overall_us"] - x["compute_us"] for x in r)
        print(f"| {size} | {nbc[4:]} | {strat} | {t(med(r, 'pure_us'))} | {t(med(r, 'compute_us'))} | "
              f"{t(med(r, 'overall_us'))} | {t(ex)} | {med(r, 'overlap_pct'):.0f}{rng(r, 'overlap_pct', '{:.0f}')} | "
              f"{med(r, 'overlap_iter_pct'):.0f}{rng(r, 'overlap_iter_pct', '{:.0f}')} |")

    print("\nPoll interval, 4 MiB: overlap % per iteration (exposed):\n")
    print("| libnbc algorithm | strategy | 10 µs | 50 µs (default) | 200 µs | 1000 µs |")
    print("|---|---|---|---|---|---|")
    for nbc in ["binomial", "rabenseifner"]:
        for strat in ["reducer_test", "reducer_thread"]:
            cells = []
            for p in [10, 50, 200, 1000]:
                r = dp.get(f"overlap/{strat}/4MiB/nbc:{nbc}" + ("" if p == 50 else f"/poll_us:{p}"), [])
                ex = [x["overall_us"] - x["compute_us"] for x in r]
                cells.append(f"{med(r, 'overlap_iter_pct'):.0f} % ({t(statistics.median(ex)) if ex else '–'})")
            print(f"| {nbc} | {strat} | " + " | ".join(cells) + " |")

    print("\nWide-MLP training step, ms (step / blocking step, median of per-round ratios [range]; "
          "exposed ms and overlap % from ReducerStats):\n")
    print("| batch, cap | buckets | 1 rank | P ranks, no reducer | blocking | comm share of blocking | "
          "test (default) | thread | test, binomial | thread, binomial |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, r in dp.items():
        if not n.startswith("step/"):
            continue

        def mode(m):
            return (f"{med(r, m + '_ms'):.1f} ({med(r, m + '_ratio'):.2f}{rng(r, m + '_ratio', '{:.2f}')}; "
                    f"{med(r, m + '_exposed_ms'):.1f} ms, {med(r, m + '_overlap_pct'):.0f} %)")
        print(f"| {n[10:]} | {med(r, 'buckets'):.0f} | {med(d1.get(n, []), 'local_ms'):.1f} | {med(r, 'local_ms'):.1f} | "
              f"{med(r, 'blocking_ms'):.1f} | {med(r, 'comm_share_pct'):.0f} %{rng(r, 'comm_share_pct', '{:.0f}')} | "
              f"{mode('test')} | {mode('thread')} | {mode('test_binomial')} | {mode('thread_binomial')} |")


VARIANTS = [("allreduce_inplace", "MPI_Allreduce, in place"),
            ("allreduce_separate", "MPI_Allreduce, separate buffers"),
            ("binomial_inplace", "Iallreduce+Wait binomial, in place"),
            ("binomial_separate", "Iallreduce+Wait binomial, separate"),
            ("rabenseifner_inplace", "Iallreduce+Wait rabenseifner, in place"),
            ("rabenseifner_separate", "Iallreduce+Wait rabenseifner, separate")]


def fmt_time(us):
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def pairs_table(paths):
    runs = [json.load(open(p)) for p in paths]
    ctx = runs[0]["context"]
    print(f"{len(runs)} runs; MPI thread level {ctx.get('mpi_thread_level')}, {ctx.get('mpi_ranks')} ranks, "
          f"{ctx.get('mpi_library')}; time per op, and in parentheses the ratio to in-place MPI_Allreduce "
          "in the same iteration (median over runs [min..max])")
    print()
    print("| bytes | " + " | ".join(label for _, label in VARIANTS) + " |")
    print("|---" * (len(VARIANTS) + 1) + "|")
    for i, b in enumerate(runs[0]["benchmarks"]):
        row = [b["name"].split("/")[1]]
        for key, _ in VARIANTS:
            cell = fmt_time(statistics.median(r["benchmarks"][i][key + "_us"] for r in runs))
            if key != "allreduce_inplace":
                ratios = [r["benchmarks"][i][key + "_vs_allreduce"] for r in runs]
                cell += f" ({statistics.median(ratios):.2f} [{min(ratios):.2f}..{max(ratios):.2f}])"
            row.append(cell)
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pairs":
        pairs_table(sys.argv[2:])
    else:
        main()
