#!/usr/bin/env bash
# bench/at_scale: how a training step scales to 16-1024 nodes, simulated with SimGrid SMPI and
# checked against what can be measured here. README.md beside this file says what it models.
#
#   bash bench/at_scale/run.sh [OUT_DIR]        (default: build/at-scale)
#
# Parts (PARTS, default "tables replay check validate horovod plots"):
#   tables    allreduce table t(bytes, P) from at_scale_sim on a generated fat-tree, P in RANKS
#   replay    at_scale_replay for four models: tutorial (measured here), wide MLP, ResNet-50-like
#             and VGG-16-like (flop profiles at NODE_GFLOPS) -> replay.csv (+ best cap per P)
#   check     the overlapped step inside SMPI (at_scale_sim step) at CHECK_RANKS vs the replay
#   validate  the communication model against the real reducer here, 2 and 3 ranks, several caps
#             (comm_check.sh: at_scale_comm_check; fails when the replay is 25 % off)
#   horovod   ResNet-50 and VGG-16 at HOROVOD_RANKS over 25 Gbit/s links (Horovod's network)
#   plots     PDFs: step and exposed communication, efficiency and best cap vs nodes
# Environment: RANKS ("2 4 8 ... 1024"), CHECK_RANKS ("16 64 256 1024"), LINK_GBPS (100),
# LINK_LAT_US (0.25 per link; 4 links across the spine), BW_FACTOR (0.97), LAT_FACTOR (1),
# NODE_GFLOPS (560 = 16 cores x 50 GFLOP/s x 0.7), NODE_MEM_GBPS (100: the optimizer's memory
# bandwidth on one node), BATCH_WIDE (256), POLL_US (50),
# REDUCE_GBPS (measured here by at_scale_measure unless set), HDDP_BUILD_DIR (build).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${HDDP_BUILD_DIR:-$ROOT/build}"
OUT="${1:-$BUILD/at-scale}"
BIN="$BUILD/bench"
PARTS="${PARTS:-tables replay check validate horovod plots}"
RANKS="${RANKS:-2 4 8 16 32 64 128 256 512 1024}"
CHECK_RANKS="${CHECK_RANKS:-16 64 256 1024}"
LINK_GBPS="${LINK_GBPS:-100}" LINK_LAT_US="${LINK_LAT_US:-0.25}"
BW_FACTOR="${BW_FACTOR:-0.97}" LAT_FACTOR="${LAT_FACTOR:-1}"
NODE_GFLOPS="${NODE_GFLOPS:-560}" NODE_MEM_GBPS="${NODE_MEM_GBPS:-100}" BATCH_WIDE="${BATCH_WIDE:-256}" POLL_US="${POLL_US:-50}"
HOROVOD_RANKS="${HOROVOD_RANKS:-128 512}"
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

source "$ROOT/bench/at_scale/lib.sh"
for b in at_scale_replay at_scale_measure at_scale_mpi; do
  [ -x "$BIN/$b" ] || die "no $BIN/$b: build first (cmake --build $BUILD, or bash scripts/test.sh)"
done
SIM="$BIN/at_scale_sim"
command -v smpirun >/dev/null && [ -x "$SIM" ] \
  || die "no SimGrid SMPI ($SIM or smpirun missing): apt-get install libsimgrid-dev, then rebuild (cmake -S . -B $BUILD)"
for p in $RANKS $CHECK_RANKS; do
  case $p in 2|4|8|16|32|64|128|256|512|1024|2048|4096) ;; *) die "rank count $p: powers of two from 2 to 4096 only";; esac
done
mkdir -p "$OUT"/{platforms,tables,logs}

# The compute inputs: reduction bandwidth and the tutorial's per-layer times measured here
# (1 thread), the wide MLP as flop, the published models generated.
profiles() {
  [ -f "$OUT/profiles/measured.toml" ] && return
  mkdir -p "$OUT/profiles"
  OMP_NUM_THREADS=1 "$BIN/at_scale_measure" --model tutorial --batch 32 --reps 200 \
    --profile-out "$OUT/profiles/tutorial.csv" --config-out "$OUT/profiles/measured.toml" >&2
  "$BIN/at_scale_measure" --model wide --batch "$BATCH_WIDE" --flop --profile-out "$OUT/profiles/wide.csv" >&2
  python3 "$ROOT/bench/at_scale/profiles.py" "$OUT/profiles" 32
}
reduce_gbps() { echo "${REDUCE_GBPS:-$(sed -n 's/^reduce-gbps = //p' "$OUT/profiles/measured.toml")}"; }
tutorial_other_ms() { sed -n 's/^other-ms = //p' "$OUT/profiles/measured.toml"; }

# table NAME GBPS "RANKS": one allreduce table per P, joined into tables/NAME.csv
table() {
  local name=$1 gbps=$2 ranks=$3 p first=1
  for p in $ranks; do
    local f="$OUT/tables/$name-$p.csv"
    if [ ! -s "$f" ]; then
      log "allreduce table, $p simulated nodes, ${gbps} Gbit/s"
      smpi "$p" "$(platform "$p" "$gbps" "$LINK_LAT_US")" allreduce --min-kib 0.0625 --max-mib 64 \
        --reduce-gbps "$(reduce_gbps)" --out "$f.tmp" >"$OUT/logs/table-$name-$p.log" 2>&1 \
        || { tail -5 "$OUT/logs/table-$name-$p.log" >&2; die "the SMPI allreduce at $p ranks failed"; }
      mv "$f.tmp" "$f"
    fi
    if [ $first = 1 ]; then cat "$f"; first=0; else tail -n +2 "$f"; fi
  done >"$OUT/tables/$name.csv"
}

# replay MODEL EXTRA_ARGS...: at_scale_replay over every P of the 100 Gb/s table
replay() {
  local model=$1; shift
  "$BIN/at_scale_replay" --profile "$OUT/profiles/$model.csv" --table "$OUT/tables/allreduce.csv" \
    --poll-us "$POLL_US" --reduce-gbps "$(reduce_gbps)" "$@" --out "$OUT/replay-$model.csv" \
    2>"$OUT/logs/replay-$model.txt" || { cat "$OUT/logs/replay-$model.txt" >&2; die "replay of $model failed"; }
  cat "$OUT/logs/replay-$model.txt" >&2
}
# The rest of a step (loss + optimizer) of a flop model: Adam's memory traffic, 28 B per
# parameter (reads p, g, m, v; writes p, m, v) at NODE_MEM_GBPS; the loss is negligible beside it.
adam_ms() {
  python3 - "$OUT/profiles/$1.csv" "$NODE_MEM_GBPS" <<'PY'
import csv, sys
n = sum(sum(int(x) for x in r["params"].split("+")) for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
print(f"{n * 28 / (float(sys.argv[2]) * 1e9) * 1e3:.6f}")
PY
}
model_args() {  # how each model's compute becomes seconds on one node
  case $1 in
    tutorial) echo "--other-ms $(tutorial_other_ms)" ;;
    *) echo "--node-gflops $NODE_GFLOPS --other-ms $(adam_ms "$1")" ;;
  esac
}

profiles
ALL_RANKS=$(printf '%s\n' $RANKS $CHECK_RANKS | sort -nu | tr '\n' ' ')
for part in $PARTS; do
  case $part in
    tables) table allreduce "$LINK_GBPS" "$ALL_RANKS" ;;
    replay)
      for m in tutorial wide resnet50 vgg16; do replay "$m" $(model_args "$m"); done
      { head -1 "$OUT/replay-wide.csv"; for m in tutorial wide resnet50 vgg16; do tail -n +2 "$OUT/replay-$m.csv"; done; } \
        >"$OUT/replay.csv" ;;
    check)
      # The overlapped step inside SMPI (the libnbc-like schedule over the library's buckets)
      # against the replay at the same P, cap 25 MiB: check.csv holds both rows and the ratio.
      echo "model,ranks,replay_step_ms,smpi_step_ms,replay_exposed_ms,smpi_exposed_ms,step_ratio,sim_seconds" \
        >"$OUT/check.csv"
      for m in wide resnet50; do
        for p in $CHECK_RANKS; do
          log "in-simulator step: $m at $p nodes"
          t0=$(date +%s%N)
          smpi "$p" "$(platform "$p" "$LINK_GBPS" "$LINK_LAT_US")" step --profile "$OUT/profiles/$m.csv" \
            $(model_args "$m") --poll-us "$POLL_US" --reduce-gbps "$(reduce_gbps)" --out "$OUT/logs/step-$m-$p.csv" \
            >"$OUT/logs/step-$m-$p.log" 2>&1 || { tail -5 "$OUT/logs/step-$m-$p.log" >&2; die "SMPI step $m $p failed"; }
          t1=$(date +%s%N)
          python3 - "$OUT/replay-$m.csv" "$OUT/logs/step-$m-$p.csv" "$m" "$p" "$(((t1 - t0) / 1000000))" \
            >>"$OUT/check.csv" <<'PY'
import csv, sys
rep = [r for r in csv.DictReader(open(sys.argv[1])) if r["ranks"] == sys.argv[4] and r["mode"] == "overlapped"][0]
sim = list(csv.DictReader(open(sys.argv[2])))[0]
a, b = float(rep["step_ms"]), float(sim["step_ms"])
print(f"{sys.argv[3]},{sys.argv[4]},{a:.4f},{b:.4f},{float(rep['exposed_ms']):.4f},{float(sim['exposed_ms']):.4f},{a / b:.4f},{float(sys.argv[5]) / 1e3:.1f}")
PY
        done
      done
      column -s, -t "$OUT/check.csv" >&2 ;;
    validate) bash "$ROOT/bench/at_scale/comm_check.sh" ;;  # keeps its data in bench/results/<cpu>/at_scale
    horovod)
      # Horovod's published setting: 128 servers x 4 Pascal GPUs over 25 Gbit/s; a node here is a
      # server (its 4 GPUs reduce locally first) whose step takes one GPU's time for 64 images:
      # HOROVOD_COMPUTE_MS, from tf_cnn_benchmarks' P100 throughput (ResNet-50 ~219 img/s,
      # VGG-16 ~139 img/s). The ordering, not the absolute figures, is what can be compared.
      table horovod25 25 "$HOROVOD_RANKS"
      for m in resnet50 vgg16; do
        ms=$(echo "${HOROVOD_COMPUTE_MS:-resnet50:292 vgg16:460}" | tr ' ' '\n' | sed -n "s/^$m://p")
        "$BIN/at_scale_replay" --profile "$OUT/profiles/$m.csv" --compute-ms "$ms" \
          --table "$OUT/tables/horovod25.csv" --poll-us "$POLL_US" --reduce-gbps "$(reduce_gbps)" --no-best-cap \
          --out "$OUT/horovod-$m.csv"
      done ;;
    plots) bash "$ROOT/bench/at_scale/plots.sh" "$OUT" ;;
    *) die "unknown part '$part' (tables replay check validate horovod plots)" ;;
  esac
done
log "done: $OUT"
