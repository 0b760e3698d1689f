#!/usr/bin/env bash
# slurm/stage.sh when its step fails, with srun and scontrol replaced by stubs (the real
# two-node case, a node killed under a running stage, is tests/slurm/two_nodes.sh; the race
# this pins, srun returning before slurmctld declares the node down, shows there only now
# and then). What the script must do:
#  - one node: exit with the step's code at once, no probe;
#  - several nodes, every node answers an empty probe step: exit with the step's code at once;
#  - several nodes, the probe fails: wait 3 x SlurmdTimeout + MessageTimeout for Slurm to
#    cancel and requeue the job, then exit with the step's code;
#  - a training stage's exit 75 (checkpointed before the time limit): requeue, exit 0.
set -uo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
work="${SIEVE_BUILD_DIR:-$SRC/build}/test-scratch/fault_stage_node_loss"
rm -rf "$work"
mkdir -p "$work/bin"

# srun: the probe (--mpi=none ... true) exits $STUB_PROBE_RC, the stage exits $STUB_STAGE_RC.
# Every call is logged.
cat >"$work/bin/srun" <<'EOF'
#!/usr/bin/env bash
echo "srun $*" >>"$STUB_LOG"
if [ "${*: -1}" = true ] && [[ " $* " == *" --mpi=none "* ]]; then exit "$STUB_PROBE_RC"; fi
exit "$STUB_STAGE_RC"
EOF
cat >"$work/bin/scontrol" <<'EOF'
#!/usr/bin/env bash
echo "scontrol $*" >>"$STUB_LOG"
if [ "$1 $2" = "show config" ]; then
  printf 'MessageTimeout          = 1 sec\nSlurmdTimeout           = 2 sec\n'
fi
EOF
chmod +x "$work/bin/srun" "$work/bin/scontrol"
export PATH="$work/bin:$PATH" SIEVE_ROOT="$SRC" STUB_LOG="$work/calls.log"
export SLURM_JOB_ID=41 SLURM_NTASKS=2 SLURM_JOB_NODELIST="n[1-2]"

# run_stage NODES STAGE_RC PROBE_RC: runs stage.sh pretrain; sets out, rc, secs.
run_stage() {
  : >"$STUB_LOG"
  local t0=$SECONDS
  out="$(SLURM_JOB_NUM_NODES="$1" STUB_STAGE_RC="$2" STUB_PROBE_RC="$3" \
    bash "$SRC/slurm/stage.sh" pretrain --config x.yaml 2>&1)"
  rc=$?
  secs=$((SECONDS - t0))
}
probes() { grep -c -- '--mpi=none' "$STUB_LOG"; }

run_stage 1 3 0
[ "$rc" = 3 ] || fail "one node, step exit 3: stage.sh exited $rc: $out"
[ "$(probes)" = 0 ] || fail "one node: a probe step ran: $(cat "$STUB_LOG")"
[ "$secs" -le 1 ] || fail "one node: stage.sh took $secs s"
echo "ok: one node, a failed step ends the script at once with its code"

run_stage 2 141 0
[ "$rc" = 141 ] || fail "two nodes answering, step exit 141: stage.sh exited $rc: $out"
[ "$(probes)" = 1 ] || fail "two nodes: expected one probe step: $(cat "$STUB_LOG")"
grep -q -- '--nodes=2 --ntasks=2 --ntasks-per-node=1 true' "$STUB_LOG" ||
  fail "the probe does not run one task on each of the 2 nodes: $(cat "$STUB_LOG")"
echo "$out" | grep -q "all 2 nodes answer" || fail "no line saying the nodes answer: $out"
[ "$secs" -le 1 ] || fail "two nodes answering: stage.sh waited $secs s"
echo "ok: two nodes that answer the probe: exit 141 at once"

run_stage 2 141 1
[ "$rc" = 141 ] || fail "a node lost, step exit 141: stage.sh exited $rc: $out"
# 3 x SlurmdTimeout (2 s) + MessageTimeout (1 s), from the stub's scontrol show config.
echo "$out" | grep -q "does not answer; waiting up to 7 s for Slurm" ||
  fail "no line naming the wait for Slurm's verdict: $out"
[ "$secs" -ge 7 ] || fail "a node lost: stage.sh waited only $secs s, expected 7"
echo "$out" | grep -q "no node failure declared within 7 s; pretrain ends with exit 141" ||
  fail "no line saying the wait ended without a verdict: $out"
echo "ok: a node that does not answer: the script waits $secs s for Slurm, then exits 141"

run_stage 2 75 1
[ "$rc" = 0 ] || fail "checkpointed (75): stage.sh exited $rc: $out"
grep -q "scontrol requeue 41" "$STUB_LOG" || fail "checkpointed: no requeue: $(cat "$STUB_LOG")"
[ "$(probes)" = 0 ] || fail "checkpointed: a probe step ran: $(cat "$STUB_LOG")"
echo "ok: exit 75 still requeues the job without a probe"
echo "stage_node_loss: OK"
