#!/usr/bin/env bash
# Installs the Debian 12 packages hddp needs, and only those that are missing.
#   setup-deps.sh [GROUP | PACKAGE]...      (no argument: the build group)
# Groups, each script asking for its own:
#   build      configure and build the whole tree, run the drivers (scripts/run.sh)
#   tests      what the test suite adds: PyTorch and numpy for the round trips, the
#              Fashion-MNIST data, poppler (PDF checks)
#   bench      the benchmarks' anchors and tools: BLIS, SimGrid SMPI, PyTorch
#   slurm      a local Slurm for the job-file tests (scripts/slurm-local.sh)
#   container  Charliecloud and mmdebstrap for the image tests (slurm/container.sh)
#   all        every group (scripts/test.sh)
# Any other argument is a package name. Idempotent and quiet; needs root or sudo; waits while
# another apt holds the lock.
set -euo pipefail

BUILD=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin
  libopenblas-openmp-dev
  libgtest-dev libgmock-dev libbenchmark-dev   # the tree configures its tests and benchmarks too
  libgnuplot-iostream-dev libboost-iostreams-dev libboost-filesystem-dev gnuplot-nox
  nlohmann-json3-dev libcli11-dev
  libsleef-dev   # kernels/elementwise/elementwise_*.cpp: vector tanh at each instruction set's width
  zlib1g-dev     # data/idx.cpp: gzip'd IDX files; data/text.cpp: token files' CRC-32
  libcsv-dev     # data/csv.cpp: the CSV parser
)
TESTS=(
  python3 python3-numpy poppler-utils
  python3-torch          # the safetensors round trips with PyTorch
  dataset-fashion-mnist  # mnist_train's data (/usr/share/datasets/fashion-mnist)
  fortunes               # gpt_train's text (/usr/share/games/fortunes)
  iproute2               # ip netns, tc: bench/link/shaped_link.sh and its test
)
BENCH=(
  python3 python3-torch
  fortunes               # bench/gpt: the GPT's text
  libblis-openmp-dev     # bench_gemm: BLIS, the second GEMM anchor
  libsimgrid-dev         # bench/at_scale: SimGrid SMPI (smpicxx, smpirun)
  iproute2               # bench/link: ranks joined by a shaped network link
)
SLURM=(slurmctld slurmd slurm-client munge)
CONTAINER=(mmdebstrap charliecloud-runtime)

PKGS=()
[ $# -eq 0 ] && set -- build
for a in "$@"; do
  case "$a" in
    build) PKGS+=("${BUILD[@]}") ;;
    tests) PKGS+=("${TESTS[@]}") ;;
    bench) PKGS+=("${BENCH[@]}") ;;
    slurm) PKGS+=("${SLURM[@]}") ;;
    container) PKGS+=("${CONTAINER[@]}") ;;
    all) PKGS+=("${BUILD[@]}" "${TESTS[@]}" "${BENCH[@]}" "${SLURM[@]}" "${CONTAINER[@]}") ;;
    *) PKGS+=("$a") ;;
  esac
done

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

echo "setup-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt_retry() {
  # -o DPkg::Lock::Timeout waits for the dpkg lock; the loop also covers the lists lock.
  local i
  for i in $(seq 1 30); do
    if $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 -qq "$@" >/tmp/hddp-apt.$$.log 2>&1; then
      rm -f /tmp/hddp-apt.$$.log; return 0
    fi
    if grep -qiE 'lock|Could not get' /tmp/hddp-apt.$$.log; then sleep 5; continue; fi
    cat /tmp/hddp-apt.$$.log >&2; rm -f /tmp/hddp-apt.$$.log; return 1
  done
  cat /tmp/hddp-apt.$$.log >&2; rm -f /tmp/hddp-apt.$$.log; return 1
}
apt_retry update
apt_retry install -y --no-install-recommends "${missing[@]}"
