#include "poly_train/history.h"

#include <hddp/kernels/check.h>
#include <hddp/core/serialize.h>

namespace poly {

LossHistory::LossHistory(const hddp::mpi::Env& env, int64_t epochs)
    : env_(env), mine_(size_t(epochs)), all_(env.root() ? size_t(env.size()) : 0) {}

void LossHistory::sync(int64_t upto, hddp::Watchdog& watchdog) {
  const int n = static_cast<int>(upto - synced_), size = env_.size();
  std::vector<float> buf(env_.root() ? size_t(n) * size_t(size) : 0);
  MPI_Request req;
  HDDP_MPI(MPI_Igather(mine_.data() + synced_, n, MPI_FLOAT, buf.data(), n, MPI_FLOAT, 0, env_.comm(), &req));
  watchdog.wait(&req, "the gather of the losses");
  for (size_t r = 0; r < all_.size(); ++r)
    all_[r].insert(all_[r].end(), buf.begin() + int64_t(r) * n, buf.begin() + int64_t(r + 1) * n);
  synced_ = upto;
}

std::string LossHistory::save(int64_t epochs, hddp::Watchdog& watchdog) {
  sync(epochs, watchdog);
  std::vector<float> v;
  v.reserve(all_.size() * size_t(epochs));
  for (const std::vector<float>& r : all_) v.insert(v.end(), r.begin(), r.begin() + epochs);
  return hddp::encode_floats(v);
}

void LossHistory::restore(const std::string& bytes, int64_t epochs) {
  const std::string what = "its loss history";
  const std::vector<float> v = hddp::decode_floats(bytes, what);
  const size_t size = size_t(env_.size());
  HDDP_CHECK(v.size() == size * size_t(epochs), what << ": " << v.size() << " losses, expected " << size << " ranks x "
                                                     << epochs << " epochs");
  for (size_t r = 0; r < all_.size(); ++r) all_[r].assign(v.begin() + int64_t(r * epochs), v.begin() + int64_t((r + 1) * epochs));
  synced_ = epochs;
}

}  // namespace poly
