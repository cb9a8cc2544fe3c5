#!/usr/bin/env bash
# The step before and after a change, side by side: mnist_train's step time (--stats-json
# step_s: training time over steps, evaluation excluded) from two builds, alternated round by
# round on the wide MLP (--hidden 1024,1024, batch 256) and the CNN (batch 64), with and without
# --clip-grad-norm, 2 ranks x 1 thread. Prints a CSV (build,model,clip,round,step_ms).
#   bench/mnist/step_end_ab.sh OLD_BUILD NEW_BUILD [ROUNDS] > out.csv
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
echo "build,model,clip,round,step_ms"
for r in $(seq 1 "$ROUNDS"); do
  for model in mlp cnn; do
    if [ $model = mlp ]; then args=(--hidden 1024,1024 --batch-size 256 --limit-train 15360); else args=(--model cnn --batch-size 64 --limit-train 3840); fi
    for clip in 0 1; do
      for b in old new; do
        bin=$([ $b = old ] && echo "$OLD" || echo "$NEW")/drivers/mnist_train
        mpiexec --oversubscribe --bind-to core -n 2 "$bin" "${args[@]}" --limit-test 512 --epochs 2 --clip-grad-norm $clip \
          --no-plot --out "$W" --stats-json "$W/s.jsonl" >/dev/null 2>&1
        ms=$(python3 -c "import json,sys; print(1e3*[json.loads(l) for l in open(sys.argv[1])][-1]['step_s'])" "$W/s.jsonl")
        echo "$b,$model,$clip,$r,$ms"
      done
    done
  done
done
