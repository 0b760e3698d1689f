#!/usr/bin/env bash
# Two Slurm nodes on this machine (label slurm): scripts/slurm_local.sh with
# SIEVE_SLURM_NODES=2 puts the second node in a network namespace (veth pair, its own
# hostname, its own slurmd; munged and the filesystem shared, as on a cluster).
# slurm/full_pipeline.sh runs configs/tiny.yaml at 2 nodes x 1 rank, and node 2 dies
# mid-pretrain (SIGKILL of its slurmd, slurmstepd and rank):
#  - Slurm marks it DOWN and requeues the job; once the node is back the job resumes from its
#    last checkpoint (step > 0), metrics.jsonl holds every epoch once, and the chain completes;
#  - every multi-rank stage logs its two ranks on two different hosts, each node-local rank 0;
#    features.h5, written by both ranks through MPI-IO, holds both ranks' rows; the outputs
#    are complete (check_run.py).
# Skips (77), saying why, where Slurm or network namespaces are not available.
set -uo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (slurmd, network namespaces)"; exit 77; }
for b in slurmctld slurmd munged sbatch srun ip nsenter unshare; do
  command -v "$b" >/dev/null || { echo "skip: $b not installed"; exit 77; }
done
probe="sieve-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "skip: cannot create a network namespace (ip netns add failed: no CAP_SYS_ADMIN?)"
  exit 77
fi
ok=1
ip link add "sp$$a" type veth peer name "sp$$b" 2>/dev/null || ok=0
ip link del "sp$$a" 2>/dev/null
nsenter --net="/run/netns/$probe" unshare --mount --uts true 2>/dev/null || ok=0
ip netns del "$probe"
[ $ok = 1 ] || { echo "skip: veth pairs or mount/UTS namespaces are not available here"; exit 77; }

. "$SRC/scripts/env.sh"
. "$SRC/tests/slurm/slurm_common.bash"
slurm_test_setup two_nodes "${SIEVE_SLURM_TWO_NODES_PORT:-6867}"
export SIEVE_SLURM_NODES=2
# A silent node is declared DOWN (and its jobs requeued) after 10 s instead of 30.
export SIEVE_SLURM_NODE_TIMEOUT=10
"$SRC/scripts/slurm_local.sh" start || fail "could not start the two-node Slurm"
. "$SIEVE_SLURM_DIR/env.sh"
HOST1="$(hostname)"
HOST2="$(sed -n 's/^NodeName=\([^ ]*\) NodeAddr=.*\.2 .*/\1/p' "$SLURM_CONF")"
[ -n "$HOST2" ] && [ "$HOST2" != "$HOST1" ] || fail "slurm.conf names no second node: $(grep NodeName "$SLURM_CONF")"
[ "$(sinfo -h -N -o %N | sort -u | wc -l)" = 2 ] || fail "sinfo does not list 2 nodes: $(sinfo -N)"
cd "$SRC"

# The line every tool logs when its ranks span nodes (libcore/comm describe_placement).
# Both hosts appear, each with node-local rank 0.
check_placement() {
  local log="$1" line
  line="$(grep -o '2 ranks on 2 nodes: .*' "$log")" || fail "$log: no '2 ranks on 2 nodes' line"
  for h in "$HOST1" "$HOST2"; do
    echo "$line" | grep -Eq "rank [01] on $h \(node rank 0\)" || fail "$log: $h not at node rank 0: $line"
  done
}

# The whole chain at 2 nodes x 1 rank, pretrain long enough (12 epochs, a checkpoint each)
# for node 2 to die under it. --wait polls in the background meanwhile.
run="$WORK/run"
epochs=12
timeout 600 slurm/full_pipeline.sh configs/tiny.yaml --wait --set run.dir="$run" \
  --set slurm.nodes=2 --set slurm.ntasks_per_node=1 \
  --set pretrain.epochs=$epochs --set pretrain.checkpoint.every_epochs=1 > "$WORK/pipeline.out" 2>&1 &
pipe=$!
trap 'kill $pipe 2>/dev/null; slurm_test_cleanup' EXIT
t0=$SECONDS
until ls "$run"/pretrain/checkpoints/*.h5 >/dev/null 2>&1; do
  kill -0 $pipe 2>/dev/null || { cat "$WORK/pipeline.out"; fail "pipeline ended before pretrain checkpointed"; }
  [ $((SECONDS - t0)) -lt 180 ] || fail "no pretrain checkpoint appeared"
  sleep 0.2
done
jid="$(sed -n 's/^full_pipeline: pretrain -> job \([0-9]*\)$/\1/p' "$WORK/pipeline.out")"
[ -n "$jid" ] || fail "no pretrain job id in $(cat "$WORK/pipeline.out")"

# Node 2 dies mid-pretrain: its slurmd, slurmstepd and rank 1 are SIGKILLed at once.
"$SRC/scripts/slurm_local.sh" crash-node2 || fail "could not kill $HOST2"
echo "ok: killed $HOST2 (slurmd, job step, rank) after pretrain job $jid's first checkpoint"
# Slurm notices the silent node after SlurmdTimeout, marks it DOWN and requeues the job.
t0=$SECONDS
until scontrol show job "$jid" 2>/dev/null | grep -q 'Restarts=[1-9]'; do
  [ $((SECONDS - t0)) -lt 90 ] || fail "job $jid not requeued after its node died: $(scontrol show job "$jid")"
  sleep 1
done
state="$(sinfo -h -n "$HOST2" -o %T)"
case "$state" in down*) ;; *) fail "$HOST2 is '$state' after its death, expected down" ;; esac
echo "ok: $HOST2 DOWN, job $jid requeued after $((SECONDS - t0)) s"
# The node reboots: its slurmd registers again, the job runs on both nodes and the chain
# goes on.
"$SRC/scripts/slurm_local.sh" boot-node2 || fail "could not restart $HOST2"
wait $pipe || { cat "$WORK/pipeline.out"; fail "pipeline did not complete after the node failure"; }
grep -q "all stages completed" "$WORK/pipeline.out" || fail "no completion line"

# The killed pretrain: requeued, resumed from its checkpoint, every epoch once.
log="$run/logs/tiny-pretrain-$jid.out"
grep -q "CANCELLED .* DUE TO NODE FAILURE" "$log" || fail "the first run did not end by the node failure"
grep -q "restart 1" "$log" || fail "job was not restarted: $(tail -5 "$log")"
step="$(sed -n 's/.*resuming from .*, step \([0-9]*\)).*/\1/p' "$log" | tail -1)"
[ -n "$step" ] && [ "$step" -gt 0 ] || fail "restarted job did not resume from a checkpoint (step '$step')"
[ "$(grep -c '2 ranks on 2 nodes' "$log")" = 2 ] || fail "not both runs of pretrain spanned the two nodes"
/usr/bin/python3 - "$run/pretrain/metrics.jsonl" "$epochs" <<'PY' || fail "metrics.jsonl lost or repeated epochs"
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
epochs = [json.loads(l)["epoch"] for l in open(path) if l.strip()]
assert epochs == list(range(1, want + 1)), f"{path}: epochs {epochs}, expected 1..{want}"
print(f"ok: metrics.jsonl has epochs 1..{want}, each once")
PY
echo "ok: requeued pretrain resumed from step $step and finished all $epochs epochs"

# Every stage: complete outputs, and each multi-rank stage on both hosts at node rank 0.
/usr/bin/python3 tests/support/check_run.py "$run" --sweep-runs 6 || fail "outputs incomplete"
for stage in shard pretrain features embed filter; do
  check_placement "$(ls "$run"/logs/tiny-"$stage"-[0-9]*.out)"
done
check_placement "$(ls "$run"/logs/tiny-sweep-*_0.out)"
echo "ok: 7 stages on 2 nodes; every multi-rank stage ran rank 0 and 1 on $HOST1 and $HOST2, node rank 0 each"
# features.h5 is written through MPI-IO by both ranks, one block of rows each: both halves
# must hold data (a rank's missing write leaves the fill value, zeros).
/usr/bin/python3 - "$run" <<'PY' || fail "features.h5, written from two hosts, lacks one rank's rows"
import sys, h5py, numpy as np
with h5py.File(f"{sys.argv[1]}/features.h5", "r") as f:
    x = f["/train/features"][...]
n = x.shape[0]
for name, part in (("first", x[: n // 2]), ("second", x[n // 2 :])):
    zero = int((np.abs(part).sum(axis=1) == 0).sum())
    assert zero == 0, f"features.h5: {zero} all-zero rows in the {name} half"
print(f"ok: features.h5 {x.shape}: no empty row in either rank's half")
PY

# slurm.requeue=false: no job of the chain may be requeued, not even after a node failure
# (the cluster's JobRequeue=1 would otherwise requeue it). Submitted, inspected, cancelled.
slurm/full_pipeline.sh configs/tiny.yaml --set run.dir="$WORK/norequeue" --set slurm.nodes=2 \
  --set slurm.requeue=false > "$WORK/norequeue.out" 2>&1 || fail "submission failed: $(cat "$WORK/norequeue.out")"
ids="$(sed -n 's/^full_pipeline: [a-z]* -> job \([0-9]*\)$/\1/p' "$WORK/norequeue.out" | tr '\n' ' ')"
[ -n "$ids" ] || fail "no job ids in $(cat "$WORK/norequeue.out")"
flags="$(for j in $ids; do scontrol show job "$j" | grep -o 'Requeue=[0-9]' | head -n 1; done | sort -u)"
scancel $ids
[ "$flags" = "Requeue=0" ] || fail "slurm.requeue=false left jobs requeueable: $flags"
echo "ok: slurm.requeue=false submits every stage with Requeue=0"
echo "two_nodes: OK"
