#pragma once
// The loss history: every rank's loss of every epoch, for loss.csv. Each rank records its own;
// sync() gathers them to rank 0 (through the watchdog); in a checkpoint (the run kit's program
// state) they are P x E float32, rank r's loss of epoch e at r * E + e.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/training_run.h>

namespace poly {

class LossHistory final : public hddp::RunState {
 public:
  LossHistory(const hddp::mpi::Env& env, int64_t epochs);

  void record(int64_t epoch, float loss) { mine_[size_t(epoch)] = loss; }
  // Gathers epochs [synced, upto) of every rank into rank 0's history (collective).
  void sync(int64_t upto, hddp::Watchdog& watchdog);
  const std::vector<std::vector<float>>& all() const { return all_; }  // rank 0: per rank

  // The checkpoint's bytes of the first `epochs` epochs (collective: syncs them; rank 0's
  // bytes) and back: restore throws hddp::Error when they are not P x epochs values.
  std::string save(int64_t epochs, hddp::Watchdog& watchdog) override;
  void restore(const std::string& bytes, int64_t epochs) override;

 private:
  const hddp::mpi::Env& env_;
  int64_t synced_ = 0;
  std::vector<float> mine_;                  // this rank's, by epoch
  std::vector<std::vector<float>> all_;      // rank 0: every rank's [0, synced_)
};

}  // namespace poly
