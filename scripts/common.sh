# Sourced by scripts/run.sh and scripts/test.sh: install what is missing, configure, build.
set -euo pipefail
HDDP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${HDDP_BUILD_DIR:-$HDDP_ROOT/build}"
JOBS="$(nproc 2>/dev/null || echo 2)"

# Open MPI refuses root unless told; a fresh container usually runs as root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# hddp_configure GROUP|PACKAGE...: installs what is missing (scripts/setup-deps.sh), then
# configures build/ with the one set of flags every script uses (Release, warnings as errors),
# so that run.sh, test.sh and the benchmarks share one tree and none rebuilds another's work.
# HDDP_CMAKE_ARGS adds flags (and then, to the tree, is a change like any other).
hddp_configure() {
  bash "$HDDP_ROOT/scripts/setup-deps.sh" "$@"
  cmake -S "$HDDP_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DHDDP_WERROR=ON ${HDDP_CMAKE_ARGS:-} >/dev/null
}

# hddp_build [GROUP|PACKAGE...]: hddp_configure (default group: build), then builds the whole
# tree; HDDP_TARGETS (space-separated) builds only those targets.
hddp_build() {
  [ $# -eq 0 ] && set -- build
  hddp_configure "$@"
  local targets=()
  for t in ${HDDP_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
}

# The CPU a benchmark ran on, for its table and its results folder: sets CPU_MODEL (lscpu's model
# name), CPU_FM ("family F, model M") and CPU_SLUG (bench/results/<slug>/).
hddp_cpu_info() {
  CPU_MODEL="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  CPU_FM="family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1)"
  CPU_SLUG="$(echo "$CPU_MODEL" | tr 'A-Z' 'a-z' | sed 's/([^)]*)//g; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')"
}
