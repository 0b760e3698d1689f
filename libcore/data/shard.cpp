#include "data/shard.hpp"

#include <cstdio>
#include <filesystem>

#include "config/sections.hpp"
#include "data/source.hpp"
#include "data/writer.hpp"
#include "io/cleanup.hpp"
#include "util/log.hpp"

namespace sieve::data {

void add_shard_flags(po::options_description& d) {
  d.add_options()
      ("input,i", po::value<std::string>(), "input path (overrides data.path)")
      ("output,o", po::value<std::string>(), "output dataset file (default: <run.dir>/dataset.h5)")
      ("no-sync", "do not fsync the output files before renaming them into place");
}

namespace {
std::string join_doubles(const std::vector<double>& v, int max_items = 8) {
  std::string s;
  char buf[32];
  for (size_t i = 0; i < v.size() && int(i) < max_items; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? " " : "", v[i]);
    s += buf;
  }
  if (int(v.size()) > max_items) s += cat(" ... (", v.size(), " values)");
  return s;
}
}  // namespace

void run_shard_dataset(ToolContext& ctx) {
  const Comm& comm = ctx.comm;
  std::string input = ctx.flag("input");
  if (!input.empty()) ctx.cfg.set("data.path", YAML::Node(input), "--input");
  WriteOptions opt;
  opt.output = ctx.path_flag("output", run_paths(ctx.cfg).dataset());
  opt.shards = int(ctx.cfg.get_int("data.shards"));
  opt.chunk_rows = ctx.cfg.get_int("data.chunk_samples");
  opt.overwrite = ctx.overwrite;
  opt.sync = !ctx.has_flag("no-sync");
  opt.config_yaml = ctx.cfg.to_yaml();

  // The default output lives in run.dir, which the first stage creates; an explicit
  // --output must name an existing directory.
  if (ctx.flag("output").empty())
    on_root_agreed(comm, [&] {
      std::error_code ec;
      cleanup::make_dirs(run_paths(ctx.cfg).dir, ec);  // recorded: removed again if it fails
      if (ec) throw Error(cat(run_paths(ctx.cfg).dir, ": cannot create the run directory: ", ec.message()));
    });
  // Fail on unusable outputs before reading any input.
  check_outputs(opt, comm);
  // Input problems are found on every rank alike, or agreed collectively (one message).
  std::unique_ptr<Source> src = open_source(ctx.cfg, "", comm);
  const DatasetMeta& m = src->meta();
  std::string shape = m.kind == Kind::Image ? cat(m.height, "x", m.width, "x", m.channels)
                                            : cat(m.features, " features");
  log::info(cat("input: ", m.description, ": ", m.rows(Split::Train), " train + ", m.rows(Split::Test),
                " test samples, ", shape, ", ", m.num_classes, " classes; ", comm.size(), " rank(s), ",
                opt.shards, " shard file(s)"));

  WriteSummary s = write_dataset(*src, opt, comm);

  if (!comm.is_root()) return;
  std::string names;
  for (size_t i = 0; i < m.class_names.size() && i < 10; ++i) names += (i ? ", " : "") + m.class_names[i];
  if (m.class_names.size() > 10) names += ", ...";
  double mb = double(s.payload_bytes) / 1e6;
  std::printf("shard_dataset: wrote %s\n", opt.output.c_str());
  std::printf("  kind        %s (%s), source %s\n", kind_name(m.kind), shape.c_str(), m.source.c_str());
  std::printf("  train       %lld samples\n", (long long)s.rows[0]);
  std::printf("  test        %lld samples\n", (long long)s.rows[1]);
  std::printf("  classes     %lld (%s)\n", (long long)m.num_classes, names.c_str());
  std::printf("  mean        %s\n", join_doubles(s.mean).c_str());
  std::printf("  std         %s\n", join_doubles(s.std).c_str());
  if (m.has_noise)
    std::printf("  noise       %lld label noise + %lld outliers = %lld of %lld train samples (%.2f%%)\n",
                (long long)s.label_noise, (long long)s.outliers, (long long)(s.label_noise + s.outliers),
                (long long)s.rows[0],
                s.rows[0] ? 100.0 * double(s.label_noise + s.outliers) / double(s.rows[0]) : 0.0);
  std::printf("  files       %zu (%s on disk)%s\n", s.files.size(), log::format_bytes(double(s.file_bytes)).c_str(),
              opt.shards > 1 ? cat(", index + ", opt.shards, " shards").c_str() : "");
  std::printf("  written     %.1f MB in %.2f s: %.1f MB/s (%d rank(s)%s)\n", mb, s.seconds,
              s.seconds > 0 ? mb / s.seconds : 0.0, comm.size(), opt.sync ? ", synced" : "");
  std::printf("  time        %.2f s waiting for data, %.2f s in writes, %.2f s finishing (rank 0)\n",
              s.wait_s, s.write_s, s.finish_s);
  std::fflush(stdout);
}

}  // namespace sieve::data
