#include "train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "comm/trace_gather.hpp"
#include "config/seeds.hpp"
#include "nn/backend.hpp"
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

TrainOptions read_train_options(const Config& cfg, const std::string& p) {
  TrainOptions o;
  o.spec = nn::model_spec_from(cfg, p);
  o.spec.backend = cfg.get_string(p + ".backend");
  std::string note;
  o.spec.dtype = nn::resolve_precision(cfg.get_string(p + ".precision"), o.spec.backend,
                                       p + ".precision", &note);
  if (!note.empty()) log::info(note);
  o.epochs = cfg.get_int(p + ".epochs");
  o.global_batch = cfg.get_int(p + ".global_batch");
  o.micro_batch = cfg.get_int(p + ".micro_batch");
  const int64_t seed = cfg.get_int(p + ".seed");
  o.seed = seed > 0 ? uint64_t(seed) : derived_seed(cfg, SeedFor::training, p);
  o.augment = cfg.get_bool(p + ".augment");
  o.label_smoothing = float(cfg.get_float(p + ".label_smoothing"));
  o.opt.momentum = cfg.get_float(p + ".optimizer.momentum");
  o.opt.nesterov = cfg.get_bool(p + ".optimizer.nesterov");
  o.opt.weight_decay = cfg.get_float(p + ".optimizer.weight_decay");
  o.opt.decoupled = cfg.get_bool(p + ".optimizer.decoupled");
  o.opt.decay_bn_bias = cfg.get_bool(p + ".optimizer.decay_bn_bias");
  // LARS when asked for, or by batch size: at and above optimizer.lars_from_batch (0: never)
  // layer-wise trust ratios keep very large batches from diverging (You et al. 2017).
  const int64_t lars_from = cfg.get_int(p + ".optimizer.lars_from_batch");
  o.opt.lars =
      cfg.get_bool(p + ".optimizer.lars") || (lars_from > 0 && o.global_batch >= lars_from);
  o.opt.lars_eta = cfg.get_float(p + ".optimizer.lars_eta");
  o.sched.base_lr = cfg.get_float(p + ".optimizer.lr");
  o.sched.ref_batch = cfg.get_int(p + ".schedule.ref_batch");
  o.sched.scaling = parse_scaling(cfg.get_string(p + ".schedule.scaling"));
  o.sched.warmup_epochs = cfg.get_float(p + ".schedule.warmup_epochs");
  o.sched.decay = parse_decay(cfg.get_string(p + ".schedule.decay"));
  o.sched.milestones = cfg.get_int_list(p + ".schedule.milestones");
  o.sched.gamma = cfg.get_float(p + ".schedule.gamma");
  o.ckpt_every_steps = cfg.get_int(p + ".checkpoint.every_steps");
  o.ckpt_every_epochs = cfg.get_int(p + ".checkpoint.every_epochs");
  o.ckpt_keep = cfg.get_int(p + ".checkpoint.keep");
  o.eval_batch = cfg.get_int(p + ".eval_batch");
  o.eval_every = cfg.get_int(p + ".eval_every");
  o.comm.strategy = cfg.get_string(p + ".comm.strategy");
  o.comm.bucket_mb = cfg.get_float(p + ".comm.bucket_mb");
  o.comm.cycle_ms = cfg.get_float(p + ".comm.cycle_ms");
  o.comm.fusion_mb = cfg.get_float(p + ".comm.fusion_mb");
  o.comm.servers = int(cfg.get_int(p + ".comm.servers"));
  o.comm.mode = cfg.get_string(p + ".comm.mode");
  o.comm.max_staleness = int(cfg.get_int(p + ".comm.max_staleness"));
  o.comm.stale_compensation = cfg.get_string(p + ".comm.stale_compensation");
  check_comm_options(o.comm, p);
  return o;
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
  model_ = nn::make_model(s);
  nn::init_params(*model_, o_.seed);
  opt_ = std::make_unique<SgdOptimizer>(param_slices(*model_), model_->num_params(), o_.opt);
  o_.sched.global_batch = source_->batch_size();
  o_.sched.epochs = o_.epochs;
  o_.sched.steps_per_epoch = source_->steps_per_epoch();
}

Trainer::~Trainer() = default;

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

void Trainer::broadcast_buffers() {
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
  const std::string path = checkpoint_name(ckpt_dir_, st.step);
  if (sync_) sync_->collect_optimizer_state(*opt_);  // parameter server: momentum shards
  save_checkpoint(path, *model_, *opt_, st, config_yaml_, comm_);
  if (comm_.is_root()) prune_checkpoints(ckpt_dir_, o_.ckpt_keep);
}

std::pair<double, double> Trainer::evaluate(const EvalSplit& d, const std::vector<int64_t>* rows) {
  source_->quiesce();           // streamed evaluation reads the file on this thread
  double stats[3] = {0, 0, 0};  // loss sum, correct, n
  Batch b;
  for_each_eval_block(
      d, rows, comm_.rank(), comm_.size(),
      [&](const SplitData& block, const std::vector<int64_t>& local) {
        for (size_t i = 0; i < local.size(); i += size_t(o_.eval_batch)) {
          const int n = int(std::min<size_t>(size_t(o_.eval_batch), local.size() - i));
          make_batch(block, meta_, local.data() + i, n, false, 0, 0, &b);
          const float* logits = model_->forward(b.x.data(), n, false);
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

TrainResult Trainer::run(bool resume) {
  install_stop_handlers();
  const int64_t steps_per_epoch = source_->steps_per_epoch();
  const int64_t B = source_->batch_size();
  LrSchedule sched(o_.sched);
  TrainState st;
  st.seed = o_.seed;
  st.global_batch = B;
  st.loader = source_->describe();

  std::string from;
  if (resume) {
    if (comm_.is_root()) from = latest_checkpoint(ckpt_dir_);
    comm_.bcast_string(from);
  }
  if (!from.empty()) {
    st = load_checkpoint(from, *model_, *opt_);
    SIEVE_CHECK(st.seed == o_.seed, from, ": checkpoint seed ", st.seed,
                " differs from the configured seed ", o_.seed);
    const std::string loader = source_->describe();
    SIEVE_CHECK(st.loader == loader, from, ": checkpoint was written by the ", st.loader,
                " loader, this run uses ", loader,
                " (a streamed run resumes exactly only with the same data.memory_budget_mb, "
                "data.loader and rank count)");
    st.loader = loader;
    SIEVE_CHECK(st.global_batch == B, from, ": checkpoint was written with ", st.global_batch,
                " samples per step, the configuration gives ", B,
                " (resume needs the same global batch; the rank count may differ)");
    log::info(cat("resuming from ", from, " (epoch ", st.epoch, ", step ", st.step, ")"));
  } else if (resume) {
    log::info(cat("--resume: no complete checkpoint in ", ckpt_dir_, "; starting fresh"));
  }
  broadcast_state();
  trace::set_origin();  // right after a collective: the ranks' timelines line up
  if (trace::enabled()) model_->set_unit_hook(trace_model_unit);

  // Metrics: a resumed run keeps the lines of epochs finished before its checkpoint.
  if (comm_.is_root() && !metrics_path_.empty()) {
    std::vector<Json> keep;
    if (!from.empty() && std::filesystem::exists(metrics_path_))
      for (auto& j : read_json_lines(metrics_path_))
        if (j.value("epoch", int64_t(1) << 60) < st.epoch + 1) keep.push_back(j);
    MetricsWriter w(metrics_path_, true, /*truncate=*/true);
    for (auto& j : keep) w.write(j);
  }
  MetricsWriter metrics(metrics_path_, comm_.is_root());

  const int64_t per_rank = block_range(B, comm_.rank(), comm_.size()).size();
  const int64_t micro = o_.micro_batch > 0 ? std::min(o_.micro_batch, per_rank) : per_rank;
  const int64_t accum = comm_.allreduce_max((per_rank + micro - 1) / micro);

  // Where the optimizer, the reducer and the non-finite check see the flat buffers: the
  // model's own on the CPU; on a device (cuda) host copies, staged once per step: gradients
  // down after backward, parameters up after the update (host master weights). Staging costs
  // two PCIe copies of the parameters per step and gives up overlapping the reduction with
  // backward; a device-resident optimizer and NCCL reduction are the fast path to come.
  // SIEVE_DEBUG_STAGE_HOST=1 stages on the CPU too, so tests pin the staged path to the direct
  // one (same weights, bitwise) on machines without a GPU.
  const char* force_stage = std::getenv("SIEVE_DEBUG_STAGE_HOST");
  const bool staged = model_->device() != nn::Device::cpu || (force_stage && *force_stage == '1');
  std::vector<float> params_stage, grads_stage;
  if (staged) {
    params_stage = model_->params_to_host();
    grads_stage.assign(model_->num_params(), 0.f);
  }
  float* P = staged ? params_stage.data() : model_->params();
  float* G = staged ? grads_stage.data() : model_->grads();
  std::vector<std::pair<size_t, size_t>> covered;
  for (const auto& p : model_->param_info()) covered.push_back({p.offset, p.size});
  sync_ = make_grad_sync(o_.comm, comm_, G, model_->num_params(), covered);
  GradSync& reducer = *sync_;
  SIEVE_CHECK(!staged || o_.comm.mode != "async",
              "comm.mode async (stale-synchronous parameter server) needs the CPU path: the device "
              "path uploads the host weights after each update, not after a drain");
  if (!staged)
    model_->set_grad_ready_hook([&](size_t off, size_t cnt) { reducer.ready(off, cnt); });

  // Fault injection for tests (docs/training.md): poison a gradient, raise SIGUSR1, or die
  // by SIGKILL (as `kill -9`) at a given optimizer step, on rank 0.
  auto env_step = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? int64_t(std::atoll(v)) : int64_t(-1);
  };
  const int64_t nan_step = env_step("SIEVE_DEBUG_NAN_STEP");
  const int64_t signal_step = env_step("SIEVE_DEBUG_SIGNAL_STEP");
  const int64_t kill_step = env_step("SIEVE_DEBUG_KILL_STEP");
  // Slow every step down (ms) so that a fault test's signal or kill lands mid-run even on a
  // fast, idle machine; changes no numbers.
  const int64_t step_delay_ms = env_step("SIEVE_DEBUG_STEP_DELAY_MS");

  TrainResult res;
  res.batch = B;
  res.per_rank_batch = per_rank;
  res.accum_steps = accum;
  res.samples_used = source_->num_active();
  res.peak_lr = sched.peak();
  res.best_test_acc = -1;

  Prefetcher pf(meta_);
  // The micro-batch sequence of this rank: (epoch, step) -> rows of the step's data, one
  // list per micro-batch.
  struct StepChunks {
    std::shared_ptr<const SplitData> data;
    std::vector<std::vector<int64_t>> parts;
  };
  auto chunks_of = [&](int64_t e, int64_t s) {
    StepChunks out;
    StepPart part = source_->rank_part(e, s);
    out.data = std::move(part.data);
    const auto& rows = part.rows;
    for (size_t i = 0; i < rows.size(); i += size_t(micro))
      out.parts.emplace_back(rows.begin() + i,
                             rows.begin() + std::min(rows.size(), i + size_t(micro)));
    return out;
  };

  const double t0 = now_s() - st.elapsed_s;
  const double run_start = now_s();
  const int64_t start_step = st.step;
  const int64_t total_steps = o_.epochs * steps_per_epoch;
  log::Progress progress("train", total_steps, "steps", 10.0);
  std::vector<float> dlogits;
  double epoch_start = now_s();
  int64_t epoch_images = 0;

  for (int64_t e = st.epoch; e < o_.epochs; ++e) {
    epoch_start = now_s();
    epoch_images = 0;
    StepChunks chunks =
        st.step_in_epoch < steps_per_epoch ? chunks_of(e, st.step_in_epoch) : StepChunks{};
    if (!chunks.parts.empty()) pf.request(chunks.data, chunks.parts[0], o_.augment, o_.seed, e);
    for (int64_t s = st.step_in_epoch; s < steps_per_epoch; ++s) {
      const double lr = sched.lr_at(st.step);
      trace::Span step_span("step", cat("step ", st.step));
      model_->zero_grad();
      if (comm_.size() > 1) {
        trace::Span span("wait", "broadcast BN buffers");
        broadcast_buffers();
      }
      double stats[4] = {0, 0, 0, 0};  // loss sum, correct, non-finite, stop
      StepChunks next_chunks = (s + 1 < steps_per_epoch) ? chunks_of(e, s + 1) : StepChunks{};
      for (size_t c = 0; c < chunks.parts.size(); ++c) {
        Batch b = [&] {
          trace::Span span("data", "wait for batch");
          return pf.take();
        }();
        if (c + 1 < chunks.parts.size())
          pf.request(chunks.data, chunks.parts[c + 1], o_.augment, o_.seed, e);
        else if (!next_chunks.parts.empty())
          pf.request(next_chunks.data, next_chunks.parts[0], o_.augment, o_.seed, e);
        const int n = b.n;
        const int k = model_->num_classes();
        const double fwd0 = trace::now_us();
        const float* logits = model_->forward(b.x.data(), n, true);
        trace::complete("forward", "compute", fwd0, trace::now_us());
        dlogits.resize(size_t(n) * k);
        int correct = 0;
        double loss = nn::softmax_cross_entropy(logits, b.y.data(), n, k, o_.label_smoothing,
                                                dlogits.data(), &correct);
        if (batch_hook_) batch_hook_(e, *chunks.data, chunks.parts[c], logits, k);
        const float scale = float(double(n) / double(B));
        for (auto& v : dlogits) v *= scale;
        if (c + 1 == chunks.parts.size()) reducer.arm();
        const double bwd0 = trace::now_us();
        model_->backward(dlogits.data());
        trace::complete("backward", "compute", bwd0, trace::now_us());
        stats[0] += loss * n;
        stats[1] += correct;
      }
      if (chunks.parts.empty()) reducer.arm();
      if (staged)
        model_->backend().to_host(G, model_->grads(), model_->num_params() * sizeof(float));
      reducer.finish();
      float* g = G;
      if (st.step == nan_step && comm_.is_root()) g[0] = std::nanf("");
      double gsum = 0;
      for (size_t i = 0; i < model_->num_params(); ++i) gsum += g[i];
      stats[2] = std::isfinite(gsum) && std::isfinite(stats[0]) ? 0 : 1;
      if (st.step == signal_step && comm_.is_root()) std::raise(SIGUSR1);
      if (st.step == kill_step && comm_.is_root()) std::raise(SIGKILL);
      if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
      stats[3] = stop_signal_seen() ? 1 : 0;
      {
        trace::Span span("wait", "step statistics allreduce");
        comm_.allreduce_sum(stats, 4);
      }
      if (stats[2] > 0) {
        std::string last;
        if (comm_.is_root()) last = latest_checkpoint(ckpt_dir_);
        comm_.bcast_string(last);
        res.steps = st.step;
        res.elapsed_s = now_s() - t0;
        throw Diverged(cat("divergence at step ", st.step, " (epoch ", e + 1, "): ",
                           std::isfinite(stats[0]) ? "non-finite gradient" : "non-finite loss",
                           "; stopped without writing a checkpoint; last good checkpoint: ",
                           last.empty() ? "none" : last),
                       st.step, e + 1, res);
      }
      {
        trace::Span span("optimizer", "optimizer step");
        reducer.update(*opt_, P, g, lr);
      }
      if (staged) model_->params_from_host(P);
      ++st.step;
      st.step_in_epoch = s + 1;
      st.loss_sum += stats[0];
      st.correct += int64_t(stats[1]);
      st.seen += B;
      epoch_images += B;
      chunks = std::move(next_chunks);
      progress.update(st.step);
      const bool stop = stats[3] > 0;
      if (stop || (o_.ckpt_every_steps > 0 && st.step % o_.ckpt_every_steps == 0 &&
                   s + 1 < steps_per_epoch)) {
        st.elapsed_s = now_s() - t0;
        checkpoint(st);
        if (stop) throw StopRequested{checkpoint_name(ckpt_dir_, st.step)};
      }
    }
    reducer.drain();  // stale-synchronous PS: rounds in flight are applied before evaluating
    // End of epoch: statistics, evaluation, metrics, checkpoint.
    const double train_loss = st.seen ? st.loss_sum / double(st.seen) : 0.0;
    const double train_acc = st.seen ? double(st.correct) / double(st.seen) : 0.0;
    const double epoch_time = now_s() - epoch_start;
    Json rec;
    rec["epoch"] = e + 1;
    rec["step"] = st.step;
    rec["lr"] = sched.lr_at(std::max<int64_t>(0, st.step - 1));
    rec["train_loss"] = train_loss;
    rec["train_acc"] = train_acc;
    const bool do_eval =
        !test_.empty() && test_.rows > 0 &&
        ((o_.eval_every > 0 && (e + 1) % o_.eval_every == 0) || e + 1 == o_.epochs);
    const double elapsed = now_s() - t0;
    if (do_eval) {
      auto [tl, ta] = evaluate(test_);
      rec["test_loss"] = tl;
      rec["test_acc"] = ta;
      rec["gen_gap"] = train_acc - ta;
      res.final_test_acc = ta;
      res.final_test_loss = tl;
      if (ta > res.best_test_acc) {
        res.best_test_acc = ta;
        res.best_epoch = e + 1;
        res.time_to_best_s = now_s() - t0;
      }
    }
    const double ips = epoch_time > 0 ? double(epoch_images) / epoch_time : 0.0;
    rec["images_per_s"] = ips;
    rec["images_per_s_per_rank"] = ips / comm_.size();
    rec["elapsed_s"] = elapsed;
    const double done_frac = double(st.step - start_step) / double(total_steps - start_step);
    const double eta = done_frac > 0 ? (now_s() - run_start) * (1 - done_frac) / done_frac : 0;
    rec["eta_s"] = eta;
    if (epoch_hook_) epoch_hook_(e + 1, rec);
    metrics.write(rec);
    log::info(cat("epoch ", e + 1, "/", o_.epochs, ": loss ", train_loss, " acc ", train_acc,
                  do_eval ? cat(" | test loss ", rec["test_loss"].get<double>(), " acc ",
                                rec["test_acc"].get<double>())
                          : std::string(),
                  " | lr ", rec["lr"].get<double>(), " | ", int64_t(ips), " img/s | ETA ",
                  log::format_duration(eta)));
    res.final_train_acc = train_acc;
    res.final_train_loss = train_loss;
    st.epoch = e + 1;
    st.step_in_epoch = 0;
    st.loss_sum = 0;
    st.correct = st.seen = 0;
    const bool last = e + 1 == o_.epochs;
    if (o_.ckpt_every_epochs > 0 && ((e + 1) % o_.ckpt_every_epochs == 0 || last)) {
      st.elapsed_s = now_s() - t0;
      checkpoint(st);
    }
  }
  progress.finish();
  model_->set_grad_ready_hook(nullptr);
  model_->set_unit_hook(nullptr);
  if (const SyncStats& cs = reducer.stats(); cs.steps > 0 && comm_.size() > 1) {
    // Rank 0's view of what the strategy did: the numbers behind the step timeline.
    const double n = double(cs.steps);
    auto fixed_str = [](double v, int digits) {
      char b[32];
      std::snprintf(b, sizeof b, "%.*f", digits, v);
      return std::string(b);
    };
    const double blocked = cs.finish_wait_s + cs.update_comm_s + cs.negotiation_wait_s;
    log::info(cat(
        "comm ", reducer.name(), ": ", fixed_str(cs.messages / n, 1), " reductions per step (",
        int64_t(100.0 * cs.started_early / std::max<int64_t>(1, cs.messages)),
        " % started during backward), ", fixed_str(cs.bytes / n / 1048576.0, 2),
        " MiB per step; blocked ", fixed_str(1e3 * blocked / n, 2), " ms per step",
        cs.negotiations > 0 ? cat(" (", fixed_str(cs.negotiations / n, 1), " agreement rounds, ",
                                  fixed_str(1e3 * cs.negotiation_wait_s / n, 2), " ms)")
                            : std::string()));
  }
  if (trace::enabled())
    trace::write_gathered(
        comm_, trace::path(),
        cat("{\"strategy\":\"", o_.comm.strategy, "\",\"ranks\":", comm_.size(), ",\"arch\":\"",
            o_.spec.arch, "\",\"width\":", o_.spec.width, ",\"global_batch\":", B,
            ",\"buckets\":", reducer.num_buckets(), ",\"params\":", model_->num_params(),
            ",\"bucket_mb\":", o_.comm.bucket_mb, ",\"cycle_ms\":", o_.comm.cycle_ms,
            ",\"fusion_mb\":", o_.comm.fusion_mb, ",\"servers\":", o_.comm.servers,
            ",\"tensors\":", model_->param_info().size(), "}"));
  if (res.final_test_acc < 0 && !test_.empty() && test_.rows > 0) {  // resumed after the last epoch
    auto [tl, ta] = evaluate(test_);
    res.final_test_acc = res.best_test_acc = ta;
    res.final_test_loss = tl;
  }
  res.steps = st.step;
  res.elapsed_s = now_s() - t0;
  const double run_time = now_s() - run_start;
  res.images_per_s = run_time > 0 ? double((st.step - start_step) * B) / run_time : 0.0;
  res.images_per_s_per_rank = res.images_per_s / comm_.size();
  source_->quiesce();  // the caller writes the model (HDF5) next
  return res;
}

}  // namespace sieve::train
