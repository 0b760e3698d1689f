# The stage graph of the Sieve pipeline, defined once. Sourced by the local runner
# (pipelines/run_local.sh) and by the Slurm submitter (slurm/full_pipeline.sh) so that
# both run the same programs in the same order.
#
# Each stage: name, program, kind, and whether it trains (training stages get the Slurm
# pre-timeout signal and --requeue, and resume from their checkpoints when requeued).
#   kind=single : one MPI job
#   kind=array  : one job per sweep index (train_scaled --sweep-size tells how many)
# Every stage depends on the stage before it (a chain); a stage reads the previous stages'
# outputs from run.dir (see config/sections.hpp RunPaths and docs/formats.md).

SIEVE_STAGES=(shard pretrain features embed filter sweep report)

declare -A SIEVE_STAGE_TOOL=(
  [shard]=shard_dataset
  [pretrain]=pretrain
  [features]=extract_features
  [embed]=reduce_dims
  [filter]=cluster_filter
  [sweep]=train_scaled
  [report]=report
)
declare -A SIEVE_STAGE_KIND=(
  [shard]=single [pretrain]=single [features]=single [embed]=single
  [filter]=single [sweep]=array [report]=single
)
declare -A SIEVE_STAGE_TRAINS=(
  [shard]=0 [pretrain]=1 [features]=0 [embed]=0 [filter]=0 [sweep]=1 [report]=0
)

# What a stage's outputs depend on, for the local runner's "is this stage current" check
# (pipelines/run_local.sh): the config it reads and the files it reads.
#   SIEVE_STAGE_CONFIG : the config sections (or single keys) its program reads, and no
#                        more: a change elsewhere (e.g. scaled.sweep) leaves it current
#   SIEVE_STAGE_INPUTS : the stages whose outputs it reads; shard reads the source named by
#                        data.path instead (its size and mtime are part of shard's key)
declare -A SIEVE_STAGE_CONFIG=(
  [shard]="run.seed data" [pretrain]="run.seed data pretrain" [features]="features"
  [embed]="run.seed embed" [filter]="run.seed filter" [sweep]="run.seed data scaled"
  [report]="run.name data scaled report"
)
declare -A SIEVE_STAGE_INPUTS=(
  [shard]="" [pretrain]="shard" [features]="shard pretrain" [embed]="features"
  [filter]="shard features embed" [sweep]="shard filter"
  [report]="shard pretrain features embed filter sweep"
)

# Cross-fitting's fold models (pretrain.folds = K >= 2; docs/detection.md). Locally pretrain
# trains them itself, after the main model. On Slurm the pretrain job trains the main model
# only (pretrain --skip-folds) and the K fold models are a job array (pretrain --fold k), run
# after it and before the next stage: a stage outside the chain, which slurm/full_pipeline.sh
# inserts after pretrain where `pretrain --fold-count` is 2 or more.
SIEVE_STAGE_TOOL[folds]=pretrain
SIEVE_STAGE_KIND[folds]=array
SIEVE_STAGE_TRAINS[folds]=1
# The flag that tells an array stage's program which task it is (Slurm's array task id).
declare -A SIEVE_STAGE_INDEX_FLAG=([sweep]=--sweep-index [folds]=--fold)

# sieve_stage_args STAGE: extra arguments a stage always gets.
sieve_stage_args() {
  case "$1" in
    report) echo "" ;;
    *) echo "" ;;
  esac
}

# sieve_config_value KEY [--config F ... --set k=v ...]: a resolved config value, read
# through a tool so that defaults, layered files and overrides apply exactly as the
# programs see them.
sieve_config_value() {
  local key="$1"
  shift
  shard_dataset "$@" --get "$key"
}
