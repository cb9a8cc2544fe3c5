# Running poly_train inside a Charliecloud directory image (sourced by slurm/container.sh,
# scripts/run.sh and slurm/run.sbatch; slurm/README.md, "In a container").
#
# The image holds the Debian 12 runtime packages only; the project's binaries are bound in from
# the build tree at run time (-b BIN_DIR:/opt/hddp/bin), so one image serves every commit and is
# rebuilt only when its package list or the host's apt sources change. The output directory is
# bound at /mnt/out and is the working directory inside: paths given to poly_train are paths
# inside the container (/mnt/out/...).
#
#   hddp_ch_check IMAGE        exits 1 with what to do when ch-run is missing, IMAGE is not a
#                              usable image, its Open MPI differs from the host's, or user
#                              namespaces are not available
#   hddp_ch_prefix IMAGE BIN_DIR OUT_DIR
#                              sets HDDP_CH: the command words before /opt/hddp/bin/<program>

HDDP_CH_STAMP=".hddp-image"   # inside the image: the package list and apt sources it was built from

# The Debian 12 packages poly_train needs at run time (libraries of build/drivers/poly_train,
# mpiexec's orted for the ranks' side, gnuplot for errors.pdf).
HDDP_CH_PACKAGES=(libopenmpi3 openmpi-bin libopenblas0-openmp libgomp1 libsleef3 zlib1g gnuplot-nox
                  libboost-iostreams1.74.0 libboost-filesystem1.74.0)
# What must match between the image and the host (Open MPI's hybrid model: the host's mpiexec
# and orted talk to the image's Open MPI and PMIx).
HDDP_CH_MPI_PACKAGES=(libopenmpi3 libpmix2)

hddp_ch_die() { echo "container: error: $*" >&2; exit 1; }

hddp_ch_check() {
  local img="$1" inside host
  command -v ch-run >/dev/null ||
    hddp_ch_die "ch-run is not installed: install Charliecloud (Debian: apt-get install charliecloud-runtime, or bash scripts/setup-deps.sh charliecloud-runtime)"
  [ -e "$img" ] || hddp_ch_die "no image at '$img': build it with 'bash slurm/container.sh build $img'"
  [ -d "$img" ] && [ -x "$img/bin/sh" ] ||
    hddp_ch_die "'$img' is not a Charliecloud directory image (no bin/sh in it); build one with 'bash slurm/container.sh build DIR' (SquashFS and other images are not supported: slurm/README.md)"
  [ -f "$img/$HDDP_CH_STAMP" ] ||
    hddp_ch_die "'$img' was not built by slurm/container.sh (no $HDDP_CH_STAMP); build one with 'bash slurm/container.sh build DIR'"
  # The hybrid MPI model: the host's mpiexec talks to the image's Open MPI, so they must match.
  local p
  for p in "${HDDP_CH_MPI_PACKAGES[@]}"; do
    inside="$(hddp_ch_image_version "$img" "$p")"
    host="$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)"
    [ -z "$host" ] || [ "$inside" = "$host" ] ||
      hddp_ch_die "'$img' is stale: its $p is ${inside:-missing}, the host's is $host; rebuild it with 'bash slurm/container.sh build $img'"
  done
  # User namespaces, which ch-run needs (ch-checkns says the same, but leaves /tmp/newroot behind).
  if ! unshare --user true 2>/dev/null; then
    hddp_ch_die "user namespaces are not available here (unshare --user fails); enable them (sysctl user.max_user_namespaces=15000, and kernel.unprivileged_userns_clone=1 where it exists) or run without HDDP_IMAGE"
  fi
}

# The version of package $2 installed in image $1 (empty if none).
hddp_ch_image_version() {
  sed -n "/^Package: $2\$/,/^\$/s/^Version: //p" "$1/var/lib/dpkg/status" 2>/dev/null || true
}

hddp_ch_prefix() {
  local img="$1" bin_dir="$2" out="$3"
  export USER="${USER:-$(id -un)}"     # ch-run refuses to start without it (root shells, Slurm jobs)
  export XDG_CACHE_HOME=/tmp           # fontconfig (gnuplot) wants a writable cache; the image is read-only
  HDDP_CH=(ch-run -b "$bin_dir:/opt/hddp/bin" -b "$out:/mnt/out" -c /mnt/out "$img" --)
}
