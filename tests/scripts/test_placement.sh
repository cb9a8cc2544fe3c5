#!/usr/bin/env bash
# scripts/placement.sh, every branch of hddp_place on faked CPU topologies (HDDP_SYSFS_CPU points
# hddp_smt at a sysfs tree built here, with and without SMT): the exact mpiexec options
# (HDDP_PLACE), what a child process sees of OMP_PLACES / OMP_PROC_BIND / OMPI_MCA_btl, the
# return code and stderr, and the reason in the log line. Launches no MPI job: the SMT flags are
# checked as text here, never against Open MPI on an SMT node.
# Usage: test_placement.sh <source dir> <scratch dir inside the build tree>
set -uo pipefail
ROOT=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# What the caller's shell may have set would decide branches here: start from none of it.
unset HDDP_PLACEMENT HDDP_SYSFS_CPU OMP_PLACES OMP_PROC_BIND OMPI_MCA_btl

# topology DIR SIBLINGS...: a fake /sys/devices/system/cpu, cpuN/topology/thread_siblings_list
# holding the Nth of SIBLINGS, beside folders that are no CPU (cpufreq, cpuidle, smt).
topology() {
  local d=$1 i=0 s
  shift
  for s in "$@"; do
    mkdir -p "$d/cpu$i/topology" && echo "$s" >"$d/cpu$i/topology/thread_siblings_list"
    i=$((i + 1))
  done
  mkdir -p "$d/cpufreq" "$d/cpuidle" "$d/smt"
}
NOSMT=$WORK/nosmt SMT=$WORK/smt SMT_RANGE=$WORK/smt-range
topology "$NOSMT" 0 1 2 3
mkdir -p "$NOSMT/cpu4"              # an offline CPU: the kernel removed its topology folder
topology "$SMT" 0,2 1,3 0,2 1,3     # 2 cores x 2 threads, numbered core-first (most Intel hosts)
topology "$SMT_RANGE" 0-1 0-1 2-3 2-3   # the same, threads of a core adjacent (most AMD hosts)

# 1. hddp_smt on the fake trees, and on this host as lscpu counts it (CPUs > distinct cores).
smt() { (HDDP_SYSFS_CPU=$1 && source "$ROOT/scripts/placement.sh" && hddp_smt); }
for t in "$NOSMT:0" "$SMT:1" "$SMT_RANGE:1" "$WORK/no-such-folder:0"; do
  got=$(smt "${t%:*}")
  [ "$got" = "${t##*:}" ] && pass "hddp_smt ${t%:*}: $got" || fail "hddp_smt ${t%:*}: '$got', expected ${t##*:}"
done
cpus=$(lscpu -p=CPU | grep -vc '^#') cores=$(lscpu -p=CORE,SOCKET | grep -v '^#' | sort -u | wc -l)
host=$( (source "$ROOT/scripts/placement.sh" && hddp_smt) )
[ "$host" = "$([ "$cpus" -gt "$cores" ] && echo 1 || echo 0)" ] && pass "hddp_smt on this host: $host ($cpus CPUs, $cores cores)" \
  || fail "hddp_smt on this host: $host, but lscpu counts $cpus CPUs on $cores cores"

# 2. hddp_place. place SYSFS ARGS...: hddp_place ARGS in a subshell, hddp_smt reading SYSFS, with
#    the variables the caller put before it (HDDP_PLACEMENT=..., OMP_PLACES=...); prints the
#    return code, HDDP_PLACE one [word] each, the variables as a child process sees them (unset
#    when not exported), stderr, and HDDP_PLACE_WHY.
place() {
  local sys=$1
  shift
  (
    source "$ROOT/scripts/placement.sh"
    HDDP_SYSFS_CPU=$sys hddp_place "$@" 2>"$WORK/stderr"
    echo "rc=$?"
    echo "place=$(for w in "${HDDP_PLACE[@]}"; do printf '[%s]' "$w"; done)"
    for v in OMP_PLACES OMP_PROC_BIND OMPI_MCA_btl; do echo "$v=$(printenv "$v" || echo unset)"; done
    echo "stderr=$(cat "$WORK/stderr")"
    echo "why=$HDDP_PLACE_WHY"
  )
}
# expect NAME OUTPUT RC PLACE OMP_PLACES OMP_PROC_BIND OMPI_MCA_btl STDERR [WHY_FRAGMENT...]:
# the first six lines of OUTPUT exactly, and every fragment in the why line.
expect() {
  local name=$1 out=$2 want f ok=1
  want=$(printf 'rc=%s\nplace=%s\nOMP_PLACES=%s\nOMP_PROC_BIND=%s\nOMPI_MCA_btl=%s\nstderr=%s' "${@:3:6}")
  [ "$(head -6 <<<"$out")" = "$want" ] || ok=0
  for f in "${@:9}"; do
    grep -qF -- "$f" <<<"$(sed -n 's/^why=//p' <<<"$out")" || ok=0
  done
  if [ $ok = 1 ]; then pass "$name"; else fail "$name: got"$'\n'"$out"$'\n'"expected"$'\n'"$want"$'\n'"why with: ${*:9}"; fi
}
CORES='[--map-by][slot:PE=2][--bind-to][core]'
HWTHREADS='[--use-hwthread-cpus][--map-by][slot:PE=2][--bind-to][hwthread]'

# auto, the job's nodes share one host: unbound, OpenMP unplaced (set before: removed), no vader.
out=$(OMP_PLACES=cores OMP_PROC_BIND=close place "$NOSMT" 1 2 4 1)
expect "auto, nodes share a host" "$out" 0 '[--bind-to][none]' unset unset '^vader' '' \
  "placement: the job's nodes share one host (emulated nodes)" "OMPI_MCA_btl=^vader: no shared-memory" \
  "(mpiexec --bind-to none; OMP_PLACES=unset OMP_PROC_BIND=unset)"
out=$(place "$SMT" 1 2 4 1)
expect "auto, nodes share a host, SMT" "$out" 0 '[--bind-to][none]' unset unset '^vader' '' "share one host"
out=$(OMPI_MCA_btl=self,tcp place "$NOSMT" 1 2 4 1)
expect "auto, nodes share a host, the job's OMPI_MCA_btl kept" "$out" 0 '[--bind-to][none]' unset unset 'self,tcp' '' \
  "share one host (emulated nodes): ranks are not bound, the kernel spreads them (mpiexec"

# auto, ranks x CPUs do not fit the CPUs here (3 x 2 > 4): unbound; 2 x 2 = 4 fits.
out=$(OMP_PLACES=cores OMP_PROC_BIND=close place "$NOSMT" 3 2 4 0)
expect "auto, 3 x 2 do not fit 4" "$out" 0 '[--bind-to][none]' unset unset unset '' \
  "placement: 3 rank(s) x 2 CPU(s) do not fit the 4 CPU(s) here"
out=$(place "$SMT" 3 2 4 0)
expect "auto, 3 x 2 do not fit 4, SMT" "$out" 0 '[--bind-to][none]' unset unset unset '' "do not fit"
out=$(place "$NOSMT" 2 2 4 0)
expect "auto, 2 x 2 fit 4: cores" "$out" 0 "$CORES" cores close unset '' \
  "placement: each rank on its own 2 core(s) (of 4 here), OpenMP threads one per core inside them (mpiexec --map-by slot:PE=2 --bind-to core; OMP_PLACES=cores OMP_PROC_BIND=close)"

# auto, it fits; with SMT in both numberings, PE counts hardware threads.
out=$(HDDP_PLACEMENT='' place "$NOSMT" 1 2 4 0)
expect "auto (HDDP_PLACEMENT empty), cores" "$out" 0 "$CORES" cores close unset '' "each rank on its own 2 core(s)"
out=$(place "$SMT" 1 2 4 0)
expect "auto, SMT: hardware threads" "$out" 0 "$HWTHREADS" threads close unset '' \
  "placement: each rank on its own 2 core(s) (of 4 here), OpenMP threads one per core inside them; SMT here: those are 2 hardware threads, one OpenMP thread on each (mpiexec --use-hwthread-cpus --map-by slot:PE=2 --bind-to hwthread; OMP_PLACES=threads OMP_PROC_BIND=close)"
out=$(HDDP_PLACEMENT=auto place "$SMT_RANGE" 1 2 4 0)
expect "auto, SMT (adjacent numbering): hardware threads" "$out" 0 "$HWTHREADS" threads close unset '' "SMT here"

# HDDP_PLACEMENT=cores: bound even where auto would not (does not fit; nodes share a host).
out=$(HDDP_PLACEMENT=cores place "$NOSMT" 3 2 4 0)
expect "cores forced, 3 x 2 on 4" "$out" 0 "$CORES" cores close unset '' \
  "placement: each rank on its own 2 core(s) (HDDP_PLACEMENT=cores) (mpiexec --map-by"
out=$(HDDP_PLACEMENT=cores place "$SMT" 3 2 4 0)
expect "cores forced, SMT" "$out" 0 "$HWTHREADS" threads close unset '' "(HDDP_PLACEMENT=cores); SMT here: those are 2 hardware threads"
out=$(HDDP_PLACEMENT=cores place "$NOSMT" 1 2 4 1)
expect "cores forced, nodes share a host: bound, no vader" "$out" 0 "$CORES" cores close '^vader' '' \
  "(HDDP_PLACEMENT=cores); OMPI_MCA_btl=^vader"

# HDDP_PLACEMENT=none: unbound where auto would bind, the OpenMP variables removed.
out=$(HDDP_PLACEMENT=none OMP_PLACES=threads OMP_PROC_BIND=close place "$SMT" 1 2 4 0)
expect "none forced, SMT" "$out" 0 '[--bind-to][none]' unset unset unset '' \
  "placement: ranks not bound (HDDP_PLACEMENT=none) (mpiexec --bind-to none;"
out=$(HDDP_PLACEMENT=none place "$NOSMT" 1 2 4 0)
expect "none forced" "$out" 0 '[--bind-to][none]' unset unset unset '' "(HDDP_PLACEMENT=none)"

# A bad value: return 2, a message naming the three, no options, nothing exported.
for bad in core NONE " cores"; do
  out=$(HDDP_PLACEMENT=$bad place "$SMT" 1 2 4 0)
  expect "HDDP_PLACEMENT='$bad' refused" "$out" 2 '' unset unset unset \
    "error: HDDP_PLACEMENT=$bad: expected auto, cores or none"
done
# ... and after a good call in the same shell, none of that call's options or reason is left.
out=$( (source "$ROOT/scripts/placement.sh" && HDDP_SYSFS_CPU=$SMT hddp_place 1 2 4 0
        HDDP_PLACEMENT=bogus hddp_place 1 2 4 0 2>/dev/null
        echo "rc=$? place=${HDDP_PLACE[*]} why=$HDDP_PLACE_WHY") )
[ "$out" = "rc=2 place= why=" ] && pass "a bad value after a good call: nothing left of it" \
  || fail "a bad value after a good call: $out"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
