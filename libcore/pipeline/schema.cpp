#include "pipeline/schema.hpp"

#include "cluster/keys.hpp"
#include "config/sections.hpp"
#include "data/keys.hpp"
#include "embed/keys.hpp"
#include "pipeline/slurm_keys.hpp"
#include "report/keys.hpp"
#include "train/keys.hpp"

namespace sieve {

const ConfigSchema& pipeline_schema() {
  static const ConfigSchema schema = [] {
    ConfigSchema s;
    add_run_keys(s);
    add_data_keys(s);
    add_pretrain_keys(s);
    add_features_keys(s);
    add_embed_keys(s);
    add_filter_keys(s);
    add_scaled_keys(s);
    add_report_keys(s);
    add_slurm_keys(s);
    return s;
  }();
  return schema;
}

}  // namespace sieve
