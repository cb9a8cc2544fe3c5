# Sourced by tests that signal an MPI job's ranks at a state, not at a time.
#
# signal_ranks PID PATTERN N SIGNAL: waits until mpiexec PID has N children matching PATTERN,
# freezes them (SIGSTOP) at a moment every one has its handler for SIGNAL installed (SigCgt in
# /proc/<pid>/status: a state, not a time), sends them SIGNAL, and lets them go (SIGCONT). Sets
# CAUGHT=1 when it did, 0 when the job ended first or the ranks never had the handler.
signal_ranks() {
  local pid=$1 pattern=$2 n=$3 sig=$4 num ranks ok r m
  num=$(kill -l "$sig")
  CAUGHT=0
  for _ in $(seq 1 3000); do
    ranks=$(pgrep -P "$pid" -f "$pattern" | tr '\n' ' ')
    if [ "$(wc -w <<<"$ranks")" -eq "$n" ]; then
      kill -STOP $ranks 2>/dev/null
      ok=1
      for r in $ranks; do
        m=$(sed -n 's/^SigCgt:\s*//p' "/proc/$r/status" 2>/dev/null)
        [ -n "$m" ] && (( (16#$m >> (num - 1)) & 1 )) || ok=0
      done
      if [ "$ok" -eq 1 ]; then
        kill -"$sig" $ranks
        kill -CONT $ranks
        CAUGHT=1
        return
      fi
      kill -CONT $ranks 2>/dev/null
    fi
    kill -0 "$pid" 2>/dev/null || return
    sleep 0.01
  done
}
