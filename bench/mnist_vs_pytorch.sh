#!/usr/bin/env bash
# The Fashion-MNIST classifier, hddp's mnist_train against PyTorch DDP (bench/mnist/mnist_pytorch.py)
# side by side in one run: the same data, MLP 784-W-W-10 (ReLU), softmax cross-entropy, Adam
# 1e-3, batch B per rank, a shuffle sharded over the ranks each epoch; 1 and 2 ranks x 1 thread,
# ranks bound to cores; REPS interleaved rounds (hddp, PyTorch, hddp, ...), median reported.
# Seconds per epoch (the step loop), time to 87 % test accuracy (training seconds summed up to
# the epoch that first reaches it), accuracy after EPOCHS, peak RSS per rank.
#
#   bash bench/mnist_vs_pytorch.sh [OUTDIR]     (default bench/results/<cpu>/)
#   env: EPOCHS=10, RANKS="1 2", BATCH=64, WIDTH=256, REPS=1, DATA=/usr/share/datasets/fashion-mnist
#
# Installs what is missing (PyTorch, the data set) and builds first; PyTorch's OpenBLAS runs the
# fastest correct kernel for this CPU (bench/step/openblas_core.py; TORCH_OPENBLAS_CORETYPE
# overrides). Writes OUTDIR/mnist_vs_pytorch.csv (every epoch of every run) and
# OUTDIR/mnist_vs_pytorch.md (the table), and prints the table.
source "$(dirname "$0")/../scripts/common.sh"
hddp_build python3-torch time
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/mnist_train"
EPOCHS="${EPOCHS:-10}" RANKS="${RANKS:-1 2}" BATCH="${BATCH:-64}" WIDTH="${WIDTH:-256}" REPS="${REPS:-1}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"

hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG}"
mkdir -p "$OUT"
CSV="$OUT/mnist_vs_pytorch.csv" MD="$OUT/mnist_vs_pytorch.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  core_json="$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" "$BATCH" "$WIDTH" 784)"
  TORCH_OPENBLAS_CORETYPE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' "$core_json")"
  note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (probe: $core_json)"
else
  note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (TORCH_OPENBLAS_CORETYPE)"
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS=1

echo "impl,ranks,rep,epoch,train_s,elapsed_train_s,test_accuracy,test_loss,rss_mib" >"$CSV"
for rep in $(seq "$REPS"); do
  for p in $RANKS; do
    d="$WORK/hddp-$p-$rep"
    mkdir -p "$d"
    echo "hddp, $p rank(s), round $rep/$REPS" >&2
    timeout 1800 mpiexec -n "$p" --bind-to core -x OMP_NUM_THREADS /usr/bin/time -f 'RSS_KB %M' "$BIN" \
      --data "$DATA" --epochs "$EPOCHS" --batch-size "$BATCH" --hidden "$WIDTH,$WIDTH" --out "$d" --no-plot \
      --stats-json "$d/stats.json" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/stats.json" "$p" "$rep" "$rss" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "epoch":
        print(f'hddp,{sys.argv[2]},{sys.argv[3]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[4]}')
EOF
    d="$WORK/torch-$p-$rep"
    mkdir -p "$d"
    echo "PyTorch, $p rank(s), round $rep/$REPS" >&2
    core=()
    [ -n "$TORCH_OPENBLAS_CORETYPE" ] && core=(-x "OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE")
    HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) timeout 1800 mpiexec -n "$p" --bind-to core -x OMP_NUM_THREADS \
      -x HDDP_TORCH_PORT "${core[@]}" /usr/bin/time -f 'RSS_KB %M' "$PY" "$HDDP_ROOT/bench/mnist/mnist_pytorch.py" \
      "$DATA" "$EPOCHS" "$BATCH" "$WIDTH" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/log" "$p" "$rep" "$rss" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e = json.loads(l)
        print(f'pytorch,{sys.argv[2]},{sys.argv[3]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[4]}')
EOF
  done
done

"$PY" - "$CSV" "$CPU_MODEL ($CPU_FM)" "$note" "$EPOCHS" "$BATCH" "$WIDTH" "$REPS" >"$MD" <<'EOF'
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
EOF
cat "$MD"
echo "raw: $CSV"
