#!/usr/bin/env bash
# Runs an MPI program with one rank per "node", the nodes joined by a shaped network, on one
# machine: a cluster in miniature to measure communication over a real link (TCP through the
# kernel, at a chosen rate) instead of shared memory.
#
#   bench/link/shaped_link.sh [options] -- PROGRAM [ARGS...]
#
# Each node is a network namespace named nodeI (its host name, which reports print) with two
# interfaces, like a cluster node with a data network and a management network:
#   data  10.99.0.(i+1)/24  the ranks' MPI traffic (Open MPI's TCP BTL); a veth pair to a
#                          switch namespace (a bridge), shaped by a token bucket (tc tbf) at
#                          both ends: RATE out of the node and RATE into it (full duplex)
#   ctl   10.98.0.(i+1)/24  the launcher's own traffic (Open MPI's out-of-band channel); not
#                          shaped, so cutting the data link (--cut-when) leaves the job able to
#                          end itself, as on a cluster whose data network fails
# Open MPI launches the way it does on a cluster: mpiexec runs in node 0, and its rsh launcher
# starts the other nodes' daemons through node_agent.sh, which enters that node's namespace
# (a rank moved into another namespace by a wrapper under one mpiexec loses PMIx: "OPAL ERROR:
# Unreachable"). Each node gets its own CPUs (taskset; cores divided among the nodes, shared
# round robin when there are more nodes than cores), ranks are not bound further (--bind-to
# none), and OMP_NUM_THREADS is the node's CPU count unless set.
#
# Options:
#   --nodes N           nodes, one rank each (default 2)
#   --rate RATE         the data link's rate in each direction, as tc spells it (10gbit,
#                       1gbit, 500mbit, 3.5gbit, ...), or none: an unshaped veth (default none)
#   --burst SIZE        the token bucket's burst (256kb, 4mb, ...; default: what RATE carries in
#                       1 ms, at least 256kb)
#   --cut-when FILE     once FILE exists, take the last node's data link down (both ends):
#                       a cut cable, to test how a job ends when a node's network fails
#   --mpiexec-arg ARG   one more mpiexec argument (repeatable), e.g. -x HDDP_VAR
#   --dry-run           print the mpiexec line and exit without making anything
#   -h, --help          this text
# Needs root (ip netns), iproute2 (ip, tc), taskset and Open MPI. SIGINT, SIGTERM and SIGHUP go
# on to mpiexec. Every namespace it made is removed when it ends, however it ends (a run
# killed with SIGKILL leaves them to the next run, which removes those whose owner is gone). Exits with the program's status (mpiexec's),
# 2 on bad options, 3 when it cannot build the network here (not root, a tool missing, no
# network namespaces).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]:-$0}" | sed '$d; s/^# \{0,1\}//'; }
die_usage() { echo "shaped_link: $*" >&2; echo "shaped_link: see --help" >&2; exit 2; }
die_env() { echo "shaped_link: cannot build the network here: $*" >&2; exit 3; }

NODES=2 RATE=none BURST="" CUT_WHEN="" DRY=0
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) [ $# -ge 2 ] || die_usage "--nodes needs a value"; NODES="$2"; shift 2 ;;
    --rate) [ $# -ge 2 ] || die_usage "--rate needs a value"; RATE="$2"; shift 2 ;;
    --burst) [ $# -ge 2 ] || die_usage "--burst needs a value"; BURST="$2"; shift 2 ;;
    --cut-when) [ $# -ge 2 ] || die_usage "--cut-when needs a file"; CUT_WHEN="$2"; shift 2 ;;
    --mpiexec-arg) [ $# -ge 2 ] || die_usage "--mpiexec-arg needs a value"; EXTRA+=("$2"); shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die_usage "unknown option '$1' (the program comes after --)" ;;
  esac
done
[ $# -ge 1 ] || die_usage "no program: shaped_link.sh [options] -- PROGRAM [ARGS...]"

[[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 2 ] && [ "$NODES" -le 200 ] ||
  die_usage "--nodes '$NODES': expected a whole number from 2 to 200"

# A rate as tc reads it: a number and a unit; returned in bits per second.
rate_bps() {
  local v="${1,,}" num unit
  [[ "$v" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$ ]] || return 1
  num="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[3]}"
  local mult
  case "$unit" in
    bit) mult=1 ;; kbit) mult=1e3 ;; mbit) mult=1e6 ;; gbit) mult=1e9 ;; tbit) mult=1e12 ;;
    bps) mult=8 ;; kbps) mult=8e3 ;; mbps) mult=8e6 ;; gbps) mult=8e9 ;; tbps) mult=8e12 ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { b = n * m; if (b < 8000) exit 1; printf "%.0f\n", b }'
}
size_bytes() {
  local v="${1,,}"
  [[ "$v" =~ ^([0-9]+)(b|k|kb|m|mb)?$ ]] || return 1
  case "${BASH_REMATCH[2]}" in
    ""|b) echo "${BASH_REMATCH[1]}" ;; k|kb) echo $((BASH_REMATCH[1] * 1024)) ;; m|mb) echo $((BASH_REMATCH[1] * 1048576)) ;;
  esac
}
if [ "$RATE" != none ]; then
  BPS="$(rate_bps "$RATE")" ||
    die_usage "--rate '$RATE': expected a number and a unit as tc spells them (10gbit, 500mbit, 1.5gbit, 100mbps), at least 8kbit, or none"
  if [ -z "$BURST" ]; then  # what the link carries in 1 ms, at least 256 KiB
    BURST_B=$(awk -v b="$BPS" 'BEGIN { x = b / 8 / 1000; if (x < 262144) x = 262144; printf "%.0f\n", x }')
  else
    BURST_B="$(size_bytes "$BURST")" || die_usage "--burst '$BURST': expected bytes as 256kb, 4mb or 300000"
    [ "$BURST_B" -ge 2048 ] || die_usage "--burst '$BURST': at least 2kb (one full frame)"
  fi
elif [ -n "$BURST" ]; then
  die_usage "--burst needs --rate (an unshaped link has no bucket)"
fi

# The CPUs this script may use, divided among the nodes.
mapfile -t CPUS < <(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ if (NF == 2) for (i = $1; i <= $2; ++i) print i; else if ($1 != "") print $1 }')
[ ${#CPUS[@]} -ge 1 ] || CPUS=($(seq 0 $(($(nproc) - 1))))
node_cpus() {  # node i's CPU list
  local i="$1" n=${#CPUS[@]} per k list=()
  if [ "$n" -ge "$NODES" ]; then
    per=$((n / NODES))
    for ((k = i * per; k < (i + 1) * per; ++k)); do list+=("${CPUS[k]}"); done
  else
    list=("${CPUS[i % n]}")
  fi
  (IFS=,; echo "${list[*]}")
}

PREFIX="hddp-link-$$"
HOSTS=() MAP=()
for ((i = 0; i < NODES; ++i)); do
  HOSTS+=("10.99.0.$((i + 1)):1")
  MAP+=("10.99.0.$((i + 1))=node$i@$PREFIX-n$i@$(node_cpus "$i")")
done
THREADS="${OMP_NUM_THREADS:-$(node_cpus 0 | tr ',' '\n' | wc -l)}"
MPIEXEC=(mpiexec -n "$NODES" --host "$(IFS=,; echo "${HOSTS[*]}")" --bind-to none
  --mca plm_rsh_agent "$HERE/node_agent.sh" --mca plm_rsh_no_tree_spawn 1
  --mca btl tcp,self --mca btl_tcp_if_include 10.99.0.0/24 --mca oob_tcp_if_include 10.98.0.0/24
  -x OMP_NUM_THREADS="$THREADS" "${EXTRA[@]}" "$@")
if [ "$DRY" = 1 ]; then
  echo "nodes: ${MAP[*]}"
  [ "$RATE" = none ] && echo "link: unshaped veth" || echo "link: $RATE ($BPS bit/s) each way, burst $BURST_B bytes"
  printf '%q ' "${MPIEXEC[@]}"; echo
  exit 0
fi

# ---- What this machine must allow -------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die_env "network namespaces need root (run it as root, or with sudo)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI refuses root unless told
for t in ip tc taskset unshare hostname mpiexec; do
  command -v "$t" >/dev/null || die_env "'$t' is not installed (Debian: apt-get install iproute2 util-linux hostname openmpi-bin)"
done

# ---- The network, and its removal however the script ends ---------------------------------
NSS=()
remove_ns() {  # ends what still runs in each namespace, then removes it
  local ns pids k
  for ns in "$@"; do
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
    for ((k = 0; k < 50; ++k)); do  # up to 5 s for them to go, then SIGKILL
      pids="$(ip netns pids "$ns" 2>/dev/null || true)"
      [ -z "$pids" ] && break
      sleep 0.1
    done
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
CUT_PID="" MPI_PID=""
cleanup() {
  [ -n "$CUT_PID" ] && kill "$CUT_PID" 2>/dev/null || true
  [ ${#NSS[@]} -gt 0 ] && remove_ns "${NSS[@]}"
  NSS=()
}
# A signal to the script goes on to mpiexec (which passes it to the ranks); then the namespaces
# go, with whatever still runs in them. mpiexec runs in the background so that the signal is
# handled at once, not when mpiexec ends.
on_signal() {
  [ -n "$MPI_PID" ] && kill -TERM "$MPI_PID" 2>/dev/null
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

# Namespaces left by a run that was killed outright (its PID is gone).
for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep '^hddp-link-[0-9]*-' || true); do
  owner="${ns#hddp-link-}"; owner="${owner%%-*}"
  kill -0 "$owner" 2>/dev/null || remove_ns "$ns"
done

mk() {  # runs one ip/tc command; its error message, if any, ends the script
  local e
  e="$("$@" 2>&1 >/dev/null)" || die_env "'$*' failed: $e"
}
shape() {  # shape NS DEV: a token bucket on DEV's egress
  [ "$RATE" = none ] && return 0
  mk ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$BPS"bit burst "$BURST_B" latency 200ms
}
SW="$PREFIX-sw"
NSS+=("$SW")
mk ip netns add "$SW"
mk ip -n "$SW" link set lo up
for br in br-d br-c; do
  mk ip -n "$SW" link add "$br" type bridge
  mk ip -n "$SW" link set "$br" up
done
for ((i = 0; i < NODES; ++i)); do
  ns="$PREFIX-n$i"
  NSS+=("$ns")
  mk ip netns add "$ns"
  mk ip -n "$ns" link set lo up
  for net in d c; do  # d: data (shaped), c: control
    mk ip link add "h$$$net$i" type veth peer name "s$$$net$i"
    mk ip link set "h$$$net$i" netns "$ns"
    mk ip link set "s$$$net$i" netns "$SW"
    mk ip -n "$ns" link set "h$$$net$i" name "$([ $net = d ] && echo data || echo ctl)"
    mk ip -n "$SW" link set "s$$$net$i" master "br-$net"
    mk ip -n "$SW" link set "s$$$net$i" up
  done
  mk ip -n "$ns" addr add "10.99.0.$((i + 1))/24" dev data
  mk ip -n "$ns" addr add "10.98.0.$((i + 1))/24" dev ctl
  mk ip -n "$ns" link set data up
  mk ip -n "$ns" link set ctl up
  shape "$ns" data            # out of node i
  shape "$SW" "s$$d$i"         # into node i
done

if [ -n "$CUT_WHEN" ]; then  # cut the last node's data cable once the file appears
  last=$((NODES - 1))
  ( while [ ! -e "$CUT_WHEN" ]; do sleep 0.1; done
    ip -n "$PREFIX-n$last" link set data down 2>/dev/null
    ip -n "$SW" link set "s$$d$last" down 2>/dev/null
    echo "shaped_link: cut the data link of node $last (10.99.0.$((last + 1)))" >&2 ) &
  CUT_PID=$!
fi

[ "$RATE" = none ] && desc="unshaped veth" || desc="$RATE each way (tbf, burst $BURST_B B)"
echo "shaped_link: $NODES nodes, data link $desc, $THREADS OpenMP threads per rank" >&2
export HDDP_LINK_MAP="${MAP[*]}"
rc=0
ip netns exec "$PREFIX-n0" unshare --uts taskset -c "$(node_cpus 0)" \
  /bin/sh -c 'hostname node0 && exec "$@"' sh "${MPIEXEC[@]}" <&0 &
MPI_PID=$!
wait "$MPI_PID" || rc=$?
exit "$rc"
