#!/usr/bin/env bash
# The 16-core thread study, prepared here and run on a machine that has nothing installed
# (no MPI, no Debian packages, no network): GEMM and the wide-MLP step, threads 1..16.
#
#   bash bench/device_scaling_study.sh [BUILD_DIR]      # default: build-scaling (built if needed)
#
# makes BUILD_DIR/device-scaling/ (ignored by git, ~50 MiB; BUILD_DIR/device-scaling.tar.gz ~17 MiB):
#   bin/scaling   the x86-64 study program (bench/scaling)
#   lib/          every shared library `ldd bin/scaling` resolves (OpenBLAS's OpenMP build,
#                 libgomp, libstdc++, Boost, libmpi and its dependencies - loaded, never
#                 initialised: the thread sweep is single-process), the C library and the
#                 dynamic loader itself, so the host's own libraries are never used
#   run.sh        the study: threads 1,2,4,8,16 (capped at the machine's CPUs), OMP_PLACES=cores
#                 OMP_PROC_BIND=close, 5 interleaved rounds, then 3 rounds unbound; CSVs and
#                 logs into $OUT (7 files, flat); about 2-3 minutes on 16 cores
# and checks here that run.sh works through the bundled loader (a 1-2 thread smoke run).
#
# In a session that has a device machine (bench/RESULTS.md, "Thread and rank scaling"):
#   run(command="tar xzf build-scaling/device-scaling.tar.gz -C /tmp && bash /tmp/device-scaling/run.sh",
#       carry=["build-scaling/device-scaling.tar.gz"], timeout_s=420)
# (run.sh writes into $OUT, which the device tool provides and brings back.)
# then, here: build-scaling/bench/scaling --plot-only --out <the fetched folder>
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build-scaling}"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
say() { echo "device_scaling_study: $*" >&2; }

if [ ! -x "$BUILD/bench/scaling" ]; then
  say "building bench/scaling in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DHDDP_WERROR=ON >/dev/null
  cmake --build "$BUILD" -j2 --target scaling >/dev/null
fi
[ "$(uname -m)" = x86_64 ] || { say "error: this build is $(uname -m), the device is x86-64"; exit 1; }

D="$BUILD/device-scaling"
rm -rf "$D"
mkdir -p "$D/bin" "$D/lib"
cp "$BUILD/bench/scaling" "$D/bin/"
strip "$D/bin/scaling" 2>/dev/null || true
# Every library ldd resolves ("name => /path (addr)"), and the loader ("/lib64/ld-linux...").
ldd "$BUILD/bench/scaling" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' |
  while read -r lib; do cp -L "$lib" "$D/lib/$(basename "$lib")"; done
missing=$(ldd "$BUILD/bench/scaling" | grep -c 'not found' || true)
[ "$missing" -eq 0 ] || { say "error: ldd reports missing libraries"; exit 1; }
[ -e "$D/lib/ld-linux-x86-64.so.2" ] || { say "error: no ld-linux-x86-64.so.2 among ldd's libraries"; exit 1; }
(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null && git status --short -- kernels core bench/scaling 2>/dev/null) \
  >"$D/build-commit.txt" || true

cat >"$D/run.sh" <<'EOF'
#!/usr/bin/env bash
# The 16-core thread study (made by bench/device_scaling_study.sh). Writes into $OUT (default
# ./device-scaling-out): machine-info.txt, machine.txt, log.txt, gemm.csv, step.csv (close
# binding), gemm-unbound.csv, step-unbound.csv (OMP_PLACES/OMP_PROC_BIND unset).
# Env: THREADS (default 1,2,4,8,16 capped at the CPUs), REPS (5), MIN_TIME (0.2 s).
set -uo pipefail
D="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/device-scaling-out}"
mkdir -p "$OUT"
LD="$D/lib/ld-linux-x86-64.so.2"
# Everything through the bundled loader and libraries; the workers too (HDDP_SCALING_SELF).
export HDDP_SCALING_SELF="$LD --library-path $D/lib $D/bin/scaling"
SCALING=("$LD" --library-path "$D/lib" "$D/bin/scaling")
# A time limit per pass where coreutils' timeout exists (the study itself kills hung workers).
limit() { if command -v timeout >/dev/null; then timeout "$@"; else shift; "$@"; fi; }
cpus=$(nproc 2>/dev/null || grep -c ^processor /proc/cpuinfo)
if [ -z "${THREADS:-}" ]; then
  THREADS=""
  for t in 1 2 4 8 16; do [ "$t" -le "$cpus" ] && THREADS="$THREADS${THREADS:+,}$t"; done
fi
{
  echo "cpus (nproc): $cpus"
  grep -m1 'model name' /proc/cpuinfo
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512_bf16|amx_tile' | tr '\n' ' ')"
  echo "loadavg: $(cat /proc/loadavg)"
  echo "cpuset: $(grep Cpus_allowed_list /proc/self/status)"
  command -v lscpu >/dev/null && lscpu | grep -E 'Thread|Core|Socket|NUMA|Model name|MHz|L[123]'
  cat "$D/build-commit.txt" 2>/dev/null | sed 's/^/build: /'
} >"$OUT/machine-info.txt" 2>&1
start=$(date +%s)
{
  echo "== close binding: threads $THREADS"
  limit 240 "${SCALING[@]}" --studies gemm,step --threads "$THREADS" \
    --reps "${REPS:-5}" --min-time "${MIN_TIME:-0.2}" --placement close --no-plot --lock '' --out "$OUT"
  echo "close: exit $? after $(( $(date +%s) - start )) s"
  tmp=$(mktemp -d 2>/dev/null || { mkdir -p "/tmp/scaling-unbound-$$" && echo "/tmp/scaling-unbound-$$"; })
  limit 150 "${SCALING[@]}" --studies gemm,step --threads "$THREADS" --reps 3 --min-time "${MIN_TIME:-0.2}" \
    --placement none --no-plot --lock '' --out "$tmp"
  echo "unbound: exit $? after $(( $(date +%s) - start )) s"
  cp "$tmp/gemm.csv" "$OUT/gemm-unbound.csv" 2>/dev/null
  cp "$tmp/step.csv" "$OUT/step-unbound.csv" 2>/dev/null
  rm -rf "$tmp"
} 2>&1 | tee "$OUT/log.txt"
# The goals, from the CSVs: GEMM 16-thread efficiency >= 0.85 at >= 2048^3 (sq2048), wide-MLP
# step >= 10x faster at 16 threads than at 1.
awk -F, 'NR > 1 && $1 == "sq2048" { printf "gemm sq2048 %s %s threads: %s GFLOP/s, efficiency %s\n", $6, $8, $13, $15 }' \
  "$OUT/gemm.csv" 2>/dev/null | tee -a "$OUT/log.txt"
awk -F, 'NR > 1 { printf "step %s %s threads: %.2f ms, speedup %s\n", $2, $4, 1e3 * $6, $10 }' "$OUT/step.csv" 2>/dev/null |
  tee -a "$OUT/log.txt"
EOF
chmod +x "$D/run.sh"

# Smoke test here, through the bundled loader, in a clean environment.
say "smoke test (1-2 threads, one short round)"
smoke=$(mktemp -d)
if ! env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" OUT="$smoke" THREADS=1,2 REPS=1 MIN_TIME=0.01 \
     bash "$D/run.sh" >"$smoke/smoke.log" 2>&1 || ! grep -q '^gemm sq2048 hddp 2 threads' "$smoke/log.txt"; then
  say "error: the smoke run failed:"; tail -20 "$smoke/smoke.log" >&2; exit 1
fi
for f in gemm.csv step.csv gemm-unbound.csv step-unbound.csv machine.txt machine-info.txt log.txt; do
  [ -s "$smoke/$f" ] || { say "error: the smoke run wrote no $f"; exit 1; }
done
rm -rf "$smoke"
tar czf "$D.tar.gz" -C "$BUILD" device-scaling
rel="${D#"$ROOT"/}"
say "ready: $D ($(du -sm "$D" | cut -f1) MiB), $D.tar.gz ($(du -sm "$D.tar.gz" | cut -f1) MiB). On the device:"
say "  run(command=\"tar xzf $rel.tar.gz -C /tmp && bash /tmp/device-scaling/run.sh\", carry=[\"$rel.tar.gz\"], timeout_s=420)"
