#!/usr/bin/env bash
# The whole training step on a model where the arithmetic matters, hddp against PyTorch DDP,
# side by side in one run: poly_train --hidden W,W --batch-size B (Linear(1,W), Tanh,
# Linear(W,W), Linear(W,1, no bias), Tanh; Adam; MSE) and bench/step/step_pytorch.py (the same
# model, batch, optimizer and threads, DDP over gloo), for each width and each layout
# ranks x threads, interleaved rounds (hddp, PyTorch, GEMM limit, hddp, ...), median reported.
# The GEMM-bound limit is the step's GEMMs alone at hddp's rate (build/bench/step_gemms, the same
# shapes and threads; with 2 ranks both run at once, as the ranks do).
#
#   bash bench/step_vs_pytorch.sh [OUTDIR]     (default bench/results/<cpu>/)
#   env: WIDTHS="256 1024 4096", LAYOUTS="1x1 2x1 1x2", BATCH=256, REPS=3, HDDP_BUILD_DIR
#        STEPS_<W>=N steps per run for width W (defaults: 300, 300, 30)
#        PRECISION=bf16: hddp's --precision bf16 against PyTorch's bf16 autocast (files
#        step_vs_pytorch_bf16.*); default float
#
# Installs what is missing (PyTorch included) and builds first. Writes OUTDIR/step_vs_pytorch.csv
# (every run) and OUTDIR/step_vs_pytorch.md (the table and the goals, met or short, with the CPU;
# bench/step/step_table.py), and prints it.
source "$(dirname "$0")/../scripts/common.sh"
HDDP_TARGETS="poly_train step_gemms" hddp_build build bench
PY=/usr/bin/python3  # Debian's python3-torch lives there, whatever python3 is first on PATH
BIN="$BUILD_DIR/drivers/poly_train" LIMIT="$BUILD_DIR/bench/step_gemms"

WIDTHS="${WIDTHS:-256 1024 4096}" LAYOUTS="${LAYOUTS:-1x1 2x1 1x2}" BATCH="${BATCH:-256}" REPS="${REPS:-3}"
steps_for() { local v="STEPS_$1"; [ -n "${!v:-}" ] && { echo "${!v}"; return; }; [ "$1" -ge 2048 ] && echo 30 || echo 300; }

hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG}"
mkdir -p "$OUT"
PRECISION="${PRECISION:-float}"
case "$PRECISION" in float) SUFFIX="" ;; bf16) SUFFIX="_bf16" ;; *) echo "PRECISION=$PRECISION: expected float or bf16" >&2; exit 2 ;; esac
CSV="$OUT/step_vs_pytorch$SUFFIX.csv" MD="$OUT/step_vs_pytorch$SUFFIX.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Ranks bound to cores when each has one thread (as a cluster job binds them); a rank with
# several threads gets them all.
mpirun_for() {  # P T
  local bind=core
  [ "$2" -gt 1 ] && bind=none
  echo "mpiexec -n $1 --oversubscribe --bind-to $bind -x OMP_NUM_THREADS=$2"
}

json_field() { "$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print(d$2)" "$1"; }

# PyTorch at its best: its BLAS is the system OpenBLAS, whose own CPU detection may pick a slow
# kernel (Prescott, SSE3, on a CPU it does not know); the fastest correct kernel is measured and
# set for the PyTorch runs alone (TORCH_OPENBLAS_CORETYPE overrides; "" keeps the detection).
# hddp's runs never see OPENBLAS_CORETYPE.
if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  core_json="$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" "$BATCH" 1024 1024)"
  echo "PyTorch's OpenBLAS kernels: $core_json" >&2
  TORCH_OPENBLAS_CORETYPE="$(json_field "$core_json" '["best"]')"
  torch_core_note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (probe: $core_json)"
else
  torch_core_note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (set by TORCH_OPENBLAS_CORETYPE)"
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

echo "width,ranks,threads,rep,impl,step_s,forward_s,backward_s,optim_s,steps" >"$CSV"

run_hddp() {  # W P T STEPS REP
  local d="$WORK/hddp-$1-$2-$3-$5"
  mkdir -p "$d"
  OMP_NUM_THREADS=$3 timeout 900 $(mpirun_for "$2" "$3") "$BIN" --hidden "$1,$1" --batch-size "$BATCH" \
    --precision "$PRECISION" --epochs "$4" --log-every "$4" --no-plot --out "$d" --stats-json "$d/stats.json" >"$d/log" 2>&1 ||
    { echo "poly_train failed (W=$1 P=$2 T=$3):" >&2; tail -5 "$d/log" >&2; exit 1; }
  "$PY" - "$d/stats.json" <<'EOF'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
r = s["per_rank"][0]
n = s["epochs"]
print(f'{s["step_s"]},{r["forward_s"]/n},{r["backward_s"]/n},{r["optim_s"]/n},{n}')
EOF
}

run_torch() {  # W P T STEPS REP
  local d="$WORK/torch-$1-$2-$3-$5" line
  mkdir -p "$d"
  local core=()
  [ -n "$TORCH_OPENBLAS_CORETYPE" ] && core=(-x "OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE")
  OMP_NUM_THREADS=$3 HDDP_TORCH_PORT=$((29600 + RANDOM % 300)) timeout 900 $(mpirun_for "$2" "$3") \
    -x HDDP_TORCH_PORT -x HDDP_TORCH_AUTOCAST="$([ "$PRECISION" = bf16 ] && echo bf16)" "${core[@]}" "$PY" "$HDDP_ROOT/bench/step/step_pytorch.py" "$1" "$BATCH" "$4" >"$d/log" 2>&1 ||
    { echo "step_pytorch.py failed (W=$1 P=$2 T=$3):" >&2; tail -5 "$d/log" >&2; exit 1; }
  line="$(grep '^{' "$d/log" | tail -1)"
  echo "$(json_field "$line" '["step_s"]'),,,,$4"
}

run_limit() {  # W P T: the slowest rank's GEMM time (P copies at once)
  local d="$WORK/limit-$1-$2-$3"
  mkdir -p "$d"
  OMP_NUM_THREADS=$3 timeout 900 $(mpirun_for "$2" "$3") "$LIMIT" --hidden "$1,$1" --batch-size "$BATCH" \
    --reps 20 >"$d/log" 2>&1 || { echo "step_gemms failed:" >&2; tail -5 "$d/log" >&2; exit 1; }
  "$PY" -c "import json,sys; print(max(json.loads(l)['gemm_s'] for l in open(sys.argv[1]) if l.startswith('{')))" "$d/log"
}

for w in $WIDTHS; do
  steps=$(steps_for "$w")
  for layout in $LAYOUTS; do
    p=${layout%x*} t=${layout#*x}
    for rep in $(seq "$REPS"); do
      echo "W=$w ${p}x$t round $rep/$REPS" >&2
      echo "$w,$p,$t,$rep,hddp,$(run_hddp "$w" "$p" "$t" "$steps" "$rep")" >>"$CSV"
      echo "$w,$p,$t,$rep,pytorch,$(run_torch "$w" "$p" "$t" "$steps" "$rep")" >>"$CSV"
      echo "$w,$p,$t,$rep,gemm_limit,$(run_limit "$w" "$p" "$t"),,,,20" >>"$CSV"
    done
  done
done

[ "$PRECISION" = bf16 ] &&
  torch_core_note="hddp --precision bf16 against PyTorch under torch.autocast(bf16) (the GEMM limit stays the float one); $torch_core_note"
"$PY" "$HDDP_ROOT/bench/step/step_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" "$BATCH" "$REPS" "$torch_core_note" "$PRECISION" >"$MD"
cat "$MD"
echo "raw: $CSV"
