#!/bin/sh
# Open MPI's rsh launcher agent for bench/link/shaped_link.sh: called as ssh would be,
#   node_agent.sh [ssh options] HOST COMMAND...
# it runs COMMAND (Open MPI's daemon) inside HOST's network namespace, on HOST's CPUs, under
# HOST's node name (a UTS namespace of its own), as HDDP_LINK_MAP says: "ADDRESS=NAME@NS@CPUS ...",
# set by shaped_link.sh.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;  # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
host="$1"
shift
for entry in $HDDP_LINK_MAP; do
  [ "${entry%%=*}" = "$host" ] || continue
  spec="${entry#*=}"            # NAME@NS@CPUS
  name="${spec%%@*}"
  cpus="${spec##*@}"
  ns="${spec#*@}"
  ns="${ns%@*}"
  exec ip netns exec "$ns" unshare --uts taskset -c "$cpus" /bin/sh -c "hostname $name && $*"
done
echo "node_agent: no node '$host' in HDDP_LINK_MAP ($HDDP_LINK_MAP)" >&2
exit 255
