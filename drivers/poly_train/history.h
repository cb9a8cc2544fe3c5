#pragma once
// The loss history: every rank's loss of every epoch, for loss.csv. Each rank records its own;
// sync() gathers them to rank 0 (through the watchdog); in a checkpoint they are the record
// "losses": P x E float32, rank r's loss of epoch e at r * E + e.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>

namespace poly {

class LossHistory {
 public:
  LossHistory(const hddp::mpi::Env& env, hddp::Watchdog& watchdog, int64_t epochs);

  void record(int64_t epoch, float loss) { mine_[size_t(epoch)] = loss; }
  // Gathers epochs [synced, upto) of every rank into rank 0's history (collective).
  void sync(int64_t upto);
  const std::vector<std::vector<float>>& all() const { return all_; }  // rank 0: per rank

  // The record of the first `epochs` epochs (rank 0; call sync(epochs) first) and back: restore
  // throws hddp::Error naming `what` when it does not hold P x epochs values.
  std::string record_bytes(int64_t epochs) const;
  void restore(const std::string& bytes, int64_t epochs, const std::string& what);

 private:
  const hddp::mpi::Env& env_;
  hddp::Watchdog& watchdog_;
  int64_t synced_ = 0;
  std::vector<float> mine_;                  // this rank's, by epoch
  std::vector<std::vector<float>> all_;      // rank 0: every rank's [0, synced_)
};

}  // namespace poly
