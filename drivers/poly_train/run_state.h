#pragma once
// The run's state beyond the model's parameters: the loss history, every rank's sampling RNG
// and the optimizer, and the checkpoint file that holds them (format: core/checkpoint.h).
//
// Resume is one explicit, collective operation (resume()): rank 0 checks --checkpoint and reads
// the file; every rank receives the same bytes and restores from them - the parameters, the
// optimizer state, its own sampling RNG state and (rank 0) the loss history. Nothing relies on
// a later broadcast: each rank holds the checkpoint's state when resume() returns.
//
// save() is collective too: rank 0 gathers every rank's losses and RNG state and writes the
// file atomically; every rank learns that it is written. Non-finite state is never saved.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include "poly_train/options.h"

namespace poly {

// The run's identity in a checkpoint: what must be the same for a resume to continue it.
std::map<std::string, std::string> run_identity(const Options& o, const std::vector<hddp::LayerSpec>& layers);

// --init FILE (collective): rank 0 reads the safetensors file, every rank parses the same bytes
// and loads the weights into the model (core/safetensors.h). "" or the error, the same on
// every rank; the model is unchanged then.
std::string init_weights(const hddp::mpi::Env& env, const std::string& path, hddp::Sequential<float>& model);

class RunState {
 public:
  RunState(const hddp::mpi::Env& env, const Options& o, hddp::Watchdog& watchdog, hddp::Sequential<float>& model,
           hddp::Optimizer<float>& opt, hddp::Rng& data, std::map<std::string, std::string> identity);

  // Checks --checkpoint (its directory is writable; an existing file needs --resume) and, with
  // --resume and an existing file, resumes from it (above). Collective. Returns "" or the
  // error, the same on every rank; nothing was changed or written then.
  std::string resume();
  int64_t start() const { return start_; }  // the first epoch to train

  void record(int64_t epoch, float loss) { losses_[size_t(epoch)] = loss; }
  // Gathers [synced, upto) of every rank's losses into rank 0's history (collective).
  void sync_losses(int64_t upto);
  const std::vector<std::vector<float>>& history() const { return history_; }  // rank 0: per rank

  // Parameters and optimizer state are finite (the same on every rank: no collective).
  bool state_finite() const;
  // Writes the checkpoint of `done` epochs (collective).
  void save(int64_t done);
  // What stop messages say about the checkpoint: "; the last checkpoint 'F' (N epochs) is kept",
  // " (no --checkpoint)" or " (no checkpoint written yet)".
  std::string kept_note() const;

 private:
  std::string check_and_read(std::string& bytes, bool& read) const;  // rank 0
  std::string restore(const std::string& bytes);         // every rank

  const hddp::mpi::Env& env_;
  const Options& o_;
  hddp::Watchdog& watchdog_;
  hddp::Sequential<float>& model_;
  hddp::Optimizer<float>& opt_;
  hddp::Rng& data_;
  std::map<std::string, std::string> identity_;
  int64_t start_ = 0, saved_epoch_ = 0, synced_ = 0;
  std::vector<float> losses_;                  // this rank's, by epoch
  std::vector<std::vector<float>> history_;    // rank 0: every rank's [0, synced_)
};

}  // namespace poly
