#include "pipeline/slurm_keys.hpp"

namespace sieve {

// Keys of the 'slurm' section: resources for the job scripts (slurm/*.sh). The programs
// themselves never read them; the submitter does (through `--get`), so one
// YAML file describes both the science and the allocation. Times use Slurm's syntax
// (minutes, "HH:MM:SS" or "D-HH:MM:SS"); "" leaves the partition's default.
void add_slurm_keys(ConfigSchema& s) {
  s.add_string("slurm.partition", "", "partition (-p); \"\": the cluster's default partition");
  s.add_string("slurm.account", "", "account to charge (-A); \"\": the user's default");
  s.add_string("slurm.qos", "", "quality of service (--qos); \"\": default");
  s.add_int("slurm.ntasks", 1, "MPI ranks of each multi-rank job (--ntasks)", 1);
  s.add_int("slurm.nodes", 0, "nodes per job (--nodes); 0: let Slurm place the ranks", 0);
  s.add_int("slurm.ntasks_per_node", 0,
            "ranks per node (--ntasks-per-node; one per GPU on GPU nodes); 0: unset", 0);
  s.add_int("slurm.cpus_per_task", 1, "cores per rank (OpenMP threads, data loading)", 1);
  s.add_int("slurm.gpus_per_node", 0, "GPUs per node (--gpus-per-node); 0: CPU-only job", 0);
  s.add_string("slurm.mem", "", "memory per node (--mem, e.g. 64G); \"\": partition default");
  s.add_string("slurm.mpi", "pmix", "srun --mpi plugin", {"pmix", "pmi2", "none"});
  s.add_string("slurm.constraint", "", "node features (--constraint); \"\": none");
  s.add_string("slurm.extra_args", "", "extra sbatch arguments, passed through verbatim");
  // Per-stage wall-clock limits: each stage is its own job, so each gets its own limit.
  s.add_string("slurm.time.shard", "00:30:00", "time limit of shard_dataset");
  s.add_string("slurm.time.pretrain", "04:00:00", "time limit of pretrain");
  s.add_string("slurm.time.folds", "04:00:00",
               "time limit of ONE fold model of pretrain.folds (each task of the fold job "
               "array, pretrain --fold k, gets it)");
  s.add_string("slurm.time.features", "00:30:00", "time limit of extract_features");
  s.add_string("slurm.time.embed", "01:00:00", "time limit of reduce_dims");
  s.add_string("slurm.time.filter", "00:30:00", "time limit of cluster_filter");
  s.add_string("slurm.time.sweep", "02:00:00",
               "time limit of ONE train_scaled sweep run (each array task gets it)");
  s.add_string("slurm.time.report", "00:15:00", "time limit of report");
  s.add_int("slurm.signal_seconds", 120,
            "seconds before the time limit at which Slurm sends USR1 (--signal=B:USR1@N), so "
            "a training job writes a checkpoint and requeues itself",
            0, 3600);
  s.add_bool("slurm.requeue", true, "let jobs be requeued after node failure or USR1 (--requeue)");
  s.add_int("slurm.max_array_parallel", 4,
            "job arrays (the sweep, the fold models): at most this many tasks at once "
            "(--array=0-K%N)",
            1);
  s.add_string("slurm.output_dir", "",
               "directory for the jobs' stdout/stderr; \"\": <run.dir>/logs");
}

}  // namespace sieve
