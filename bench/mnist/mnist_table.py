#!/usr/bin/env python3
"""The table and the goals of bench/mnist_vs_pytorch.sh from its raw CSV (one row per epoch of
every run). Usage: mnist_table.py CSV "CPU" "NOTE" EPOCHS BATCH WIDTH REPS -> markdown on stdout.
Goals, each printed as met or short: >= 3x PyTorch per epoch and to 87 % test
accuracy, the accuracy after the last epoch within 0.5 point, peak RSS per rank <= 1/4 of PyTorch's.
"""
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cpu, note, epochs, batch, width, reps = sys.argv[2:8]
print(f"CPU: {cpu}; MLP 784-{width}-{width}-10, batch {batch} per rank, {epochs} epochs, 1 thread per rank;"
      f" median of {reps} round(s).\n{note}\n")
print("| ranks | implementation | s per epoch | time to 87 % (s) | epoch reaching 87 % | accuracy after epoch 1 | "
      f"after {epochs} | peak RSS per rank (MiB) |")
print("|---|---|---|---|---|---|---|---|")
summary = {}
for p in sorted({r["ranks"] for r in rows}, key=int):
    for impl in ("hddp", "pytorch"):
        runs = {}
        for r in rows:
            if r["ranks"] == p and r["impl"] == impl:
                runs.setdefault(r["rep"], []).append(r)
        per_epoch, to87, ep87, acc1, accN, rss = [], [], [], [], [], []
        for rs in runs.values():
            rs.sort(key=lambda r: int(r["epoch"]))
            per_epoch.append(statistics.mean(float(r["train_s"]) for r in rs))
            t = 0.0
            hit = None
            for r in rs:
                t += float(r["train_s"])
                if hit is None and float(r["test_accuracy"]) >= 0.87:
                    hit = (t, int(r["epoch"]))
            if hit:
                to87.append(hit[0]), ep87.append(hit[1])
            acc1.append(float(rs[0]["test_accuracy"])), accN.append(float(rs[-1]["test_accuracy"]))
            rss.append(float(rs[0]["rss_mib"]))
        m = statistics.median
        summary[(p, impl)] = (m(per_epoch), m(to87) if to87 else None, m(accN), m(rss))
        print(f"| {p} | {'hddp mnist_train' if impl == 'hddp' else 'PyTorch 1.13 DDP (gloo)'} | {m(per_epoch):.3f} | "
              f"{m(to87):.2f} | {m(ep87)} | {100*m(acc1):.2f} % | {100*m(accN):.2f} % | {m(rss):.0f} |"
              if to87 else
              f"| {p} | {impl} | {m(per_epoch):.3f} | not reached | - | {100*m(acc1):.2f} % | {100*m(accN):.2f} % | {m(rss):.0f} |")
print("\nGoals:\n")
for p in sorted({k[0] for k in summary}, key=int):
    h, t = summary[(p, "hddp")], summary[(p, "pytorch")]
    sp = t[0] / h[0]
    print(f"- {p} rank(s): per epoch {sp:.2f}x PyTorch (goal >= 3x) - {'met' if sp >= 3 else 'SHORT'}")
    if h[1] and t[1]:
        s87 = t[1] / h[1]
        print(f"- {p} rank(s): time to 87 % {s87:.2f}x shorter (goal >= 3x) - {'met' if s87 >= 3 else 'SHORT'}")
    else:
        print(f"- {p} rank(s): time to 87 %: not reached by " + " and ".join(n for n, v in (("hddp", h[1]), ("PyTorch", t[1])) if not v))
    d = 100 * (h[2] - t[2])
    print(f"- {p} rank(s): accuracy after the last epoch {100*h[2]:.2f} % vs {100*t[2]:.2f} % ({d:+.2f} points; goal within 0.5)"
          f" - {'met' if abs(d) <= 0.5 or d > 0 else 'SHORT'}")
    r = t[3] / h[3]
    print(f"- {p} rank(s): peak RSS {h[3]:.0f} vs {t[3]:.0f} MiB ({r:.1f}x less; goal >= 4x) - {'met' if r >= 4 else 'SHORT'}")
