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
