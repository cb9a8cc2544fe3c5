#!/usr/bin/env bash
# Training over a shaped network link (bench/link/shaped_link.sh: each rank on a node of its own,
# a network namespace, joined by a 1 Gbit/s veth link), on 512 Fashion-MNIST images:
#   refusals  the script's bad options (exit 2) and a normal user (exit 3), each with its message
#   bits      every reduce mode and --grad-dtype bf16 over the link give the weights the same
#             run gives over shared memory, bit for bit (2 nodes; 3 nodes in test mode)
#   cut       the last node's data link cut once the first checkpoint exists (--cut-when):
#             the stall watchdog ends the job with exit 4, the report names rank 1, and the
#             checkpoint kept is whole and resumes
#   term      SIGTERM to the script ends the job at once: exit 143, no rank, no namespace left
#   cleanup   no namespace of the script's is left, nor any rank
# No timing is asserted: every wait is on a state (a file, an exit) with a generous bound.
# Needs root and network namespaces: skipped (77) otherwise, as the Slurm tests are.
# Usage: test_link.sh <mnist_train> <mpiexec> <faults_ckpt_tool> <scratch dir> <source dir>
source "$(dirname "$0")/lib.sh" "$@"
LINK=$5/bench/link/shaped_link.sh

if [ "$(id -u)" -ne 0 ]; then echo "skipped: network namespaces need root"; exit 77; fi
probe=hddp-link-probe-$$
if ! ip netns add "$probe" 2>/dev/null; then echo "skipped: cannot make a network namespace here (ip netns add)"; exit 77; fi
ip netns del "$probe"
# A namespace of the script's is named hddp-link-<its PID>-...; one whose script has ended is a
# leak. Counting is not enough: a run here reaps what a killed run left before this test began,
# and another run's namespaces (its script still alive) are not this test's to judge.
ns_list() { ip netns list 2>/dev/null | awk '{ print $1 }' | grep '^hddp-link-[0-9]*-' || true; }
NS_BEFORE=" $(ns_list | tr '\n' ' ') "
leaked_ns() {  # the namespaces, new since the start, whose script has ended
  local ns owner
  for ns in $(ns_list); do
    owner=${ns#hddp-link-}; owner=${owner%%-*}
    [[ $NS_BEFORE == *" $ns "* ]] && continue
    kill -0 "$owner" 2>/dev/null || echo "$ns"
  done
}

SRC=/usr/share/datasets/fashion-mnist
[ -e "$SRC/train-images-idx3-ubyte.gz" ] || { fail "$SRC missing: scripts/setup-deps.sh installs dataset-fashion-mnist"; finish; exit; }
python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" "$SRC" "$WORK/fmnist" 512 128
C=(--data "$WORK/fmnist" --hidden 32 --batch-size 32 --no-plot)
STEPS=8  # 512 images / (2 ranks x 32)
# Over the link: mpiexec's own deadline, as every run in these tests has.
ON_LINK=(bash "$LINK" --rate 1gbit --mpiexec-arg --timeout --mpiexec-arg 120)

refusals() {
  local out rc
  while IFS='|' read -r want_rc want args; do
    # shellcheck disable=SC2086  # $args: the options under test
    out=$(bash "$LINK" $args 2>&1); rc=$?
    [ "$rc" -eq "$want_rc" ] && grep -qF -- "$want" <<<"$out" || fail "shaped_link.sh $args: exit $rc, expected $want_rc and '$want': $out"
  done <<EOF2
2|--rate 'fast': expected a number and a unit|--rate fast -- true
2|--rate '10': expected a number and a unit|--rate 10 -- true
2|--nodes '1': expected a whole number from 2 to 200|--nodes 1 -- true
2|--burst needs --rate|--burst 256kb -- true
2|--burst 'lots': expected bytes|--rate 1gbit --burst lots -- true
2|no program|--rate 1gbit
2|unknown option '--fast'|--fast -- true
EOF2
  # As nobody, from /, the script read from standard input: a clone under /root is not nobody's to read.
  out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups bash -s -- --rate 1gbit -- true <"$LINK" 2>&1); rc=$?
  [ "$rc" -eq 3 ] && grep -q "network namespaces need root" <<<"$out" || fail "as a normal user: exit $rc: $out"
  bash "$LINK" --help | grep -q "^  --cut-when FILE" || fail "--help does not list --cut-when"
}

# same_bits NAME SHM_RANKS [ARGS...]: one epoch over shared memory and over the link, the
# exported weights compared bit for bit.
same_bits() {
  local name=$1 ranks=$2 d=$WORK/bits-$1
  shift 2
  mkdir -p "$d/shm" "$d/link"
  "${MPI[@]}" -n "$ranks" "$BIN" "${C[@]}" --epochs 2 --out "$d/shm" --export "$d/shm/w.st" "$@" >"$d/shm/log" 2>&1 \
    || { fail "$name: the run over shared memory exited $?"; return; }
  "${ON_LINK[@]}" --nodes "$ranks" -- "$BIN" "${C[@]}" --epochs 2 --out "$d/link" --export "$d/link/w.st" "$@" \
    >"$d/link/log" 2>&1 || { fail "$name: the run over the link exited $?"; return; }
  grep -q "^shaped_link: $ranks nodes, data link 1gbit each way" "$d/link/log" || fail "$name: no link line"
  grep -q "^epoch 2/2: train loss" "$d/link/log" || fail "$name: no epoch line over the link"
  cmp -s "$d/shm/w.st" "$d/link/w.st" || fail "$name: the weights over the link differ from those over shared memory"
  echo "  $name: the same bits over the link"
}

bits() {
  local m
  for m in blocking test thread; do same_bits "$m" 2 --reduce-mode "$m"; done
  same_bits bf16-wire 2 --grad-dtype bf16
  same_bits three-nodes 3 --reduce-mode test
}

cut() {
  local d=$WORK/cut pid rc k
  mkdir -p "$d/res" "$d/ref"
  bg "$d/log" "${ON_LINK[@]}" --cut-when "$d/ck" -- "$BIN" "${C[@]}" --epochs 100000 --timeout 5 --out "$d" \
    --checkpoint "$d/ck" --checkpoint-every 1
  pid=$BG
  wait_rc "$pid" 120; rc=$?
  [ "$rc" -eq 4 ] || fail "cut: exit code $rc, expected 4 (stall)"
  grep -q "^shaped_link: cut the data link of node 1" "$d/log" || fail "cut: the link was not cut"
  grep -Eq "^stall: rank 0 \(node node0\) waited [0-9.]+ s \(timeout 5 s\) for .*; rank 1 did not arrive" "$d/log" \
    || fail "cut: no report naming rank 1: $(grep stall "$d/log")"
  grep -q "the last checkpoint '$d/ck' (.*) is kept" "$d/log" || fail "cut: the report does not name the kept checkpoint"
  none_left "$d" 20 || fail "cut: ranks left running"
  # The checkpoint kept: whole (it loads), after an epoch, and it resumes bitwise.
  local info step
  info=$("$TOOL" info "$d/ck") || { fail "cut: the checkpoint kept is unreadable: $info"; return; }
  step=$(sed -n 's/^step //p' <<<"$info")
  [ $((step % STEPS)) -eq 0 ] && [ "$step" -gt 0 ] || { fail "cut: checkpoint at step $step, not after an epoch"; return; }
  k=$((step / STEPS))
  cp "$d/ck" "$d/res/ck"
  "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs $((k + 1)) --out "$d/res" --checkpoint "$d/res/ck" --resume \
    --export "$d/res/w.st" >"$d/res/log" 2>&1 || { fail "cut: the resume exited $?"; return; }
  "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs $((k + 1)) --out "$d/ref" --export "$d/ref/w.st" >"$d/ref/log" 2>&1 \
    || { fail "cut: the uninterrupted run exited $?"; return; }
  cmp -s "$d/res/w.st" "$d/ref/w.st" || fail "cut: resumed from the checkpoint kept, the weights differ from an uninterrupted run's"
  echo "  cut: exit $rc; checkpoint of epoch $k kept, resumed bitwise"
}

# SIGTERM to the script: it ends mpiexec, every rank and every namespace it made at once.
terminated() {
  local d=$WORK/term pid rc
  mkdir -p "$d"
  bg "$d/log" "${ON_LINK[@]}" -- "$BIN" "${C[@]}" --epochs 100000 --out "$d"
  pid=$BG
  wait_for "$d/log" '^epoch 1/100000: train loss' 120 "$pid" || { fail "terminated: no epoch line"; return; }
  kill -TERM "$pid"
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -eq 143 ] || fail "terminated: exit code $rc, expected 143"
  none_left "$d" 20 || fail "terminated: ranks left running"
  local left
  left=$(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^hddp-link-$pid-" || true)
  [ -z "$left" ] || fail "terminated: the script's namespaces left: $left"
  echo "  terminated: exit $rc, no rank and no namespace left"
}

cleanup() {
  local left
  left=$(leaked_ns)
  [ -z "$left" ] || fail "namespaces left behind by ended runs: $left"
  none_left "$WORK" 10 || fail "ranks left running"
}

run_case "shaped_link.sh refuses bad options and a normal user, saying why" refusals
run_case "every reduce mode and the bf16 wire: the same bits over the link as over shared memory" bits
run_case "a cut link: exit 4 through the watchdog, the checkpoint kept whole" cut
run_case "SIGTERM to the script: mpiexec, the ranks and the namespaces gone" terminated
run_case "nothing left behind" cleanup
finish
