#!/usr/bin/env bash
# Leak checks of the drivers, in the sanitizer build only. The end-to-end tests start the
# drivers dozens of times with leak checks off (a full stack per allocation costs about 2 s of
# CPU per rank started); here each driver's paths run once with them on, on 2 ranks: training
# with a checkpoint, the resume, the export, a NaN stop (exit 3) and a refusal (exit 2); gpt_train
# also a stop on a signal (exit 75) and its sample.
# A leak changes a rank's exit code (LeakSanitizer: 23; mpiexec then 1), so every exit code is
# checked exactly; a leak added to poly_train's main fails all four of its runs.
# Usage: test_driver_leaks.sh <poly_train> <mnist_train> <mpiexec> <scratch dir in the build tree> [<gpt_train>]
set -uo pipefail
POLY=$1 MNIST=$2 MPIEXEC=$3 WORK=$4 GPT=${5:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 240 -n 2)
rm -rf "$WORK" && mkdir -p "$WORK"
DATA=$WORK/fmnist  # 256 training and 128 test images of Fashion-MNIST
python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" /usr/share/datasets/fashion-mnist "$DATA" 256 128 || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect NAME RC CMD...: CMD exits with RC exactly; its output kept in $WORK/NAME.log.
expect() {
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, expected $want: $(grep -m3 -A8 'Sanitizer' "$WORK/$name.log" || tail -15 "$WORK/$name.log")"
  else
    echo "ok: $name (exit $rc)"
  fi
}

P=("$POLY" --epochs 200 --no-plot --checkpoint "$WORK/poly.ck" --checkpoint-every 100)
expect poly-train 0 "${MPI[@]}" "${P[@]}" --out "$WORK/poly"
expect poly-resume 0 "${MPI[@]}" "${P[@]}" --epochs 300 --resume --out "$WORK/poly" --export "$WORK/poly.st"
expect poly-nan 3 "${MPI[@]}" "$POLY" --epochs 50 --no-plot --out "$WORK/poly-nan" --debug-inject-nan 10
expect poly-bad-init 2 "${MPI[@]}" "$POLY" --epochs 5 --no-plot --out "$WORK/poly-bad" --init "$WORK/poly.ck"

M=("$MNIST" --data "$DATA" --limit-train 256 --limit-test 128 --batch-size 32 --no-plot)
expect mnist-cnn 0 "${MPI[@]}" "${M[@]}" --model cnn --epochs 1 --out "$WORK/mnist" --checkpoint "$WORK/mnist.ck" \
  --export "$WORK/mnist.st"
expect mnist-resume 0 "${MPI[@]}" "${M[@]}" --model cnn --epochs 2 --out "$WORK/mnist" --checkpoint "$WORK/mnist.ck" --resume
expect mnist-other-model 2 "${MPI[@]}" "${M[@]}" --epochs 3 --out "$WORK/mnist" --checkpoint "$WORK/mnist.ck" --resume

if [ -n "$GPT" ]; then
  G=("$GPT" --layers 1 --heads 2 --dim 32 --context 32 --batch-size 4 --warmup 1 --no-plot --eval-windows 8 --check-every 1)
  expect gpt-stop 75 "${MPI[@]}" "${G[@]}" --steps 8 --eval-every 4 --sample-tokens 0 --out "$WORK/gpt" \
    --checkpoint "$WORK/gpt.ck" --debug-stop-after 4
  expect gpt-resume 0 "${MPI[@]}" "${G[@]}" --steps 8 --eval-every 4 --sample-tokens 16 --out "$WORK/gpt" \
    --checkpoint "$WORK/gpt.ck" --resume --export "$WORK/gpt.st"
  expect gpt-nan 3 "${MPI[@]}" "${G[@]}" --steps 4 --eval-every 4 --out "$WORK/gpt-nan" --debug-inject-nan 2
  head -c 40 /dev/zero >"$WORK/bad.tok"
  expect gpt-bad-tokens 2 "${MPI[@]}" "${G[@]}" --steps 4 --eval-every 4 --out "$WORK/gpt-bad" --tokens "$WORK/bad.tok"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ] && rm -rf "$WORK"
[ "$failures" -eq 0 ]
