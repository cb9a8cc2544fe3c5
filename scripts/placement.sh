# Rank and thread placement for mpiexec (sourced by scripts/run.sh, slurm/run.sbatch and
# slurm/scaling.sbatch; slurm/README.md, "Placement"). Rule: each rank owns a disjoint set of
# cores (its share: Slurm's -c), and its OpenMP threads are placed inside that set.
#
#   hddp_place RANKS_PER_NODE CPUS_PER_RANK CPUS_HERE NODES_SHARE_HOST
#
# sets HDDP_PLACE (an array of mpiexec options) and HDDP_PLACE_WHY (one line for the log), and
# exports or unsets OMP_PLACES / OMP_PROC_BIND to match (and OMPI_MCA_btl where nodes share a host):
#   cores: mpiexec --map-by slot:PE=<CPUS_PER_RANK> --bind-to core gives every rank its own
#          cores, and OMP_PLACES=cores OMP_PROC_BIND=close puts its threads on them, one per
#          core (libgomp builds the places from the rank's mask, so the threads stay inside it).
#          With SMT, the same in hardware threads (--use-hwthread-cpus, OMP_PLACES=threads).
#   none:  mpiexec --bind-to none, OMP_PLACES / OMP_PROC_BIND unset: the kernel schedules every
#          thread anywhere. Chosen when the ranks' shares do not fit the CPUs here (the ranks
#          would be stacked on the same cores), and when the job's nodes share one host (the
#          local Slurm's emulated nodes: mpiexec places each node's ranks without knowing the
#          others', so every node's first rank would get the same first core). There, Open
#          MPI's shared-memory transport is also turned off (below).
# HDDP_PLACEMENT=auto (default) | cores | none forces one. Returns 2 on a bad value.
hddp_place() {
  local per_node="$1" cpus="$2" here="$3" shared="$4" mode="${HDDP_PLACEMENT:-auto}"
  HDDP_PLACE=() HDDP_PLACE_WHY=""
  case "$mode" in
    auto)
      if [ "$shared" -eq 1 ]; then
        mode=none HDDP_PLACE_WHY="the job's nodes share one host (emulated nodes): ranks are not bound, the kernel spreads them"
      elif [ $((per_node * cpus)) -gt "$here" ]; then
        mode=none HDDP_PLACE_WHY="$per_node rank(s) x $cpus CPU(s) do not fit the $here CPU(s) here: ranks are not bound, the kernel spreads them"
      else
        mode=cores HDDP_PLACE_WHY="each rank on its own $cpus core(s) (of $here here), OpenMP threads one per core inside them"
      fi ;;
    cores) HDDP_PLACE_WHY="each rank on its own $cpus core(s) (HDDP_PLACEMENT=cores)" ;;
    none) HDDP_PLACE_WHY="ranks not bound (HDDP_PLACEMENT=none)" ;;
    *) echo "error: HDDP_PLACEMENT=$mode: expected auto, cores or none" >&2; return 2 ;;
  esac
  if [ "$mode" = cores ] && [ "$(hddp_smt)" -eq 1 ]; then
    # SMT: a CPU (Slurm's -c, nproc) is a hardware thread, and PE must count those too, or
    # Open MPI would look for -c whole cores in a share of -c/2 (mpirun(1), "processing
    # element": a hardware thread under --use-hwthread-cpus). Flags checked on a machine without
    # SMT, where hardware threads are cores; the branch is tested with a faked topology
    # (tests/scripts/test_placement.sh); not measured on an SMT node.
    HDDP_PLACE=(--use-hwthread-cpus --map-by "slot:PE=$cpus" --bind-to hwthread)
    export OMP_PLACES=threads OMP_PROC_BIND=close
    HDDP_PLACE_WHY="$HDDP_PLACE_WHY; SMT here: those are $cpus hardware threads, one OpenMP thread on each"
  elif [ "$mode" = cores ]; then
    HDDP_PLACE=(--map-by "slot:PE=$cpus" --bind-to core)
    export OMP_PLACES=cores OMP_PROC_BIND=close
  else
    HDDP_PLACE=(--bind-to none)
    unset OMP_PLACES OMP_PROC_BIND
  fi
  # Nodes that share a host also share its /dev/shm, where Open MPI's shared-memory transport
  # (vader) names its segments by host name and local rank: with two ranks per emulated node,
  # local rank 0 of n1 and of n2 open the same segment and the job hangs in its first
  # collective. Between such nodes the ranks talk TCP anyway; within one, TCP too.
  # (Exported, so that every mpiexec of the job sees it; a value the job set is kept. It concerns
  # Open MPI's ob1 transports, which Debian's Open MPI uses; a site's UCX PML has its own.)
  if [ "$shared" -eq 1 ] && [ -z "${OMPI_MCA_btl:-}" ]; then
    export OMPI_MCA_btl='^vader'
    HDDP_PLACE_WHY="$HDDP_PLACE_WHY; OMPI_MCA_btl=^vader: no shared-memory transport, its segment names would collide between the nodes"
  fi
  HDDP_PLACE_WHY="placement: $HDDP_PLACE_WHY (mpiexec ${HDDP_PLACE[*]}; OMP_PLACES=${OMP_PLACES:-unset} OMP_PROC_BIND=${OMP_PROC_BIND:-unset})"
}

# On this machine: RANKS ranks of THREADS OpenMP threads each, placed by hddp_place. Sets
# HDDP_LAUNCH (the mpiexec command line to put before a program) and exports OMP_NUM_THREADS.
# Returns 2 as hddp_place does.
hddp_launch_local() {
  local p="$1" t="$2"
  hddp_place "$p" "$t" "$(nproc)" 0 >/dev/null || return 2
  export OMP_NUM_THREADS="$t"
  HDDP_LAUNCH=(mpiexec -n "$p" "${HDDP_PLACE[@]}" -x OMP_NUM_THREADS)
  [ -n "${OMP_PLACES:-}" ] && HDDP_LAUNCH+=(-x OMP_PLACES -x OMP_PROC_BIND)
  [ "${HDDP_PLACE[1]}" = none ] && HDDP_LAUNCH+=(--oversubscribe)
  return 0
}

# Under Slurm: the most tasks any node of the job runs ("2(x3),1" -> 2).
hddp_slurm_tasks_per_node() {
  local m=0 e n es
  IFS=, read -ra es <<<"${SLURM_TASKS_PER_NODE:-1}"
  for e in "${es[@]}"; do
    n="${e%%(*}"
    [ "$n" -gt "$m" ] && m="$n"
  done
  echo "$m"
}

# Under Slurm: 1 when two of the job's nodes are the same host (NodeHostName), else 0.
hddp_slurm_nodes_share_host() {
  local hosts
  hosts="$(scontrol -o show node "${SLURM_JOB_NODELIST:-}" 2>/dev/null | grep -o 'NodeHostName=[^ ]*' | sort || true)"
  if [ -n "$hosts" ] && [ "$(uniq <<<"$hosts" | wc -l)" -lt "$(wc -l <<<"$hosts")" ]; then echo 1; else echo 0; fi
}

# The CPUs (hardware threads) this process may use (GNU nproc alone would answer
# OMP_NUM_THREADS when it is set).
hddp_cpus_here() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }

# 1 when this host's online CPUs are hardware threads of fewer cores (SMT, hyper-threading): some
# online CPU shares its core with another (the kernel lists only online siblings, and removes an
# offline CPU's topology folder). Read from sysfs, which HDDP_SYSFS_CPU redirects: the test
# (tests/scripts/test_placement.sh) fakes an SMT and a non-SMT topology there, without root.
hddp_smt() {
  local sys="${HDDP_SYSFS_CPU:-/sys/devices/system/cpu}" f
  for f in "$sys"/cpu[0-9]*/topology/thread_siblings_list; do
    [ -r "$f" ] || continue
    case "$(<"$f")" in *[,-]*) echo 1; return ;; esac   # "0,8" or "0-1": two threads or more
  done
  echo 0
}
