#!/usr/bin/env python3
"""The allreduce latency table of bench/RESULTS.md from bench_allreduce's pairs/ benchmarks.

Usage: python3 bench/pairs_table.py RUN.json [RUN.json ...]
Each RUN.json: bench_allreduce --benchmark_filter='^pairs/' --benchmark_out=RUN.json
--benchmark_out_format=json under mpiexec. Per size and variant: the median over runs of the
per-op time, and of the per-iteration ratio to in-place MPI_Allreduce [min..max over runs].
"""
import json
import statistics
import sys

VARIANTS = [("allreduce_inplace", "MPI_Allreduce, in place"),
            ("allreduce_separate", "MPI_Allreduce, separate buffers"),
            ("binomial_inplace", "Iallreduce+Wait binomial, in place"),
            ("binomial_separate", "Iallreduce+Wait binomial, separate"),
            ("rabenseifner_inplace", "Iallreduce+Wait rabenseifner, in place"),
            ("rabenseifner_separate", "Iallreduce+Wait rabenseifner, separate")]


def fmt_time(us):
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def main(paths):
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
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
