# Sourced by scripts/run.sh and scripts/test.sh: install what is missing, configure, build.
set -euo pipefail
HDDP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${HDDP_BUILD_DIR:-$HDDP_ROOT/build}"
JOBS="$(nproc 2>/dev/null || echo 2)"

# Open MPI refuses root unless told; a fresh container usually runs as root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

hddp_build() {
  bash "$HDDP_ROOT/scripts/setup-deps.sh" "$@"
  cmake -S "$HDDP_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${HDDP_CMAKE_ARGS:-} >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

# The CPU a benchmark ran on, for its table and its results folder: sets CPU_MODEL (lscpu's model
# name), CPU_FM ("family F, model M") and CPU_SLUG (bench/results/<slug>/).
hddp_cpu_info() {
  CPU_MODEL="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  CPU_FM="family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1)"
  CPU_SLUG="$(echo "$CPU_MODEL" | tr 'A-Z' 'a-z' | sed 's/([^)]*)//g; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')"
}
