// Internal to libcore/nn: the concrete model factories behind make_model.
#pragma once
#include <memory>

#include "nn/model.hpp"

namespace sieve::nn {

std::unique_ptr<Model> make_mlp(const ModelSpec& spec);
std::unique_ptr<Model> make_resnet(const ModelSpec& spec);

}  // namespace sieve::nn
