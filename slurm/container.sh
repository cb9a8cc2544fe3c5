#!/usr/bin/env bash
# The tutorial's job inside a Charliecloud container (Los Alamos' unprivileged HPC container
# runtime, packaged in Debian 12; Apptainer/Singularity are not).
#
#   slurm/container.sh build [DIR]          build (or reuse) the directory image DIR
#   slurm/container.sh run [poly_train args] run poly_train on 3 local ranks inside the image
#   slurm/container.sh --help
#
# Under Slurm: HDDP_IMAGE=DIR sbatch slurm/run.sbatch (slurm/README.md, "In a container").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${HDDP_BUILD_DIR:-$ROOT/build}"
DEFAULT_IMAGE="$BUILD_DIR/container/hddp"
# shellcheck source=../scripts/charliecloud.sh
source "$ROOT/scripts/charliecloud.sh"

usage() {
  cat <<EOF
Usage: $(basename "$0") build [DIR] | run [poly_train options] | --help

  build [DIR]  Build the directory image DIR (default: ${DEFAULT_IMAGE#"$ROOT"/}, or \$HDDP_IMAGE)
               with mmdebstrap from this host's apt sources (same suites and mirror, so the
               Open MPI inside equals the host's, as MPI's hybrid container model needs): the
               Debian 12 runtime packages of poly_train (${HDDP_CH_PACKAGES[*]}).
               The project's binaries are not copied in: they are bound from the build tree at
               run time, so the image does not change between commits. An image already built
               from the same package list and apt sources is reused at once. Needs root; installs
               what it needs (mmdebstrap, charliecloud-runtime) through scripts/setup-deps.sh.
  run [args]   Build the project (as scripts/run.sh does) and run poly_train on 3 local ranks
               with the host's mpiexec, each rank inside the image (ch-run), writing
               errors.pdf and the CSVs to ./out (or \$HDDP_OUT). Paths in the arguments are
               seen inside the container, where the output directory is /mnt/out.

Environment: HDDP_IMAGE (the image, both commands), HDDP_OUT (run's output directory),
HDDP_BUILD_DIR (the build tree, default build/), OMP_NUM_THREADS (run: default 1).
EOF
}

# The stamp: what the image is built from - the package list, the host's versions of them and
# of the MPI packages that must match (so a host upgrade makes the image out of date), and the
# apt sources. Same stamp = same image.
stamp() {
  {
    echo "packages: ${HDDP_CH_PACKAGES[*]}"
    dpkg-query -W "${HDDP_CH_PACKAGES[@]}" "${HDDP_CH_MPI_PACKAGES[@]}" 2>&1 || true
    echo "image layout: 1"   # bump when the post-processing below changes
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
      if [ -s "$f" ]; then echo "== $f"; cat "$f"; fi
    done
  } 2>/dev/null | sha256sum | cut -d' ' -f1
}

cmd_build() {
  local img="${1:-${HDDP_IMAGE:-$DEFAULT_IMAGE}}" want sources=() f t0=$SECONDS p inside host
  img="$(realpath -m "$img")"
  mkdir -p "$(dirname "$img")"
  # One build at a time per image (a second waits, then finds it up to date).
  exec 9>"$img.lock"
  flock 9
  want="$(stamp)"
  if [ -f "$img/$HDDP_CH_STAMP" ] && [ "$(cat "$img/$HDDP_CH_STAMP")" = "$want" ]; then
    echo "container: $img is up to date (stamp ${want:0:12})" >&2
    return 0
  fi
  [ "$(id -u)" -eq 0 ] ||
    hddp_ch_die "building the image needs root (mmdebstrap in root mode); build it as root, or elsewhere, and point HDDP_IMAGE at it"
  bash "$ROOT/scripts/setup-deps.sh" container
  # The host's apt sources, as they are (mmdebstrap copies .list/.sources files it is given).
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    if [ -s "$f" ] && grep -qE '^[[:space:]]*(deb |Types:)' "$f"; then sources+=("$f"); fi
  done
  [ ${#sources[@]} -gt 0 ] || hddp_ch_die "no apt sources found under /etc/apt to build the image from"
  if [ -e "$img" ] && [ ! -f "$img/$HDDP_CH_STAMP" ] && [ -n "$(ls -A "$img" 2>/dev/null)" ]; then
    hddp_ch_die "'$img' exists and is not an image this script built; remove it or choose another DIR"
  fi
  # Built beside the image and swapped in at the end; a build killed half-way leaves $tmp, which
  # the next build removes first.
  local tmp="$img.tmp"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  echo "container: building $img (mmdebstrap, ${#HDDP_CH_PACKAGES[@]} packages; about a minute)" >&2
  local pkgs
  pkgs="$(IFS=,; echo "${HDDP_CH_PACKAGES[*]}")"
  mmdebstrap --quiet --variant=apt --include="$pkgs" bookworm "$tmp" "${sources[@]}" ||
    hddp_ch_die "mmdebstrap failed (network, or the apt sources above?)"
  # The mirror may hold newer packages than the host has installed: then the image's Open MPI
  # would not be the host's.
  for p in "${HDDP_CH_MPI_PACKAGES[@]}"; do
    inside="$(hddp_ch_image_version "$tmp" "$p")" host="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)"
    [ -z "$host" ] || [ "$inside" = "$host" ] ||
      hddp_ch_die "the mirror gave $p $inside, the host has $host: bring the host up to date (apt-get upgrade) and build again"
  done
  # Charliecloud binds the host's /dev and /etc/hosts over these; real device nodes in a
  # directory image only get in the way, and without /etc/hosts every rank waits 5 s at MPI start.
  find "$tmp/dev" -mindepth 1 -delete
  touch "$tmp/etc/hosts" "$tmp/etc/resolv.conf"
  mkdir -p "$tmp/opt/hddp/bin" "$tmp/mnt/out"
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
  echo "$want" >"$tmp/$HDDP_CH_STAMP"
  rm -rf "$img"
  mv -T "$tmp" "$img"
  trap - EXIT
  echo "container: built $img in $((SECONDS - t0)) s ($(du -sm "$img" | cut -f1) MB)" >&2
}

cmd_run() {
  local img="${HDDP_IMAGE:-$DEFAULT_IMAGE}"
  hddp_ch_check "$img"
  HDDP_IMAGE="$img" exec bash "$ROOT/scripts/run.sh" "$@"
}

case "${1:-}" in
  build) shift; [ $# -le 1 ] || { usage >&2; exit 2; }; cmd_build "$@" ;;
  run) shift; cmd_run "$@" ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
