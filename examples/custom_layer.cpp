// custom_layer: a layer of the user's own, written against hddp's layer interface
// (<hddp/core/layer.h>), checked against finite differences, then trained data-parallel.
//   mpiexec -n 2 custom_layer
// The layer: Swish with a learnable slope, y = x * sigmoid(b x), one parameter b per feature
// ("beta", features x 1), in place of a fixed activation.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/layer.h>
#include <hddp/core/layers.h>
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/train/training_run.h>

template <class T>
class Swish final : public hddp::Layer<T> {
 public:
  std::string name() const override { return "Swish()"; }
  hddp::Shape setup(const hddp::Shape& in) override { return n_ = hddp::numel(in), in; }
  std::vector<hddp::ParamSpec> parameters() const override { return {{"beta", n_, 1}}; }
  void reset_parameters(hddp::Rng&, T* const* p) const override { std::fill(p[0], p[0] + n_, T(1)); }
  void forward(const hddp::Forward<T>& f) const override {
    for (int64_t i = 0; i < f.batch * n_; ++i) f.y[i] = f.x[i] * sigmoid(f.params[0][i % n_] * f.x[i]);
  }
  // dy/dx = s + b x s (1 - s), dy/db = x^2 s (1 - s), with s = sigmoid(b x).
  void backward(const hddp::Backward<T>& g) const override {
    T* db = g.grads[0];
    if (!g.accumulate) std::fill(db, db + n_, T(0));
    for (int64_t i = 0; i < g.batch * n_; ++i) {
      const T x = g.x[i], b = g.params[0][i % n_], s = sigmoid(b * x), ds = s * (1 - s);
      db[i % n_] += g.dy[i] * x * x * ds;
      if (g.dx) g.dx[i] = g.dy[i] * (s + b * x * ds);
    }
  }

 private:
  static T sigmoid(T z) { return T(1) / (T(1) + std::exp(-z)); }
  int64_t n_ = 0;
};

// Every gradient of a small model with the layer against central differences of its loss.
bool gradients_match(bool report) {
  hddp::Rng rng(3);
  hddp::Sequential<double> m({hddp::Linear(3, 5), hddp::layer<Swish>(), hddp::Linear(5, 2)}, 4, rng);
  std::vector<double> x(12), y(8);
  for (auto& v : x) v = rng.uniform(-1.0, 1.0);
  for (auto& v : y) v = rng.uniform(-1.0, 1.0);
  hddp::MseLoss<double> mse(2);
  m.zero_grad(), mse.forward(m.forward(x, 4), y.data(), 4), m.backward(mse.grad());
  const std::vector<double> g(m.grads(), m.grads() + m.num_params());
  double worst = 0;
  for (int64_t k = 0; k < m.num_params(); ++k) {
    double& p = m.params()[k];
    const double p0 = p, h = 1e-6;
    p = p0 + h;
    const double up = mse.forward(m.forward(x, 4), y.data(), 4);
    p = p0 - h;
    const double down = mse.forward(m.forward(x, 4), y.data(), 4);
    p = p0;
    worst = std::max(worst, std::fabs(g[size_t(k)] - (up - down) / (2 * h)));
  }
  if (report)
    std::printf("custom_layer: %s, %lld parameters, largest gradient error %.2e\n", m.describe().c_str(),
                (long long)m.num_params(), worst);
  return worst < 1e-7;
}

int main(int argc, char** argv) {
  hddp::mpi::Env env(&argc, &argv);
  if (!gradients_match(env.root())) return 1;
  // Data-parallel: y = sin(3 x) on x in [-1, 1], 64 samples per rank per step, every rank its own.
  hddp::Rng init(1), data(2, 1 + uint64_t(env.rank()));
  hddp::Sequential<float> model({hddp::Linear(1, 32), std::make_shared<Swish<float>>(), hddp::Linear(32, 1)}, 64, init);
  hddp::Adam<float> adam(model.num_params(), {.lr = 1e-2});
  hddp::TrainingRun run(env, model, adam, {.program = "custom_layer", .steps_per_epoch = 500});
  if (const std::string err = run.begin(); !err.empty()) return 2;
  hddp::MseLoss<float> mse(1);
  std::vector<float> x(64), y(64);
  double first = 0, loss = 0;
  for (int64_t step = 0; step < run.total_steps(); ++step) {
    for (int i = 0; i < 64; ++i) x[i] = data.uniform(-1.0f, 1.0f), y[i] = std::sin(3 * x[i]);
    model.zero_grad();
    loss = mse.forward(model.forward(x, 64), y.data(), 64);
    first = step == 0 ? loss : first;
    run.ddp().backward(mse.grad());
    if (const std::optional<int> exit = run.end_step(step, loss, 64)) return *exit;  // NaN/Inf: 3, a signal: 75
  }
  const float beta0 = model.params()[model.param_views()[2].offset];  // "1.beta", trained
  if (env.root())
    std::printf("custom_layer: %d rank(s), loss %.4f -> %.4f after 500 steps; beta[0] = %.3f\n", env.size(), first, loss, beta0);
  return loss < 0.1 * first ? 0 : 1;
}
