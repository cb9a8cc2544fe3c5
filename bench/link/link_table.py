#!/usr/bin/env python3
"""The table of bench/link/link_table.sh from its CSV: per model and link, seconds per epoch
(medians over the rounds) of hddp's variants, PyTorch DDP's, the compute alone and the
communication alone, the exposed communication and the goals.

Usage: link_table.py CSV "CPU" "NOTE"   (markdown on stdout)
       link_table.py CSV --json          (the medians and ratios as JSON, for check_claims.py)
"""
import csv
import json
import statistics
import sys
from collections import defaultdict

RATE_ORDER = ["none", "25gbit", "10gbit", "3gbit", "1gbit"]
HDDP_FLOAT = ["default", "blocking", "thread", "cap25", "auto"]  # hddp's float-gradient variants
TORCH_FLOAT = ["cap1", "cap4", "cap25"]


def load(path):
    runs = defaultdict(list)
    notes = defaultdict(list)
    for r in csv.DictReader(open(path)):
        key = (r["rate"], r["model"], r["impl"], r["variant"])
        runs[key].append(float(r["train_s"]))
        if r["note"]:
            notes[key].append(r["note"])
    return {k: statistics.median(v) for k, v in runs.items()}, notes, {k: len(v) for k, v in runs.items()}


def summarise(path):
    med, notes, counts = load(path)
    models = sorted({k[1] for k in med}, key=lambda m: ["cnn", "mlp"].index(m) if m in ("cnn", "mlp") else 9)
    rates = [r for r in RATE_ORDER if any(k[0] == r for k in med)] + sorted(
        {k[0] for k in med if k[0] not in RATE_ORDER and k[0] != "solo"})
    out = {}
    for m in models:
        compute = med.get(("solo", m, "hddp", "default"))
        compute_torch = med.get(("solo", m, "pytorch", "default"))
        rows = []
        for rate in rates:
            g = lambda impl, v: med.get((rate, m, impl, v))  # noqa: E731
            d = g("hddp", "default")
            if d is None:
                continue
            comm = g("comm", "allreduce")
            hv = {v: g("hddp", v) for v in HDDP_FLOAT if g("hddp", v) is not None}
            best_v = min(hv, key=hv.get)
            fixed = {v: hv[v] for v in ("default", "cap25", "blocking", "thread") if v in hv}
            best_fixed = min(fixed.values())
            tv = {v: g("pytorch", v) for v in TORCH_FLOAT if g("pytorch", v) is not None}
            tbest_v = min(tv, key=tv.get) if tv else None
            keeps_up = comm is not None and compute is not None and comm < compute
            row = {
                "rate": rate, "compute": compute, "comm": comm, "default": d, "keeps_up": keeps_up,
                "exposed": d - compute if compute else None,
                "exposed_pct": 100 * (d - compute) / compute if compute else None,
                "default_vs_comm": d / comm if comm else None,
                "best_variant": best_v, "best": hv[best_v], "default_vs_best": d / hv[best_v],
                "auto": hv.get("auto"), "auto_vs_best_fixed": hv["auto"] / best_fixed if "auto" in hv else None,
                "auto_note": (notes.get((rate, m, "hddp", "auto")) or [""])[-1],
                "variants": hv,
                "torch_best_variant": tbest_v, "torch_best": tv.get(tbest_v),
                "vs_torch": tv[tbest_v] / d if tv else None,
                "bf16": g("hddp", "bf16"), "torch_fp16": g("pytorch", "fp16"),
                "bf16_vs_torch_fp16": (g("pytorch", "fp16") / g("hddp", "bf16"))
                if g("hddp", "bf16") and g("pytorch", "fp16") else None,
                "bf16_vs_float": g("hddp", "bf16") / d if g("hddp", "bf16") else None,
                "rounds": counts.get((rate, m, "hddp", "default"), 0),
            }
            rows.append(row)
        out[m] = {"compute": compute, "compute_torch": compute_torch, "rows": rows}
    return out


def fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def markdown(path, cpu, note):
    s = summarise(path)
    lines = [f"CPU: {cpu}. 2 ranks, one core each, on nodes of their own (network namespaces) joined by a",
             "veth link shaped by tc tbf to RATE each way (bench/link/shaped_link.sh; `none`: unshaped).",
             "Seconds per epoch, medians over the rounds; compute alone = 1 rank, the same steps, no",
             "communication; comm alone = the step's gradient bytes through bench_allreduce over the same",
             "link (the faster of MPI_Allreduce and the reducer's MPI_Iallreduce), times the steps.",
             "exposed = hddp default - compute alone. " + note, ""]
    for m, d in s.items():
        desc = {"cnn": "CNN (batch 64, 100 steps, 1.69 MB of gradients per step)",
                "mlp": "MLP 784-1024-1024-10 (batch 256, 50 steps, 7.45 MB per step)"}.get(m, m)
        lines.append(f"### {desc}")
        lines.append(f"compute alone: hddp {fmt(d['compute'])} s, PyTorch {fmt(d['compute_torch'])} s")
        lines.append("")
        lines.append("| link | comm alone | hddp default | exposed | default / comm alone | hddp best (variant) "
                     "| default / best | auto (its plan) / best fixed | PyTorch best (cap) | hddp vs PyTorch "
                     "| hddp bf16 wire | PyTorch fp16 hook | bf16 vs fp16 |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in d["rows"]:
            lines.append(
                f"| {r['rate']} | {fmt(r['comm'])} | {fmt(r['default'])} | {fmt(r['exposed_pct'], '{:.0f} %')} "
                f"| {fmt(r['default_vs_comm'])}x | {fmt(r['best'])} ({r['best_variant']}) | {fmt(r['default_vs_best'])} "
                f"| {fmt(r['auto_vs_best_fixed'])} ({r['auto_note'].replace('auto ', '')}) "
                f"| {fmt(r['torch_best'])} ({r['torch_best_variant']}) | {fmt(r['vs_torch'])}x "
                f"| {fmt(r['bf16'])} | {fmt(r['torch_fp16'])} | {fmt(r['bf16_vs_torch_fp16'])}x |")
        lines.append("")
        lines.append("Goals (float gradients, hddp defaults):")
        for r in d["rows"]:
            goals = []
            if r["keeps_up"]:
                goals.append(("exposed <= 10 % of compute", r["exposed_pct"] is not None and r["exposed_pct"] <= 10))
                goals.append((">= 2x PyTorch", r["vs_torch"] is not None and r["vs_torch"] >= 2))
            else:
                goals.append(("step <= 1.15x comm alone", r["default_vs_comm"] is not None and r["default_vs_comm"] <= 1.15))
                goals.append((">= 1.5x PyTorch", r["vs_torch"] is not None and r["vs_torch"] >= 1.5))
            goals.append(("default within 5 % of the best", r["default_vs_best"] <= 1.05))
            if r["auto_vs_best_fixed"] is not None:
                goals.append(("auto within 5 % of the best fixed", r["auto_vs_best_fixed"] <= 1.05))
            if r["bf16_vs_torch_fp16"] is not None:
                goals.append(("bf16 wire >= 2x PyTorch fp16 hook", r["bf16_vs_torch_fp16"] >= 2))
            lines.append(f"- {r['rate']} ({'the link keeps up' if r['keeps_up'] else 'the link is slower than compute'}): "
                         + "; ".join(f"{n} {'met' if ok else 'NOT met'}" for n, ok in goals))
        lines.append("")
        lines.append("hddp variants (s per epoch): " + "; ".join(
            f"{r['rate']}: " + ", ".join(f"{v} {t:.2f}" for v, t in r["variants"].items()) for r in d["rows"]))
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[2] == "--json":
        print(json.dumps(summarise(sys.argv[1]), indent=1))
    elif len(sys.argv) == 4:
        print(markdown(*sys.argv[1:]))
    else:
        sys.exit(__doc__)
