#pragma once
// The model-profile options the at-scale programs share (at_scale_replay, at_scale_sim,
// at_scale_mpi): the profile CSV (bench/at_scale/step_replay.h) and how its compute becomes
// seconds on one node. Header-only: at_scale_sim is built by smpicxx from sources.
#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "bench/at_scale/step_replay.h"
#include <hddp/kernels/check.h>

namespace hddp {

struct ProfileArgs {
  std::string path, name;
  double compute_ms = 0;   // > 0: scale forward + backward to this many ms per step
  double node_gflops = 0;  // > 0: a flop profile's rate on one node
  double other_ms = 0;     // per step outside forward/backward (loss, optimizer)
};

// Bad input (an unreadable or malformed file, a flop profile without a rate): exit code 2.
struct ProfileArgsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CLI11's parse with the project's exit codes: 0 after --help, 2 on bad input (CLI11 prints
// the message); -1 to go on.
inline int parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
}

inline void add_profile_options(CLI::App& app, ProfileArgs& a) {
  app.add_option("--profile", a.path, "model profile CSV: layer,params,forward_s|forward_flop,backward_s|backward_flop")
      ->required();
  app.add_option("--name", a.name, "the model's name in the output (default: the file's stem)");
  app.add_option("--compute-ms", a.compute_ms, "forward + backward per step on one node (ms): scales the profile")
      ->check(CLI::PositiveNumber);
  app.add_option("--node-gflops", a.node_gflops, "one node's rate for a flop profile (GFLOP/s)")->check(CLI::PositiveNumber);
  app.add_option("--other-ms", a.other_ms, "compute per step outside forward/backward: loss, optimizer (ms)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

inline ModelProfile load_profile(const ProfileArgs& a) {
  ModelProfile m;
  try {
    m = read_model_profile(a.path);
  } catch (const Error& e) {
    throw ProfileArgsError(e.what());
  }
  if (a.compute_ms > 0) profile_scale_to(m, a.compute_ms * 1e-3);
  else if (m.flop && a.node_gflops > 0) profile_to_seconds(m, a.node_gflops * 1e9);
  else if (m.flop)
    throw ProfileArgsError(a.path + " counts flop: give --node-gflops (one node's rate) or --compute-ms");
  m.other = a.other_ms * 1e-3;
  m.name = a.name;
  if (m.name.empty()) {
    const size_t slash = a.path.find_last_of('/'), dot = a.path.find_last_of('.');
    const size_t b = slash == std::string::npos ? 0 : slash + 1;
    m.name = a.path.substr(b, dot == std::string::npos || dot < b ? std::string::npos : dot - b);
  }
  return m;
}

}  // namespace hddp
