#!/usr/bin/env python3
"""The CNN table and its goals from bench/mnist_vs_pytorch.sh's raw CSV (MODEL=cnn: one row per
epoch of every run, layouts ranks x threads). Usage: cnn_table.py CSV "CPU" "NOTE" EPOCHS BATCH REPS
-> markdown on stdout.

The reference accuracy is PyTorch's after the last epoch at 2 ranks x 1 thread (the median over
rounds); "time to it" is the training seconds summed up to the first epoch at or above it.
Goals, each printed as met or short: at 2 x 1 and 1 x 2, >= 2x PyTorch per epoch, the accuracy
after epochs 1, 2 and 5 within 0.5 point of PyTorch's (or better), peak RSS per rank <= 1/3 of
PyTorch's; at 2 x 1, PyTorch's last-epoch accuracy reached in under half PyTorch's time.
"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
cpu, note, epochs, batch, reps = sys.argv[2:7]
m = statistics.median
layouts = sorted({(int(r["ranks"]), int(r["threads"])) for r in rows}, key=lambda l: (l[0] * l[1], -l[0]))


def runs(layout, impl):
    out = {}
    for r in rows:
        if (int(r["ranks"]), int(r["threads"])) == layout and r["impl"] == impl:
            out.setdefault(r["rep"], []).append(r)
    return [sorted(v, key=lambda r: int(r["epoch"])) for v in out.values()]


def acc_after(rs, e):
    return m(float(run[e - 1]["test_accuracy"]) for run in rs if len(run) >= e)


def time_to(rs, target):
    hits = []
    for run in rs:
        t = 0.0
        for r in run:
            t += float(r["train_s"])
            if float(r["test_accuracy"]) >= target:
                hits.append((t, int(r["epoch"])))
                break
    return (m(h[0] for h in hits), m(h[1] for h in hits)) if len(hits) == len(rs) else (None, None)


ref_layout = (2, 1) if (2, 1) in layouts else layouts[-1]
target = acc_after(runs(ref_layout, "pytorch"), int(epochs))
marks = [e for e in (1, 2, 5, 10) if e <= int(epochs)]
print(f"CPU: {cpu}; CNN Conv2d(1,32,3,p1) ReLU MaxPool2 Conv2d(32,64,3,p1) ReLU MaxPool2 Flatten "
      f"Linear(3136,128) ReLU Linear(128,10), Adam 1e-3, batch {batch} per rank, {epochs} epochs; "
      f"median of {reps} round(s).\n{note}\n")
print(f"Reference accuracy: PyTorch's after epoch {epochs} at {ref_layout[0]} x {ref_layout[1]}, "
      f"{100 * target:.2f} %.\n")
print("| ranks x threads | implementation | s per epoch | time to the reference (s) | epoch reaching it | "
      + " | ".join(f"accuracy after {e}" for e in marks) + " | peak RSS per rank (MiB) |")
print("|---" * (5 + len(marks) + 1) + "|")
summary = {}
for layout in layouts:
    for impl in ("hddp", "pytorch"):
        rs = runs(layout, impl)
        if not rs:
            continue
        per_epoch = m(statistics.mean(float(r["train_s"]) for r in run) for run in rs)
        t, ep = time_to(rs, target)
        accs = {e: acc_after(rs, e) for e in marks}
        rss = m(float(run[0]["rss_mib"]) for run in rs)
        summary[(layout, impl)] = (per_epoch, t, accs, rss)
        name = "hddp mnist_train --model cnn" if impl == "hddp" else "PyTorch 1.13 DDP (gloo, oneDNN)"
        print(f"| {layout[0]} x {layout[1]} | {name} | {per_epoch:.2f} | {t:.1f} | {ep} | " if t is not None
              else f"| {layout[0]} x {layout[1]} | {name} | {per_epoch:.2f} | not reached | - | ", end="")
        print(" | ".join(f"{100 * a:.2f} %" for a in accs.values()) + f" | {rss:.0f} |")

print("\nGoals:")
for layout in ((2, 1), (1, 2)):
    if (layout, "hddp") not in summary or (layout, "pytorch") not in summary:
        continue
    h, p = summary[(layout, "hddp")], summary[(layout, "pytorch")]
    ratio = p[0] / h[0]
    print(f"- {layout[0]} x {layout[1]}: {ratio:.2f}x PyTorch per epoch (goal >= 2x): {'met' if ratio >= 2 else 'short'}")
    for e in (1, 2, 5):
        if e in h[2]:
            d = 100 * (h[2][e] - p[2][e])
            print(f"- {layout[0]} x {layout[1]}: accuracy after epoch {e} {d:+.2f} points against PyTorch "
                  f"(goal >= -0.5): {'met' if d >= -0.5 else 'short'}")
    share = h[3] / p[3]
    print(f"- {layout[0]} x {layout[1]}: peak RSS {share:.2f} of PyTorch's (goal <= 1/3): {'met' if share <= 1 / 3 else 'short'}")
if (ref_layout, "hddp") in summary:
    h, p = summary[(ref_layout, "hddp")], summary[(ref_layout, "pytorch")]
    if h[1] is not None and p[1] is not None:
        share = h[1] / p[1]
        print(f"- {ref_layout[0]} x {ref_layout[1]}: PyTorch's {epochs}-epoch accuracy reached in {share:.2f} of its "
              f"time (goal < 0.5): {'met' if share < 0.5 else 'short'}")
    else:
        print(f"- {ref_layout[0]} x {ref_layout[1]}: PyTorch's {epochs}-epoch accuracy not reached by hddp in {epochs} epochs: short")
