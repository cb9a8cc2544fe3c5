#!/usr/bin/env python3
"""bench/at_scale's small numeric helpers and its markdown tables (bench/results/at_scale.md).

  tables.py summary OUT             replay per model and P, the in-simulator check, Horovod
  tables.py comm DIR                the communication model against the reducer (comm_check.sh's
                                    comm-<P>.csv in DIR, bench/results/<cpu>/at_scale)
  tables.py comm-link DIR           the same over shaped network links (bench/link/comm_check_link.sh's
                                    comm-<rate>-<P>.csv in DIR, bench/results/<cpu>/link), goal 15 %
"""
import csv
import glob
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def ms(v):
    v = float(v)
    return f"{v * 1e3:.2f} µs" if v < 1 else f"{v:.2f} ms" if v < 100 else f"{v:.1f} ms"


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
            cap = f"{int(best['cap_bytes'])} B: {ms(best['step_ms'])} ({100 * float(best['efficiency']):.0f} %)" if best else "-"
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


def comm(d, link=False):
    """One row per ranks, mode and cap (and link): measured and replayed communication, the
    median ratio."""
    out = []
    tol = 0.15 if link else 0.25
    paths = glob.glob(os.path.join(d, "comm-*-[0-9].csv" if link else "comm-[0-9].csv"))
    def rate_key(p):  # comm-<rate>-<P>.csv: the fastest link first, then P
        rate = os.path.basename(p).split("-")[1]
        scale = {"gbit": 1e9, "mbit": 1e6}
        for unit, mult in scale.items():
            if rate.endswith(unit):
                return (-float(rate[:-len(unit)]) * mult, p)
        return (0.0, p)
    for path in sorted(paths, key=rate_key if link else None):
        r = rows(path)
        if not out:
            out += [f"CPU: {r[0]['cpu']}; {r[0]['rounds']} interleaved rounds, medians; "
                    f"compute {float(r[0]['compute_ms']):.2f} ms (2 ranks) per step",
                    "",
                    ("| link " if link else "") + "| ranks | mode | cap | buckets | measured comm | replayed "
                    f"| replayed / measured [min..max over rounds] | goal (within {round(100 * tol)} %) |",
                    ("|---" if link else "") + "|---:|---|---:|---:|---:|---:|---:|---|"]
        rate = os.path.basename(path).split("-")[1] if link else None
        for x in r:
            q = float(x["ratio"])
            out.append((f"| {rate} " if link else "") + f"| {x['ranks']} | {x['mode']} | {int(x['cap_bytes'])} B | {x['buckets']} | "
                       f"{float(x['measured_comm_ms']):.3f} ms | {float(x['replay_comm_ms']):.3f} ms | "
                       f"{q:.2f} [{float(x['ratio_min']):.2f}..{float(x['ratio_max']):.2f}] | "
                       f"{'met' if abs(q - 1) <= tol else 'short'} |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("summary", "comm", "comm-link"):
        sys.exit(__doc__)
    if sys.argv[1].startswith("comm"):
        print(comm(sys.argv[2], link=sys.argv[1] == "comm-link"))
    else:
        print(summary(sys.argv[2]))
