#!/usr/bin/env bash
# A real, single-host Slurm for tests and demos: munged, slurmctld and N slurmd
# emulating nodes n1..nN on this host. Everything lives under one state directory.
#
#   scripts/slurm-local.sh up [N]                 start (default N=3) and wait until all nodes are idle
#   scripts/slurm-local.sh wait JOBID [TIMEOUT]   wait for a job; exit with its exit code (124: timeout)
#   scripts/slurm-local.sh down                   cancel all jobs, stop the daemons, remove the state directory
#   scripts/slurm-local.sh status                 say whether it is up and where
#
# Run `scripts/slurm-local.sh --help` for the details (environment variables, files).
set -euo pipefail

PROG="slurm-local"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HDDP_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_NAME="slurm-local.state"     # marks a directory as ours; sourced by wait/down/status
POINTER="${TMPDIR:-/tmp}/hddp-slurm-local.$(id -u).dir"   # only when HDDP_SLURM_DIR is not set

usage() {
  cat <<EOF
Usage: $(basename "$0") up [N] | wait JOBID [TIMEOUT] | down | status | --help

A real single-host Slurm (slurm-wlm 22.05 from Debian 12) for tests and demos.

  up [N]               Install what is missing (scripts/setup-deps.sh slurmctld slurmd
                       slurm-client munge), start a private munged, slurmctld and N slurmd
                       (default 3) that emulate nodes n1..nN on this host (CPUs=16 and
                       RealMemory=65536 declared each, partition "batch"), wait until every
                       node is idle, and print the 'export SLURM_CONF=...' line for clients.
                       If the cluster in the state directory is already up, just prints it.
  wait JOBID [TIMEOUT] Poll 'scontrol -o show job' until the job ends (default timeout 300 s);
                       exits with the job's exit code (128+signal if it was killed by a
                       signal, 1 if it ended without one, e.g. cancelled), or 124 on timeout.
  down                 Cancel all jobs, wait for an empty queue, stop the daemons this script
                       started (by PID: slurmd, slurmctld, munged), remove the state directory.
                       Does nothing if nothing is up.
  status               Print the state directory, the daemons and sinfo; exit 1 if not up.

Environment:
  HDDP_SLURM_DIR      State directory (config, state, spool, per-node TmpFS, pid files, logs,
                      munge socket). 'up' creates it; it must be missing, empty, or one this
                      script made. 'down' removes it. Must be traversable by the munge user.
                      If unset, 'up' uses a fresh 'mktemp -d' and records its path in
                      $POINTER; 'wait', 'down' and 'status' find it
                      there, or next to \$SLURM_CONF (set by eval'ing the output of 'up').
  HDDP_SLURM_PORT     Base TCP port (default 17000): slurmctld listens on it, node nI on
                      base+I.
  HDDP_SLURM_UP_TIMEOUT  Seconds 'up' waits for idle nodes (default 60).

Clients (sbatch, squeue, sinfo, scontrol, srun) need SLURM_CONF=<state dir>/slurm.conf; jobs
inherit it. Needs root (no systemd needed). Nothing under /etc is touched except
/etc/munge/munge.key, created (owner munge, mode 0400) only if it is missing.
EOF
}

say() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

# ---- locating the state directory ---------------------------------------------------------

# Prints the state directory of an earlier 'up', or nothing.
find_dir() {
  if [ -n "${HDDP_SLURM_DIR:-}" ]; then
    if [ -d "$HDDP_SLURM_DIR" ]; then (cd "$HDDP_SLURM_DIR" && pwd); else echo "$HDDP_SLURM_DIR"; fi
  elif [ -n "${SLURM_CONF:-}" ] && [ -f "$(dirname "$SLURM_CONF")/$STATE_NAME" ]; then
    (cd "$(dirname "$SLURM_CONF")" && pwd)   # the shell that eval'ed 'up' has SLURM_CONF
  elif [ -f "$POINTER" ]; then
    cat "$POINTER"
  fi
}

load_state() {  # $1: dir; sets NODES PORT HOST MUNGED_PID SLURMCTLD_PID SLURMD_PIDS
  # shellcheck disable=SC1090
  source "$1/$STATE_NAME"
  export SLURM_CONF="$1/slurm.conf"
}

# True if PID is alive and its command line mentions the state dir (so we never signal a
# recycled PID or someone else's daemon).
ours() {  # $1: pid, $2: dir
  local pid="$1" dir="$2"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/"
}

all_alive() {  # $1: dir (state loaded)
  local p
  ours "$MUNGED_PID" "$1" && ours "$SLURMCTLD_PID" "$1" || return 1
  for p in $SLURMD_PIDS; do ours "$p" "$1" || return 1; done
}

# ---- up -----------------------------------------------------------------------------------

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure_munge_key() {
  local key=/etc/munge/munge.key
  [ -f "$key" ] && return 0
  say "creating $key (owner munge, mode 0400)"
  install -d -o munge -g munge -m 0700 /etc/munge
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile="$key"
  else
    dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
  fi
  chown munge:munge "$key"
  chmod 0400 "$key"
}

# Requeue timing, honest to Slurm's mechanism: a requeued job may start again only after the
# job credential of its first run has expired (slurmd refuses a revoked credential until
# then), so slurmctld holds it back (BeginTime) for cred_expire seconds - 120 by default, 15
# here so that tests need not wait two minutes; 15 s still covers a step launch on a loaded
# 2-core machine (about a second). The main scheduling loop then starts it within
# sched_interval (default 60 s; 2 here, as nothing else would wake the scheduler).
CRED_EXPIRE=15
SCHED_INTERVAL=2

write_conf() {  # $1: dir
  local d="$1" last=$((PORT + NODES))
  cat >"$d/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: $NODES emulated nodes on $HOST, everything under $d.
ClusterName=hddp-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket.2,cred_expire=$CRED_EXPIRE
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
TmpFS=$d/tmp/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
PlugStackConfig=$d/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
SchedulerParameters=batch_sched_delay=0,sched_interval=$SCHED_INTERVAL
SlurmdParameters=config_overrides
EnforcePartLimits=ALL
ReturnToService=2
KillWait=30
MinJobAge=300
NodeName=n[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((PORT + 1))-$last CPUs=16 RealMemory=65536 State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
TaskProlog=$d/task-prolog.sh
EOF
  : >"$d/plugstack.conf"
  # The emulated nodes share this host's cores, and Open MPI, seeing the ranks on different
  # nodes, busy-polls in every rank: an idle rank would hold a core another node's rank needs
  # (36 ms per tutorial step instead of ~0.2 ms, measured). On separate machines each rank has
  # its own cores; here an idle rank yields its core instead (mpi_yield_when_idle), which
  # restores that as far as one host can. Set for this emulated cluster only, in every task's
  # environment (TaskProlog: its "export NAME=VALUE" lines), unless the job chose a value.
  cat >"$d/task-prolog.sh" <<'PROLOG'
#!/bin/sh
# scripts/slurm-local.sh: emulated nodes share one host's cores (see slurm/README.md).
[ -n "${OMPI_MCA_mpi_yield_when_idle:-}" ] || echo "export OMPI_MCA_mpi_yield_when_idle=1"
PROLOG
  chmod 0755 "$d/task-prolog.sh"
}

write_state() {  # $1: dir
  cat >"$1/$STATE_NAME.tmp" <<EOF
# scripts/slurm-local.sh state (do not edit)
NODES=$NODES
PORT=$PORT
HOST=$HOST
MUNGED_PID=${MUNGED_PID:-}
SLURMCTLD_PID=${SLURMCTLD_PID:-}
SLURMD_PIDS="${SLURMD_PIDS:-}"
EOF
  mv "$1/$STATE_NAME.tmp" "$1/$STATE_NAME"
}

read_pid() {  # $1: pid file, $2: what, $3: log; waits briefly for a daemon's pid file
  local i
  for i in $(seq 1 50); do
    if [ -s "$1" ]; then cat "$1"; return 0; fi
    sleep 0.1
  done
  die "$2 did not start (no $1); see $3"
}

show_logs() {  # $1: dir
  local f
  for f in "$1"/log/*.log "$1"/munge/munged.log; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f" >&2
    tail -n 8 "$f" >&2
  done
}

cmd_up() {
  NODES="${1:-3}"
  [[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$NODES'"
  [ "$(id -u)" -eq 0 ] || die "needs root (it starts munged, slurmctld and slurmd)"

  local d existing want="$NODES"
  existing="$(find_dir)"
  if [ -n "$existing" ] && [ -f "$existing/$STATE_NAME" ]; then
    load_state "$existing"   # sets NODES to the running cluster's
    if all_alive "$existing"; then
      local had="$NODES"
      [ "$want" = "$had" ] || die "already up with $had node(s) in $existing; run '$0 down' first"
      say "already up: $had node(s) in $existing"
      echo "export SLURM_CONF=$existing/slurm.conf"
      return 0
    fi
    say "found a stale cluster in $existing; cleaning it up first"
    cmd_down
    NODES="$want"
  fi

  bash "$HDDP_ROOT/scripts/setup-deps.sh" slurm
  local b
  for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd; do
    [ -x "$b" ] || die "$b is missing after setup-deps.sh"
  done
  command -v sbatch >/dev/null || die "sbatch is missing after setup-deps.sh"

  PORT="${HDDP_SLURM_PORT:-17000}"
  [[ "$PORT" =~ ^[0-9]+$ ]] || die "HDDP_SLURM_PORT must be a number"
  local p
  for p in $(seq "$PORT" $((PORT + NODES))); do
    port_busy "$p" && die "port $p is in use (another Slurm?); set HDDP_SLURM_PORT to another base port"
  done
  HOST="$(hostname -s)"

  if [ -n "${HDDP_SLURM_DIR:-}" ]; then
    d="$HDDP_SLURM_DIR"
    if [ -e "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ] && [ ! -f "$d/$STATE_NAME" ]; then
      die "HDDP_SLURM_DIR=$d exists and is not empty; use a new or empty directory"
    fi
    [ -e "$d" ] && [ -f "$d/$STATE_NAME" ] && rm -rf "$d"   # a stale one of ours
    mkdir -p "$d"
    d="$(cd "$d" && pwd)"
  else
    d="$(mktemp -d "${TMPDIR:-/tmp}/hddp-slurm.XXXXXX")"
    echo "$d" >"$POINTER"
  fi
  chmod 0755 "$d"
  MUNGED_PID="" SLURMCTLD_PID="" SLURMD_PIDS=""
  write_state "$d"     # marks the directory as ours at once, so 'down' can clean up a failed 'up'

  # Everything the daemons write goes under $d.
  mkdir -p "$d"/{state,run,log}
  local i
  for i in $(seq 1 "$NODES"); do mkdir -p "$d/spool/n$i" "$d/tmp/n$i"; chmod 1777 "$d/tmp/n$i"; done
  install -d -o munge -g munge -m 0755 "$d/munge"
  runuser -u munge -- test -x "$d/munge" ||
    die "the munge user cannot reach $d (a parent directory is not world-traversable); set HDDP_SLURM_DIR elsewhere"

  ensure_munge_key
  write_conf "$d"
  export SLURM_CONF="$d/slurm.conf"
  local t0=$SECONDS

  # A private munged on its own socket: it never disturbs (or depends on) a system munged.
  runuser -u munge -- /usr/sbin/munged --socket="$d/munge/munge.socket.2" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" \
    --seed-file="$d/munge/munged.seed" </dev/null >>"$d/log/daemons.out" 2>&1 ||
    { show_logs "$d"; die "munged failed to start; see $d/munge/munged.log"; }
  MUNGED_PID="$(read_pid "$d/munge/munged.pid" munged "$d/munge/munged.log")"
  write_state "$d"

  /usr/sbin/slurmctld -f "$SLURM_CONF" </dev/null >>"$d/log/daemons.out" 2>&1 ||
    { show_logs "$d"; die "slurmctld failed to start; see $d/log/slurmctld.log"; }
  SLURMCTLD_PID="$(read_pid "$d/run/slurmctld.pid" slurmctld "$d/log/slurmctld.log")"
  write_state "$d"

  for i in $(seq 1 "$NODES"); do
    /usr/sbin/slurmd -f "$SLURM_CONF" -N "n$i" </dev/null >>"$d/log/daemons.out" 2>&1 ||
      { show_logs "$d"; die "slurmd n$i failed to start; see $d/log/slurmd-n$i.log"; }
    SLURMD_PIDS="$SLURMD_PIDS $(read_pid "$d/run/slurmd-n$i.pid" "slurmd n$i" "$d/log/slurmd-n$i.log")"
    write_state "$d"
  done

  # Wait until every node reports idle.
  local timeout="${HDDP_SLURM_UP_TIMEOUT:-60}" states="" idle=0
  while [ $((SECONDS - t0)) -lt "$timeout" ]; do
    states="$(sinfo -h -N -o '%N %t' 2>/dev/null || true)"
    idle="$(grep -c ' idle$' <<<"$states" || true)"
    [ "$idle" -eq "$NODES" ] && break
    all_alive "$d" || { show_logs "$d"; die "a daemon died while starting; logs in $d/log"; }
    sleep 0.1
  done
  if [ "$idle" -ne "$NODES" ]; then
    echo "$states" >&2
    show_logs "$d"
    die "only $idle of $NODES node(s) idle after ${timeout}s; logs in $d/log (clean up with '$0 down')"
  fi
  say "up: $NODES node(s) n1..n$NODES idle after $((SECONDS - t0))s; state, spool and logs in $d"
  echo "export SLURM_CONF=$d/slurm.conf"
}

# ---- wait ---------------------------------------------------------------------------------

cmd_wait() {
  local job="${1:-}" timeout="${2:-300}"
  [[ "$job" =~ ^[0-9]+$ ]] || die "usage: $0 wait JOBID [TIMEOUT]"
  [[ "$timeout" =~ ^[0-9]+$ ]] || die "TIMEOUT must be a number of seconds"
  local d
  d="$(find_dir)"
  [ -n "$d" ] && [ -f "$d/$STATE_NAME" ] || die "no local Slurm is up (run '$0 up')"
  load_state "$d"

  local start=$SECONDS line state code sig
  while :; do
    if ! line="$(scontrol -o show job "$job" 2>&1)"; then
      die "scontrol cannot see job $job: $line"
    fi
    state="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")"
    case "$state" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING|SIGNALING|STAGE_OUT|"")
        ;;
      *)
        code="$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1/p' <<<"$line")"
        sig="$(sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\2/p' <<<"$line")"
        code="${code:-1}" sig="${sig:-0}"
        if [ "$state" != COMPLETED ] && [ "$code" -eq 0 ]; then
          if [ "$sig" -ne 0 ]; then code=$((128 + sig)); else code=1; fi
        fi
        say "job $job $state, exit code $code (waited $((SECONDS - start))s)"
        return "$code"
        ;;
    esac
    if [ $((SECONDS - start)) -ge "$timeout" ]; then
      say "job $job still $state after ${timeout}s"
      return 124
    fi
    sleep 0.2
  done
}

# ---- down ---------------------------------------------------------------------------------

stop_pid() {  # $1: pid, $2: name, $3: dir
  local pid="$1" i
  ours "$pid" "$3" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do
    ours "$pid" "$3" || return 0
    sleep 0.05
  done
  say "$2 (pid $pid) ignored SIGTERM for 5s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_down() {
  local d
  d="$(find_dir)"
  if [ -z "$d" ] || [ ! -d "$d" ]; then
    say "nothing is up"
    [ -z "${HDDP_SLURM_DIR:-}" ] && rm -f "$POINTER"
    return 0
  fi
  [ -f "$d/$STATE_NAME" ] || die "$d was not made by this script (no $STATE_NAME); not touching it"
  load_state "$d"

  if ours "$SLURMCTLD_PID" "$d"; then
    local jobs t0=$SECONDS
    jobs="$(squeue -h -o %A 2>/dev/null || true)"
    if [ -n "$jobs" ]; then
      say "cancelling job(s): ${jobs//$'\n'/ }"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
    fi
    while [ -n "$(squeue -h -o %A 2>/dev/null || true)" ]; do
      if [ $((SECONDS - t0)) -ge 30 ]; then
        say "warning: the queue is still not empty after 30s; stopping the daemons anyway"
        break
      fi
      sleep 0.1
    done
  fi

  local p
  for p in $SLURMD_PIDS; do stop_pid "$p" slurmd "$d"; done
  stop_pid "$SLURMCTLD_PID" slurmctld "$d"
  stop_pid "$MUNGED_PID" munged "$d"

  rm -rf "$d"
  [ -z "${HDDP_SLURM_DIR:-}" ] && rm -f "$POINTER"
  say "down: stopped the daemons and removed $d"
}

# ---- status -------------------------------------------------------------------------------

cmd_status() {
  local d
  d="$(find_dir)"
  if [ -z "$d" ] || [ ! -f "$d/$STATE_NAME" ]; then echo "not up"; return 1; fi
  load_state "$d"
  echo "state directory: $d"
  echo "export SLURM_CONF=$d/slurm.conf"
  echo "munged $MUNGED_PID, slurmctld $SLURMCTLD_PID, slurmd$SLURMD_PIDS"
  if all_alive "$d"; then
    sinfo -N -o '%N %P %c %m %t'
  else
    echo "some daemons are not running; '$0 down' cleans up"
    return 1
  fi
}

case "${1:-}" in
  up) shift; [ $# -le 1 ] || die "usage: $0 up [N]"; cmd_up "$@" ;;
  wait) shift; [ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 wait JOBID [TIMEOUT]"; cmd_wait "$@" ;;
  down) shift; [ $# -eq 0 ] || die "usage: $0 down"; cmd_down ;;
  status) cmd_status ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
