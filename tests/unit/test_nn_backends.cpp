// Every host backend x dtype passes the shared op-by-op suite (tests/support/op_suite.hpp)
// against the fp32 "ref" backend; the CUDA backend runs the same suite in tests/gpu.
// Both bf16 cases run on every CPU: cpu bf16 is oneDNN's bf16 kernels where it has them
// (AVX-512) and its fp32 kernels on bf16 data below (emulation); ref bf16 is bf16 storage
// and weights, fp32 compute.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>

#include "nn/backend.hpp"
#include "nn/backend_impl.hpp"
#include "nn/backend_registry.hpp"
#include "nn/model.hpp"
#include "support/op_suite.hpp"
#include "support/test_util.hpp"
#include "util/error.hpp"

using namespace sieve::nn;
using namespace sieve::nn::op_suite;

INSTANTIATE_TEST_SUITE_P(Host, BackendOps,
                         ::testing::Values(OpCase{"cpu", DType::f32, 1e-5},
                                           OpCase{"cpu", DType::bf16, 2e-2},
                                           OpCase{"ref", DType::bf16, 2e-2}),
                         op_case_name);

// What precision auto's bf16 speed check measured (before any other test asks, so this one
// sees the measurement itself): once per process, consistent with its own figures, and the
// caller's OpenMP thread count restored after the single-threaded measurement.
TEST(NnBackends, Bf16SpeedMeasuredOnceSingleThreaded) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  const Bf16Speed& r = cpu_bf16_speed();
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(threads);
  EXPECT_EQ(&cpu_bf16_speed(), &r);
  if (r.amx) {
    EXPECT_TRUE(r.faster());
  } else if (r.failed.empty()) {
    EXPECT_GT(r.fp32_ms, 0);
    EXPECT_GT(r.bf16_ms, 0);
    EXPECT_LT(r.fp32_ms, 1e3);  // one small convolution, not a stuck measurement
    EXPECT_EQ(r.faster(), r.bf16_ms < r.fp32_ms) << r.fp32_ms << " ms fp32, " << r.bf16_ms;
  } else {
    EXPECT_FALSE(r.faster());
  }
  std::string why;
  EXPECT_EQ(backend_bf16_faster("ref", &why), false);  // ref's bf16 is never native
  EXPECT_FALSE(why.empty());
}

// The cpu backend's bf16 residual add rounds once: bf16(fp32(a) + fp32(b)), round to nearest
// even, bit for bit, over more elements than its parallel threshold.
TEST(NnBackends, CpuBf16AddRoundsOnce) {
  Backend& be = backend("cpu", DType::bf16);
  const size_t n = 100003;
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.f, 4.f);
  std::vector<uint16_t> a(n), b(n), y(n, 0xffff);
  for (size_t i = 0; i < n; ++i) a[i] = to_bf16(d(g)), b[i] = to_bf16(d(g));
  a[0] = to_bf16(1.f), b[0] = to_bf16(1.f / 256);              // a tie: rounds to even (1.0)
  a[1] = to_bf16(1.f + 1.f / 128), b[1] = to_bf16(1.f / 256);  // a tie: rounds up to even
  void* da = be.allocate(n * 2);
  void* db = be.allocate(n * 2);
  void* dy = be.allocate(n * 2);
  be.to_device(da, a.data(), n * 2);
  be.to_device(db, b.data(), n * 2);
  be.add(da, db, dy, n);
  be.to_host(y.data(), dy, n * 2);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const float s = from_bf16(a[i]) + from_bf16(b[i]);  // exact-ish fp32 sum, one rounding
    wrong += y[i] != to_bf16(s);
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(from_bf16(y[0]), 1.f);
  EXPECT_EQ(from_bf16(y[1]), 1.f + 2.f / 128);
  be.release(da), be.release(db), be.release(dy);
}

TEST(NnBackends, RegistryNamesAndUnknown) {
  EXPECT_EQ(backend_names(), (std::vector<std::string>{"cpu", "ref", "cuda"}));
  EXPECT_THROW(backend("tpu"), sieve::UsageError);
  // Instances are per (name, dtype).
  EXPECT_EQ(&backend("ref", DType::bf16), &backend("ref", DType::bf16));
  EXPECT_NE(&backend("ref", DType::bf16), &backend("ref", DType::f32));
  EXPECT_EQ(backend("ref", DType::bf16).dtype(), DType::bf16);
  // "cuda" is in every program that links sieve_nn: in a build with CUDA its registrar ran
  // (the linker kept it) and the backend answers for itself (a GPU, or "no CUDA device");
  // without CUDA the registry says the build lacks it.
  std::string why;
  if (!backend_supports("cuda", DType::f32, false, &why)) {
    EXPECT_EQ(why.find("does not link the CUDA backend"), std::string::npos) << why;
    EXPECT_TRUE(why.find("no CUDA device") != std::string::npos ||
                why.find("this build has no CUDA backend") != std::string::npos)
        << why;
  }
}

// A backend from outside nn/ enters through register_backend: listed after the built-in ones,
// asked through the registry like them; registering a name again replaces it in its place.
TEST(NnBackends, RegisterBackendAddsOrReplaces) {
  static const auto make_nothing = [](DType) -> std::unique_ptr<Backend> { return nullptr; };
  static const auto never = [](DType, bool, std::string* why) {
    if (why) *why = "the test backend runs nowhere";
    return false;
  };
  static const auto always = [](DType, bool, std::string*) { return true; };
  register_backend({"test-fake", +make_nothing, +never, nullptr, nullptr});
  std::vector<std::string> names = backend_names();
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names.back(), "test-fake");
  std::string why;
  EXPECT_FALSE(backend_supports("test-fake", DType::f32, false, &why));
  EXPECT_EQ(why, "the test backend runs nowhere");
  try {
    backend("test-fake");
    ADD_FAILURE() << "an unsupported backend must fail";
  } catch (const sieve::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("nn backend 'test-fake' with fp32: the test backend "
                                         "runs nowhere"),
              std::string::npos)
        << e.what();
  }
  register_backend({"test-fake", +make_nothing, +always, nullptr, nullptr});
  EXPECT_EQ(backend_names(), names);
  EXPECT_TRUE(backend_supports("test-fake", DType::bf16, true));
}

TEST(NnBackends, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 1.0f / 256)), 1.0f);               // tie -> even (down)
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // tie -> even (up)
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 1.5f / 256)), 1.0f + 2.0f / 256);  // above the tie
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
}

// precision: auto picks bf16 only where the hardware has it, and says so otherwise; bf16
// runs where the backend can, and says so where that is emulation; fp32 is always fp32.
TEST(NnBackends, ResolvePrecision) {
  // This test pins auto's own choice: without the seam that forces it (next test).
  const sieve::test::ScopedUnsetEnv plain("SIEVE_PRECISION_AUTO");
  EXPECT_EQ(resolve_precision("fp32", "cpu", "pretrain.precision"), DType::f32);
  std::string note;
  // ref only emulates bf16: auto stays fp32 and says why, in one line naming the key.
  EXPECT_EQ(resolve_precision("auto", "ref", "pretrain.precision", &note), DType::f32);
  EXPECT_NE(note.find("pretrain.precision: auto -> fp32"), std::string::npos) << note;
  note.clear();
  EXPECT_EQ(resolve_precision("bf16", "ref", "pretrain.precision", &note), DType::bf16);
  EXPECT_NE(note.find("pretrain.precision: bf16 emulated"), std::string::npos) << note;
  const bool native = backend_supports("cpu", DType::bf16, true);
  // auto wants bf16 native and faster: on a CPU without AMX the cpu backend measures it.
  const bool faster = backend_bf16_faster("cpu");
  EXPECT_TRUE(native || !faster);
  note.clear();
  EXPECT_EQ(resolve_precision("auto", "cpu", "x.precision", &note),
            faster ? DType::bf16 : DType::f32);
  EXPECT_EQ(note.empty(), faster) << note;
  if (native && !faster) {
    EXPECT_NE(note.find("x.precision: auto -> fp32 (bf16 convolutions run at "), std::string::npos)
        << note;
  }
  // Forced bf16 runs on every CPU; below native bf16 it is emulated, and one line says so.
  note.clear();
  EXPECT_EQ(resolve_precision("bf16", "cpu", "scaled.precision", &note), DType::bf16);
  EXPECT_EQ(note.empty(), native) << note;
  if (!native) {
    EXPECT_NE(note.find("scaled.precision: bf16 emulated"), std::string::npos) << note;
  }
  // A backend without bf16 at all (cuda in a build without CUDA, on a machine without a
  // GPU, or below compute capability 8.0): an error naming the key and the backend.
  if (!backend_supports("cuda", DType::bf16)) {
    try {
      resolve_precision("bf16", "cuda", "features.precision");
      ADD_FAILURE() << "bf16 on a backend without it must fail";
    } catch (const sieve::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("features.precision: bf16 on backend 'cuda'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(resolve_precision("fp16", "cpu", "x.precision"), sieve::UsageError);
}

// SIEVE_PRECISION_AUTO makes auto resolve as on the other kind of CPU (the suite runs once
// so, see tests/CMakeLists.txt): bf16 where the backend has it at all (emulated included),
// fp32 where asked; explicit precisions are untouched; a bad value is an error naming it.
TEST(NnBackends, PrecisionAutoCanBeForcedForTests) {
  const sieve::test::ScopedUnsetEnv restore("SIEVE_PRECISION_AUTO");
  std::string note;
  setenv("SIEVE_PRECISION_AUTO", "bf16", 1);
  EXPECT_EQ(resolve_precision("auto", "ref", "pretrain.precision", &note), DType::bf16);
  EXPECT_NE(note.find("pretrain.precision: auto -> bf16 (SIEVE_PRECISION_AUTO)"), std::string::npos)
      << note;
  EXPECT_EQ(resolve_precision("auto", "cpu", "x.precision"), DType::bf16);
  EXPECT_EQ(resolve_precision("fp32", "cpu", "x.precision"), DType::f32);
  if (!backend_supports("cuda", DType::bf16)) {
    note.clear();
    EXPECT_EQ(resolve_precision("auto", "cuda", "features.precision", &note), DType::f32);
    EXPECT_NE(note.find("auto -> fp32 (SIEVE_PRECISION_AUTO=bf16, but"), std::string::npos) << note;
  }
  setenv("SIEVE_PRECISION_AUTO", "fp32", 1);
  EXPECT_EQ(resolve_precision("auto", "cpu", "x.precision"), DType::f32);
  EXPECT_EQ(resolve_precision("bf16", "cpu", "x.precision"), DType::bf16);
  setenv("SIEVE_PRECISION_AUTO", "fp16", 1);
  try {
    resolve_precision("auto", "cpu", "x.precision");
    ADD_FAILURE() << "a bad SIEVE_PRECISION_AUTO must fail";
  } catch (const sieve::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("SIEVE_PRECISION_AUTO: expected bf16 or fp32, got 'fp16'"),
              std::string::npos)
        << e.what();
  }
}

// Where auto's bf16 is the machine's answer on the cpu backend, the trainer is told to time
// its network (per_network); never for an explicit or forced precision, nor on ref. The cpu
// backend's timing of a real network: both dtypes measured, each pass taking some time.
TEST(NnBackends, AutoBf16OnTheCpuIsConfirmedPerNetwork) {
  const sieve::test::ScopedUnsetEnv plain("SIEVE_PRECISION_AUTO");
  bool per_network = true;
  EXPECT_EQ(resolve_precision("auto", "cpu", "x.precision", nullptr, &per_network),
            backend_bf16_faster("cpu") ? DType::bf16 : DType::f32);
  EXPECT_EQ(per_network, backend_bf16_faster("cpu"));
  for (const char* explicit_precision : {"bf16", "fp32"}) {
    per_network = true;
    resolve_precision(explicit_precision, "cpu", "x.precision", nullptr, &per_network);
    EXPECT_FALSE(per_network) << explicit_precision;
  }
  per_network = true;
  resolve_precision("auto", "ref", "x.precision", nullptr, &per_network);
  EXPECT_FALSE(per_network);
  setenv("SIEVE_PRECISION_AUTO", "bf16", 1);
  per_network = true;
  EXPECT_EQ(resolve_precision("auto", "cpu", "x.precision", nullptr, &per_network), DType::bf16);
  EXPECT_FALSE(per_network);
  unsetenv("SIEVE_PRECISION_AUTO");

  ModelSpec spec;
  spec.arch = "resnet18";
  spec.width = 0.125;
  spec.in_height = spec.in_width = 16;
  StepTimes t;
  EXPECT_FALSE(backend_time_training_step("ref", spec, 4, &t));
  const bool native = backend_supports("cpu", DType::bf16, true);
  EXPECT_EQ(backend_time_training_step("cpu", spec, 4, &t), native);
  if (native) {
    EXPECT_GT(t.fp32_ms, 0);
    EXPECT_GT(t.bf16_ms, 0);
    EXPECT_LT(t.fp32_ms, 1e4);
    EXPECT_LT(t.bf16_ms, 1e4);
  }
}
