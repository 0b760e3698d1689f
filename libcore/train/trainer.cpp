#include "train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "comm/trace_gather.hpp"
#include "nn/backend.hpp"
#include "train/param_home.hpp"
#include "train/precision.hpp"
#include "util/log.hpp"
#include "util/trace.hpp"

namespace sieve::train {

namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) {
  g_stop = 1;
}

// The model's per-unit forward/backward spans on the step timeline (--trace).
void trace_model_unit(const char* unit, bool backward, double t0_us, double t1_us) {
  trace::complete(cat(backward ? "bwd " : "fwd ", unit), "layer", t0_us, t1_us);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool stop_signal_seen() {
  return g_stop != 0;
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void exit_for_requeue(const Comm& comm, const std::string& checkpoint) {
  log::info(cat("stop signal: checkpoint ", checkpoint,
                " written; exiting with code 75 (continue with --resume)"));
  comm.barrier();
  finalize_mpi();
  std::exit(kExitRequeue);
}

Trainer::Trainer(const Comm& comm, TrainOptions opt, std::unique_ptr<SampleSource> source,
                 const SplitData& train, EvalSplit test, const DatasetMeta& meta,
                 std::string ckpt_dir, std::string metrics_path, std::string config_yaml)
    : comm_(comm),
      o_(std::move(opt)),
      source_(std::move(source)),
      test_(std::move(test)),
      meta_(meta),
      ckpt_dir_(std::move(ckpt_dir)),
      metrics_path_(std::move(metrics_path)),
      config_yaml_(std::move(config_yaml)) {
  SIEVE_ASSERT(o_.loss == "cross_entropy" || o_.loss == "gce", "training loss ", o_.loss,
               " (pretrain resolves auto before it trains)");
  nn::ModelSpec& s = o_.spec;
  s.num_classes = meta.num_classes;
  if (train.image) {
    s.in_channels = train.c;
    s.in_height = train.h;
    s.in_width = train.w;
    s.in_features = 0;
  } else {
    s.in_features = train.f;
  }
  SIEVE_CHECK(source_->batch_size() >= comm.size(), "global batch of ", source_->batch_size(),
              " samples is smaller than the ", comm.size(),
              " ranks: every rank needs at least one sample per step");
  build_model();
  o_.sched.global_batch = source_->batch_size();
  o_.sched.epochs = o_.epochs;
  o_.sched.steps_per_epoch = source_->steps_per_epoch();
}

Trainer::~Trainer() = default;

void Trainer::build_model() {
  model_ = nn::make_model(o_.spec);
  nn::init_params(*model_, o_.seed);
  opt_ = std::make_unique<SgdOptimizer>(param_slices(*model_), model_->num_params(), o_.opt);
}

// precision: auto where the network decides (TrainOptions::precision_per_network): a resumed
// run keeps the dtype its checkpoint was trained with, so that it continues as it began; a
// fresh one takes the decision for its network (train/precision.hpp: recorded, or timed).
// Another dtype than the one the model was built with rebuilds it (the same seed's initial
// weights; a checkpoint's replace them next).
void Trainer::settle_precision(bool resume) {
  if (!o_.precision_per_network) return;
  const std::string from = resume ? agreed_latest_checkpoint(comm_, ckpt_dir_) : "";
  nn::DType d;
  if (!from.empty()) {
    d = checkpoint_precision(from);
    log::info(
        cat(o_.precision_key, ": auto -> ", nn::dtype_name(d), " (as ", from, " was trained)"));
  } else {
    d = timed_auto_precision(comm_, o_.spec, source_->batch_size(), o_.micro_batch,
                             o_.precision_key, o_.precision_record_dir);
  }
  if (d == o_.spec.dtype) return;
  o_.spec.dtype = d;
  build_model();
}

void Trainer::broadcast_state() {
  if (model_->device() == nn::Device::cpu) {
    comm_.bcast(model_->params(), model_->num_params());
  } else {
    std::vector<float> p = model_->params_to_host();
    comm_.bcast(p.data(), p.size());
    model_->params_from_host(p.data());
  }
  broadcast_buffers();
}

// Each rank's BN running statistics follow its own micro-batches; DDP broadcasts rank 0's
// before every forward pass, 2 collectives per BN layer per step (40 for a ResNet-18: 1.4 % of
// a 16-image step on 2 ranks here, more across nodes). A training-mode forward never reads
// them, and rank 0's own never depend on the others', so broadcasting them only before they
// are read (evaluation, checkpoint, the end of each epoch, after which the model may be
// written) leaves the weights and rank 0's statistics (the ones written) bitwise those of a
// per-step broadcast; and every rank now evaluates with exactly those (with the per-step
// broadcast the others used their own last update).
void Trainer::broadcast_buffers() {
  if (comm_.size() == 1) return;
  for (auto& b : model_->buffers()) {
    if (model_->device() == nn::Device::cpu) {
      comm_.bcast(b.data, b.size);
      continue;
    }
    std::vector<float> v(b.size);
    model_->buffer_to_host(b, v.data());
    comm_.bcast(v.data(), v.size());
    model_->buffer_from_host(b, v.data());
  }
}

void Trainer::checkpoint(const TrainState& st) {
  source_->quiesce();  // no read-ahead on another thread while this one writes HDF5
  broadcast_buffers();
  const std::string path = checkpoint_name(ckpt_dir_, st.step);
  if (sync_) sync_->collect_optimizer_state(*opt_);  // parameter server: momentum shards
  if (home_) home_->optimizer_to_host(*opt_);        // device home: its momentum
  save_checkpoint(path, *model_, *opt_, st, config_yaml_, comm_);
  if (comm_.is_root()) prune_checkpoints(ckpt_dir_, o_.ckpt_keep);
}

std::pair<double, double> Trainer::evaluate(const EvalSplit& d, const std::vector<int64_t>* rows,
                                            const EvalHook& on_logits) {
  source_->quiesce();           // streamed evaluation reads the file on this thread
  broadcast_buffers();          // every rank evaluates with rank 0's running statistics
  double stats[3] = {0, 0, 0};  // loss sum, correct, n
  Batch b;
  for_each_eval_block(
      d, rows, comm_.rank(), comm_.size(),
      [&](const SplitData& block, const std::vector<int64_t>& local) {
        for (size_t i = 0; i < local.size(); i += size_t(o_.eval_batch)) {
          const int n = int(std::min<size_t>(size_t(o_.eval_batch), local.size() - i));
          make_batch(block, meta_, local.data() + i, n, Augmentation{}, 0, 0, &b);
          const float* logits = model_->forward(b.x.data(), n, false);
          if (on_logits)
            on_logits(block, std::vector<int64_t>(local.begin() + i, local.begin() + i + n), logits,
                      model_->num_classes());
          int correct = 0;
          double loss = nn::softmax_cross_entropy(logits, b.y.data(), n, model_->num_classes(),
                                                  0.0f, nullptr, &correct);
          stats[0] += loss * n;
          stats[1] += correct;
          stats[2] += n;
        }
      });
  comm_.allreduce_sum(stats, 3);
  if (stats[2] == 0) return {0.0, 0.0};
  return {stats[0] / stats[2], stats[1] / stats[2]};
}

// ---- one run: the loop and its phases ----

namespace {
// Fault injection for tests (docs/training.md), read once per run from SIEVE_DEBUG_*: poison
// a gradient, raise SIGUSR1, or die by SIGKILL (as `kill -9`) at a given optimizer step, on
// rank 0; and slow every step down (ms) so that a fault test's signal or kill lands mid-run
// even on a fast, idle machine (changes no numbers).
struct FaultInjection {
  int64_t nan_step = -1, signal_step = -1, kill_step = -1, step_delay_ms = -1;

  static FaultInjection from_env() {
    auto env_step = [](const char* name) {
      const char* v = std::getenv(name);
      return v && *v ? int64_t(std::atoll(v)) : int64_t(-1);
    };
    return {env_step("SIEVE_DEBUG_NAN_STEP"), env_step("SIEVE_DEBUG_SIGNAL_STEP"),
            env_step("SIEVE_DEBUG_KILL_STEP"), env_step("SIEVE_DEBUG_STEP_DELAY_MS")};
  }
  bool poisons_gradient(int64_t step, bool root) const { return step == nan_step && root; }
  void after_gradient(int64_t step, bool root) const {
    if (step == signal_step && root) std::raise(SIGUSR1);
    if (step == kill_step && root) std::raise(SIGKILL);
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
  }
};

// This rank's rows of one step, one list per micro-batch.
struct StepChunks {
  std::shared_ptr<const SplitData> data;
  std::vector<std::vector<int64_t>> parts;
};

// What a step adds up over the ranks (one allreduce): loss sum, correct, non-finite, stop.
struct StepStats {
  double v[4] = {0, 0, 0, 0};
  double& loss_sum() { return v[0]; }
  double& correct() { return v[1]; }
  double& non_finite() { return v[2]; }
  double& stop() { return v[3]; }
};

std::string fixed_str(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return std::string(b);
}
}  // namespace

// The state of one run() and its phases, in the order a step runs them.
class Trainer::Loop {
 public:
  Loop(Trainer& t, bool resume);
  ~Loop();
  int64_t first_epoch() const { return st_.epoch; }
  void train_epoch(int64_t e);
  void end_epoch(int64_t e);
  TrainResult finish();

 private:
  TrainState restore(bool resume);
  void reset_metrics();
  void setup_reduction();
  StepChunks chunks_of(int64_t e, int64_t s);
  void forward_backward(int64_t e, const StepChunks& chunks, const StepChunks& next,
                        StepStats& stats);
  void reduce_gradients(StepStats& stats);
  [[noreturn]] void diverge(int64_t e, const StepStats& stats);
  void log_comm_summary();
  void write_trace_metadata();

  Trainer& t_;
  const Comm& comm_;
  const TrainOptions& o_;
  const int64_t steps_per_epoch_, batch_;
  LrSchedule sched_;
  TrainState st_;
  std::string resumed_from_;
  int64_t per_rank_ = 0, micro_ = 0;
  ParamHome* home_ = nullptr;
  GradSync* reducer_ = nullptr;
  FaultInjection faults_ = FaultInjection::from_env();
  TrainResult res_;
  Prefetcher pf_;
  MetricsWriter metrics_;
  double t0_ = 0, run_start_ = 0, epoch_start_ = 0;
  int64_t start_step_ = 0, epoch_images_ = 0;
  std::unique_ptr<log::Progress> progress_;
  std::vector<float> dlogits_;
};

Trainer::Loop::Loop(Trainer& t, bool resume)
    : t_(t),
      comm_(t.comm_),
      o_(t.o_),
      steps_per_epoch_(t.source_->steps_per_epoch()),
      batch_(t.source_->batch_size()),
      sched_(t.o_.sched),
      pf_(t.meta_) {
  st_ = restore(resume);
  t_.broadcast_state();
  trace::set_origin();  // right after a collective: the ranks' timelines line up
  if (trace::enabled()) t_.model_->set_unit_hook(trace_model_unit);
  reset_metrics();
  metrics_ = MetricsWriter(t_.metrics_path_, comm_.is_root());
  per_rank_ = block_range(batch_, comm_.rank(), comm_.size()).size();
  micro_ = o_.micro_batch > 0 ? std::min(o_.micro_batch, per_rank_) : per_rank_;
  const int64_t accum = comm_.allreduce_max((per_rank_ + micro_ - 1) / micro_);
  setup_reduction();

  res_.batch = batch_;
  res_.per_rank_batch = per_rank_;
  res_.precision = nn::dtype_name(t_.model_->dtype());
  res_.accum_steps = accum;
  res_.samples_used = t_.source_->num_active();
  res_.peak_lr = sched_.peak();
  res_.best_test_acc = -1;

  t0_ = now_s() - st_.elapsed_s;
  run_start_ = now_s();
  start_step_ = st_.step;
  progress_ = std::make_unique<log::Progress>("train", o_.epochs * steps_per_epoch_, "steps", 10.0);
}

Trainer::Loop::~Loop() {
  t_.model_->set_grad_ready_hook(nullptr);
  t_.model_->set_unit_hook(nullptr);
}

// A fresh state, or the newest complete checkpoint's (resume), checked against this run.
TrainState Trainer::Loop::restore(bool resume) {
  TrainState st;
  st.seed = o_.seed;
  st.global_batch = batch_;
  st.loader = t_.source_->describe();
  if (resume) resumed_from_ = agreed_latest_checkpoint(comm_, t_.ckpt_dir_);
  const std::string& from = resumed_from_;
  if (from.empty()) {
    if (resume)
      log::info(cat("--resume: no complete checkpoint in ", t_.ckpt_dir_, "; starting fresh"));
    return st;
  }
  st = load_checkpoint(from, *t_.model_, *t_.opt_);
  SIEVE_CHECK(st.seed == o_.seed, from, ": checkpoint seed ", st.seed,
              " differs from the configured seed ", o_.seed);
  const std::string loader = t_.source_->describe();
  SIEVE_CHECK(st.loader == loader, from, ": checkpoint was written by the ", st.loader,
              " loader, this run uses ", loader,
              " (a streamed run resumes exactly only with the same data.memory_budget_mb, "
              "data.loader and rank count)");
  st.loader = loader;
  SIEVE_CHECK(st.global_batch == batch_, from, ": checkpoint was written with ", st.global_batch,
              " samples per step, the configuration gives ", batch_,
              " (resume needs the same global batch; the rank count may differ)");
  log::info(cat("resuming from ", from, " (epoch ", st.epoch, ", step ", st.step, ")"));
  return st;
}

// Metrics: a resumed run keeps the lines of epochs finished before its checkpoint.
void Trainer::Loop::reset_metrics() {
  const std::string& path = t_.metrics_path_;
  if (!comm_.is_root() || path.empty()) return;
  std::vector<Json> keep;
  if (!resumed_from_.empty() && std::filesystem::exists(path))
    for (auto& j : read_json_lines(path))
      if (j.value("epoch", int64_t(1) << 60) < st_.epoch + 1) keep.push_back(j);
  MetricsWriter w(path, true, /*truncate=*/true);
  for (auto& j : keep) w.write(j);
}

// Where the step meets the parameters (train/param_home.hpp), and the gradient reduction over
// that home's buffer; on the host and device homes its buckets start during backward, as
// gradients become final.
void Trainer::Loop::setup_reduction() {
  t_.sync_.reset();  // a previous run's reducer points into its home's buffers
  t_.home_ = make_param_home(o_.param_home, o_.param_home_key, *t_.model_, *t_.opt_);
  home_ = t_.home_.get();
  t_.sync_ = home_->make_reducer(o_.comm, comm_);
  reducer_ = t_.sync_.get();
}

StepChunks Trainer::Loop::chunks_of(int64_t e, int64_t s) {
  StepChunks out;
  StepPart part = t_.source_->rank_part(e, s);
  out.data = std::move(part.data);
  const auto& rows = part.rows;
  for (size_t i = 0; i < rows.size(); i += size_t(micro_))
    out.parts.emplace_back(rows.begin() + i,
                           rows.begin() + std::min(rows.size(), i + size_t(micro_)));
  return out;
}

// Forward and backward over this rank's micro-batches, the next batch loading meanwhile;
// the reducer is armed before the last backward so that its buckets start during it.
void Trainer::Loop::forward_backward(int64_t e, const StepChunks& chunks, const StepChunks& next,
                                     StepStats& stats) {
  nn::Model& m = *t_.model_;
  const int k = m.num_classes();
  for (size_t c = 0; c < chunks.parts.size(); ++c) {
    Batch b = [&] {
      trace::Span span("data", "wait for batch");
      return pf_.take();
    }();
    if (c + 1 < chunks.parts.size())
      pf_.request(chunks.data, chunks.parts[c + 1], o_.augment, o_.seed, e);
    else if (!next.parts.empty())
      pf_.request(next.data, next.parts[0], o_.augment, o_.seed, e);
    const int n = b.n;
    const double fwd0 = trace::now_us();
    const float* logits = m.forward(b.x.data(), n, true);
    trace::complete("forward", "compute", fwd0, trace::now_us());
    dlogits_.resize(size_t(n) * k);
    int correct = 0;
    double loss = o_.loss == "gce"
                      ? nn::generalized_cross_entropy(logits, b.y.data(), n, k, o_.gce_q,
                                                      dlogits_.data(), &correct)
                      : nn::softmax_cross_entropy(logits, b.y.data(), n, k, o_.label_smoothing,
                                                  dlogits_.data(), &correct);
    if (t_.batch_hook_) t_.batch_hook_(e, *chunks.data, chunks.parts[c], logits, k);
    const float scale = float(double(n) / double(batch_));
    for (auto& v : dlogits_) v *= scale;
    if (c + 1 == chunks.parts.size()) reducer_->arm();
    const double bwd0 = trace::now_us();
    m.backward(dlogits_.data());
    trace::complete("backward", "compute", bwd0, trace::now_us());
    stats.loss_sum() += loss * n;
    stats.correct() += correct;
  }
  if (chunks.parts.empty()) reducer_->arm();
}

// The gradient summed over the ranks, checked for non-finite values; the step's statistics
// (and any stop signal) agreed on by every rank.
void Trainer::Loop::reduce_gradients(StepStats& stats) {
  home_->after_backward();
  reducer_->finish();
  if (faults_.poisons_gradient(st_.step, comm_.is_root())) home_->poison_gradient();
  const double gsum = home_->gradient_sum();
  stats.non_finite() = std::isfinite(gsum) && std::isfinite(stats.loss_sum()) ? 0 : 1;
  faults_.after_gradient(st_.step, comm_.is_root());
  stats.stop() = stop_signal_seen() ? 1 : 0;
  trace::Span span("wait", "step statistics allreduce");
  comm_.allreduce_sum(stats.v, 4);
}

void Trainer::Loop::diverge(int64_t e, const StepStats& stats) {
  const std::string last = agreed_latest_checkpoint(comm_, t_.ckpt_dir_);
  res_.steps = st_.step;
  res_.elapsed_s = now_s() - t0_;
  throw Diverged(cat("divergence at step ", st_.step, " (epoch ", e + 1,
                     "): ", std::isfinite(stats.v[0]) ? "non-finite gradient" : "non-finite loss",
                     "; stopped without writing a checkpoint; last good checkpoint: ",
                     last.empty() ? "none" : last),
                 st_.step, e + 1, res_);
}

// One epoch of optimizer steps: next batch, forward, zero grad, backward, reduce, update.
void Trainer::Loop::train_epoch(int64_t e) {
  nn::Model& m = *t_.model_;
  epoch_start_ = now_s();
  epoch_images_ = 0;
  StepChunks chunks =
      st_.step_in_epoch < steps_per_epoch_ ? chunks_of(e, st_.step_in_epoch) : StepChunks{};
  if (!chunks.parts.empty()) pf_.request(chunks.data, chunks.parts[0], o_.augment, o_.seed, e);
  for (int64_t s = st_.step_in_epoch; s < steps_per_epoch_; ++s) {
    const double lr = sched_.lr_at(st_.step);
    trace::Span step_span("step", cat("step ", st_.step));
    m.zero_grad();
    StepStats stats;
    StepChunks next = (s + 1 < steps_per_epoch_) ? chunks_of(e, s + 1) : StepChunks{};
    forward_backward(e, chunks, next, stats);
    reduce_gradients(stats);
    if (stats.non_finite() > 0) diverge(e, stats);
    {
      trace::Span span("optimizer", "optimizer step");
      home_->update(*reducer_, *t_.opt_, lr);
    }
    ++st_.step;
    st_.step_in_epoch = s + 1;
    st_.loss_sum += stats.loss_sum();
    st_.correct += int64_t(stats.correct());
    st_.seen += batch_;
    epoch_images_ += batch_;
    chunks = std::move(next);
    progress_->update(st_.step);
    const bool stop = stats.stop() > 0;
    if (stop || (o_.ckpt_every_steps > 0 && st_.step % o_.ckpt_every_steps == 0 &&
                 s + 1 < steps_per_epoch_)) {
      st_.elapsed_s = now_s() - t0_;
      t_.checkpoint(st_);
      if (stop) throw StopRequested{checkpoint_name(t_.ckpt_dir_, st_.step)};
    }
  }
  reducer_->drain();  // stale-synchronous PS: rounds in flight are applied before evaluating
  // Its span here, not in broadcast_buffers: broadcast_state calls that too, before the
  // trace's origin is set, where a span would land on the previous run's timeline.
  trace::Span span("wait", "broadcast BN buffers");
  t_.broadcast_buffers();
}

// End of epoch: statistics, evaluation, the epoch hook, metrics, log line, checkpoint.
void Trainer::Loop::end_epoch(int64_t e) {
  const double train_loss = st_.seen ? st_.loss_sum / double(st_.seen) : 0.0;
  const double train_acc = st_.seen ? double(st_.correct) / double(st_.seen) : 0.0;
  const double epoch_time = now_s() - epoch_start_;
  Json rec;
  rec["epoch"] = e + 1;
  rec["step"] = st_.step;
  rec["lr"] = sched_.lr_at(std::max<int64_t>(0, st_.step - 1));
  rec["train_loss"] = train_loss;
  rec["train_acc"] = train_acc;
  const bool do_eval = !t_.test_.empty() && t_.test_.rows > 0 &&
                       ((o_.eval_every > 0 && (e + 1) % o_.eval_every == 0) || e + 1 == o_.epochs);
  const double elapsed = now_s() - t0_;
  if (do_eval) {
    auto [tl, ta] = t_.evaluate(t_.test_);
    rec["test_loss"] = tl;
    rec["test_acc"] = ta;
    rec["gen_gap"] = train_acc - ta;
    res_.final_test_acc = ta;
    res_.final_test_loss = tl;
    if (ta > res_.best_test_acc) {
      res_.best_test_acc = ta;
      res_.best_epoch = e + 1;
      res_.time_to_best_s = now_s() - t0_;
    }
  }
  const double ips = epoch_time > 0 ? double(epoch_images_) / epoch_time : 0.0;
  rec["images_per_s"] = ips;
  rec["images_per_s_per_rank"] = ips / comm_.size();
  rec["elapsed_s"] = elapsed;
  const int64_t total_steps = o_.epochs * steps_per_epoch_;
  const double done_frac = double(st_.step - start_step_) / double(total_steps - start_step_);
  const double eta = done_frac > 0 ? (now_s() - run_start_) * (1 - done_frac) / done_frac : 0;
  rec["eta_s"] = eta;
  if (t_.epoch_hook_) t_.epoch_hook_(e + 1, rec);
  metrics_.write(rec);
  log::info(cat("epoch ", e + 1, "/", o_.epochs, ": loss ", train_loss, " acc ", train_acc,
                do_eval ? cat(" | test loss ", rec["test_loss"].get<double>(), " acc ",
                              rec["test_acc"].get<double>())
                        : std::string(),
                " | lr ", rec["lr"].get<double>(), " | ", int64_t(ips), " img/s | ETA ",
                log::format_duration(eta)));
  res_.final_train_acc = train_acc;
  res_.final_train_loss = train_loss;
  st_.epoch = e + 1;
  st_.step_in_epoch = 0;
  st_.loss_sum = 0;
  st_.correct = st_.seen = 0;
  const bool last = e + 1 == o_.epochs;
  if (o_.ckpt_every_epochs > 0 && ((e + 1) % o_.ckpt_every_epochs == 0 || last)) {
    st_.elapsed_s = now_s() - t0_;
    t_.checkpoint(st_);
  }
}

// Rank 0's view of what the communication strategy did: the numbers behind the timeline.
void Trainer::Loop::log_comm_summary() {
  const SyncStats& cs = reducer_->stats();
  if (cs.steps <= 0 || comm_.size() <= 1) return;
  const double n = double(cs.steps);
  const double blocked = cs.finish_wait_s + cs.update_comm_s + cs.negotiation_wait_s;
  log::info(
      cat("comm ", reducer_->name(), ": ", fixed_str(cs.messages / n, 1), " reductions per step (",
          int64_t(100.0 * cs.started_early / std::max<int64_t>(1, cs.messages)),
          " % started during backward), ", fixed_str(cs.bytes / n / 1048576.0, 2),
          " MiB per step; blocked ", fixed_str(1e3 * blocked / n, 2), " ms per step",
          cs.negotiations > 0 ? cat(" (", fixed_str(cs.negotiations / n, 1), " agreement rounds, ",
                                    fixed_str(1e3 * cs.negotiation_wait_s / n, 2), " ms)")
                              : std::string()));
}

// --trace: every rank's timeline gathered into one file, with what the run was.
void Trainer::Loop::write_trace_metadata() {
  if (!trace::enabled()) return;
  const nn::Model& m = *t_.model_;
  trace::write_gathered(
      comm_, trace::path(),
      cat("{\"strategy\":\"", o_.comm.strategy, "\",\"ranks\":", comm_.size(), ",\"arch\":\"",
          o_.spec.arch, "\",\"width\":", o_.spec.width, ",\"global_batch\":", batch_,
          ",\"buckets\":", reducer_->num_buckets(), ",\"params\":", m.num_params(),
          ",\"bucket_mb\":", o_.comm.bucket_mb, ",\"cycle_ms\":", o_.comm.cycle_ms,
          ",\"fusion_mb\":", o_.comm.fusion_mb, ",\"servers\":", o_.comm.servers,
          ",\"tensors\":", m.param_info().size(), "}"));
}

TrainResult Trainer::Loop::finish() {
  progress_->finish();
  t_.model_->set_grad_ready_hook(nullptr);
  t_.model_->set_unit_hook(nullptr);
  log_comm_summary();
  write_trace_metadata();
  if (res_.final_test_acc < 0 && !t_.test_.empty() &&
      t_.test_.rows > 0) {  // resumed after the last epoch
    auto [tl, ta] = t_.evaluate(t_.test_);
    res_.final_test_acc = res_.best_test_acc = ta;
    res_.final_test_loss = tl;
  }
  res_.steps = st_.step;
  res_.elapsed_s = now_s() - t0_;
  const double run_time = now_s() - run_start_;
  res_.images_per_s = run_time > 0 ? double((st_.step - start_step_) * batch_) / run_time : 0.0;
  res_.images_per_s_per_rank = res_.images_per_s / comm_.size();
  t_.source_->quiesce();  // the caller writes the model (HDF5) next
  return res_;
}

TrainResult Trainer::run(bool resume) {
  install_stop_handlers();
  settle_precision(resume);
  Loop loop(*this, resume);
  for (int64_t e = loop.first_epoch(); e < o_.epochs; ++e) {
    loop.train_epoch(e);
    loop.end_epoch(e);
  }
  return loop.finish();
}

}  // namespace sieve::train
