#!/usr/bin/env python3
"""The CNN table and its goals from bench/mnist_vs_pytorch.sh's raw CSV (MODEL=cnn: one row per
epoch of every run, layouts ranks x threads; round r seeded with r on both sides). Usage:
cnn_table.py CSV "CPU" "NOTE" EPOCHS BATCH REPS [GOAL] -> markdown on stdout.

Times and memory are the median over the rounds: per epoch, each run's mean training seconds
per epoch; per run, the whole run's wall-clock seconds (the CSV's run_s: start-up, data loading
and evaluation included; older CSVs without it get neither the column nor its goal). Accuracy
is the mean over the rounds (seeds). The reference accuracy is PyTorch's after the last epoch
at 2 ranks x 1 thread (the mean over rounds); "time to it" is the training seconds summed up to
the first epoch at or above it (the median over rounds, a round short of it counting as never).
Goals, each printed as met or short, at 2 x 1 and 1 x 2: >= 2.5x PyTorch per epoch and >= 2.5x
per whole run; the test accuracy after the last epoch, the mean over the rounds, within 0.5
point of PyTorch's mean (or better); peak RSS per rank <= 1/5 of PyTorch's. GOAL (default 2.5)
sets the speed goal: a bf16 run against PyTorch's bf16 autocast passes 1.5 on a CPU with
AVX512_BF16 and no AMX, 2 with AMX.
"""
import csv
import statistics
import sys

reader = csv.DictReader(open(sys.argv[1]))
rows = list(reader)
cpu, note, epochs, batch, reps = sys.argv[2:7]
goal = float(sys.argv[7]) if len(sys.argv) > 7 else 2.5
m = statistics.median
mean = statistics.mean
INF = float("inf")
has_run_s = "run_s" in (reader.fieldnames or []) and all(r.get("run_s") for r in rows)
layouts = sorted({(int(r["ranks"]), int(r["threads"])) for r in rows}, key=lambda l: (l[0] * l[1], -l[0]))


def runs(layout, impl):
    out = {}
    for r in rows:
        if (int(r["ranks"]), int(r["threads"])) == layout and r["impl"] == impl:
            out.setdefault(r["rep"], []).append(r)
    return [sorted(v, key=lambda r: int(r["epoch"])) for v in out.values()]


def acc_after(rs, e):
    """The mean over the rounds of the test accuracy after epoch e, and how many rounds got there."""
    accs = [float(run[e - 1]["test_accuracy"]) for run in rs if len(run) >= e]
    return mean(accs), len(accs)


def time_to(rs, target):
    """The median over the rounds of the training seconds to the first epoch at or above target,
    and of that epoch; a round that never gets there counts as infinitely late (None: the median
    round did not get there)."""
    hits = []
    for run in rs:
        t, hit = 0.0, (INF, INF)
        for r in run:
            t += float(r["train_s"])
            if float(r["test_accuracy"]) >= target:
                hit = (t, int(r["epoch"]))
                break
        hits.append(hit)
    t, ep = m(h[0] for h in hits), m(h[1] for h in hits)
    return (t, ep) if t < INF else (None, None)


ref_layout = (2, 1) if (2, 1) in layouts else layouts[-1]
target = acc_after(runs(ref_layout, "pytorch"), int(epochs))[0]
marks = [e for e in (1, 2, 3, 5, 10) if e <= int(epochs)]
seeds = (" (seed 1)" if reps == "1" else f" (seeds 1..{reps})") if has_run_s else ""
print(f"CPU: {cpu}; CNN Conv2d(1,32,3,p1) ReLU MaxPool2 Conv2d(32,64,3,p1) ReLU MaxPool2 Flatten "
      f"Linear(3136,128) ReLU Linear(128,10), Adam 1e-3, batch {batch} per rank, {epochs} epochs; "
      f"median of {reps} round(s){seeds}; accuracy: mean over the rounds.\n{note}\n")
print(f"Reference accuracy: PyTorch's after epoch {epochs} at {ref_layout[0]} x {ref_layout[1]}, "
      f"{100 * target:.2f} %.\n")
print("| ranks x threads | implementation | s per epoch | " + ("s per run | " if has_run_s else "")
      + "time to the reference (s) | epoch reaching it | "
      + " | ".join(f"accuracy after {e}" for e in marks) + " | peak RSS per rank (MiB) |")
print("|---" * (5 + has_run_s + len(marks) + 1) + "|")
summary = {}
for layout in layouts:
    for impl in ("hddp", "pytorch"):
        rs = runs(layout, impl)
        if not rs:
            continue
        per_epoch = m(mean(float(r["train_s"]) for r in run) for run in rs)
        per_run = m(float(run[0]["run_s"]) for run in rs) if has_run_s else None
        t, ep = time_to(rs, target)
        accs = {e: acc_after(rs, e)[0] for e in marks}
        rss = m(float(run[0]["rss_mib"]) for run in rs)
        summary[(layout, impl)] = (per_epoch, per_run, accs, rss, acc_after(rs, int(epochs)))
        name = "hddp mnist_train --model cnn" if impl == "hddp" else "PyTorch 1.13 DDP (gloo, oneDNN)"
        print(f"| {layout[0]} x {layout[1]} | {name} | {per_epoch:.2f} | "
              + (f"{per_run:.1f} | " if has_run_s else "")
              + (f"{t:.1f} | {ep:g} | " if t is not None else "not reached | - | ")
              + " | ".join(f"{100 * a:.2f} %" for a in accs.values()) + f" | {rss:.0f} |")

print("\nGoals:")
for layout in ((2, 1), (1, 2)):
    if (layout, "hddp") not in summary or (layout, "pytorch") not in summary:
        continue
    h, p = summary[(layout, "hddp")], summary[(layout, "pytorch")]
    at = f"- {layout[0]} x {layout[1]}:"
    ratio = p[0] / h[0]
    print(f"{at} {ratio:.2f}x PyTorch per epoch (goal >= {goal:g}x): {'met' if ratio >= goal else 'short'}")
    if has_run_s:
        ratio = p[1] / h[1]
        print(f"{at} {ratio:.2f}x PyTorch per run (goal >= {goal:g}x): {'met' if ratio >= goal else 'short'}")
    (ha, hn), (pa, pn) = h[4], p[4]
    d = round(100 * (ha - pa), 9)
    over = f"{hn} round(s)" if hn == pn else f"{hn} (hddp) and {pn} (PyTorch) rounds"
    print(f"{at} accuracy after epoch {epochs}, mean over {over}, {d:+.2f} points against PyTorch "
          f"(goal >= -0.5): {'met' if d >= -0.5 else 'short'}")
    share = h[3] / p[3]
    print(f"{at} peak RSS {share:.2f} of PyTorch's (goal <= 1/5): {'met' if share <= 1 / 5 else 'short'}")
