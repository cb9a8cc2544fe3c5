#!/usr/bin/env bash
# gemm_bf16 against PyTorch's bf16 matmul (oneDNN: AMX or AVX512_BF16) on one thread, in REPS
# interleaved rounds (bench_gemm's rows, then bench/gemm/matmul_pytorch.py, then again): the
# shapes 1024^3, 2048^3, (256, 1024, 1024) as NN and the CNN's conv2 forward (12544, 64, 288) as
# NT, hddp with bf16 inputs (/b/, what torch.mm takes) and with float inputs rounded as they are
# packed (/h/, what a layer in bf16 runs), beside the AMX probe (bench_peak) of the same round.
#
#   bash bench/gemm/gemm_bf16_vs_pytorch.sh [OUTDIR]   (default bench/results/<cpu>/bf16/)
#   env: REPS=3
# Writes OUTDIR/gemm_bf16_vs_pytorch.jsonl (every measurement: impl, input, op, M, N, K, gflops,
# rep) and OUTDIR/gemm_bf16_vs_pytorch.md (bench/gemm/gemm_bf16_table.py), and prints it.
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS="bench_gemm bench_peak" hddp_build build bench time
PY=/usr/bin/python3
REPS="${REPS:-3}"
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/bf16}"
mkdir -p "$OUT"
JL="$OUT/gemm_bf16_vs_pytorch.jsonl" MD="$OUT/gemm_bf16_vs_pytorch.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
: >"$JL"
filter='gemm/hddp-bf16/(b|h)/(NN/(1024x1024x1024|2048x2048x2048|256x1024x1024)/|NT/12544x64x288/conv2_fwd)'
for rep in $(seq "$REPS"); do
  echo "round $rep/$REPS: hddp" >&2
  "$BUILD_DIR/bench/bench_gemm" --benchmark_filter="$filter" --benchmark_min_time=0.5 \
    --benchmark_format=json >"$WORK/hddp.json" 2>/dev/null || exit 1
  "$PY" - "$WORK/hddp.json" "$rep" >>"$JL" <<'PYEOF'
import json, re, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    m = re.match(r"gemm/hddp-bf16/(b|h)/(NN|NT)/(\d+)x(\d+)x(\d+)", b["name"])
    print(json.dumps({"impl": "hddp", "input": {"b": "bf16", "h": "float"}[m[1]], "op": m[2], "M": int(m[3]),
                      "N": int(m[4]), "K": int(m[5]), "gflops": round(b["GFLOPS"] / 1e9 if b["GFLOPS"] > 1e6 else b["GFLOPS"], 1),
                      "rep": int(sys.argv[2])}))
PYEOF
  echo "round $rep/$REPS: PyTorch" >&2
  "$PY" "$HDDP_ROOT/bench/gemm/matmul_pytorch.py" NN 1024 1024 1024 NN 2048 2048 2048 NN 256 1024 1024 NT 12544 64 288 \
    | "$PY" -c 'import json,sys
for l in sys.stdin:
    e = json.loads(l)
    if e["dtype"] == "bf16":
        print(json.dumps({"impl": "pytorch", "input": "bf16", "op": e["op"], "M": e["M"], "N": e["N"], "K": e["K"], "gflops": e["gflops"], "rep": int(sys.argv[1])}))' "$rep" >>"$JL"
  echo "round $rep/$REPS: AMX probe" >&2
  "$BUILD_DIR/bench/bench_peak" 2>/dev/null | awk -v r="$rep" -F'|' '/amx-bf16/ { gsub(/ /, "", $5); printf "{\"impl\": \"probe\", \"input\": \"bf16\", \"op\": \"-\", \"M\": 0, \"N\": 0, \"K\": 0, \"gflops\": %s, \"rep\": %d}\n", $5, r; exit }' >>"$JL"
done
kernel="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["context"].get("hddp_bf16_kernel", "?"))' "$WORK/hddp.json")"
"$PY" "$HDDP_ROOT/bench/gemm/gemm_bf16_table.py" "$JL" "$CPU_MODEL ($CPU_FM)" "gemm_bf16's set: $kernel; $REPS round(s)" >"$MD"
cat "$MD"
echo "raw: $JL"
