#include "workers.h"

#include <dirent.h>
#include <mpi.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include "common.h"
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/distributed/bucket_autosize.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>

namespace scaling {

using Clock = std::chrono::steady_clock;

std::vector<hddp::LayerSpec> wide_layers() {
  using namespace hddp;
  return {Linear(1, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1)};
}

double gemm_flops_per_step(const hddp::Sequential<float>& model, int64_t batch) {
  // Forward X W^T, backward dY W and dY^T X: 3 x 2 B in out per Linear (bench_layers' count).
  double f = 0;
  for (size_t i = 0; i < model.num_layers(); ++i)
    if (const auto* l = dynamic_cast<const hddp::layers::Linear<float>*>(&model.layer(i)))
      f += 6.0 * double(batch) * double(l->in()) * double(l->out());
  return f;
}

GemmShape parse_shape(const std::string& s) {
  if (s == "fwd") return {"fwd", 256, 1024, 1024, "NT"};
  if (s == "dx") return {"dx", 256, 1024, 1024, "NN"};
  if (s == "dw") return {"dw", 1024, 1024, 256, "TN"};
  if (s == "sq2048") return {"sq2048", 2048, 2048, 2048, "NN"};
  GemmShape g;
  std::string dims = s;
  g.trans = "NN";
  if (const size_t c = s.find(':'); c != std::string::npos) dims = s.substr(0, c), g.trans = s.substr(c + 1);
  const std::vector<std::string> d = split(dims, 'x');
  auto bad = [&] {
    return UsageError("'" + s + "' is not fwd, dx, dw, sq2048 or MxNxK[:NN|NT|TN] (e.g. 4096x4096x4096:NN)");
  };
  if (d.size() != 3 || (g.trans != "NN" && g.trans != "NT" && g.trans != "TN")) throw bad();
  int64_t* v[3] = {&g.M, &g.N, &g.K};
  for (int i = 0; i < 3; ++i) {
    char* end = nullptr;
    const long long x = std::strtoll(d[i].c_str(), &end, 10);
    if (d[i].empty() || *end || x <= 0 || x > 65536) throw bad();
    *v[i] = x;
  }
  g.name = dims + ":" + g.trans;
  return g;
}

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }


// --key value pairs after "--worker KIND".
std::map<std::string, std::string> worker_args(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 3; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || i + 1 >= argc) throw UsageError("worker: bad argument '" + k + "'");
    a[k.substr(2)] = argv[i + 1];
  }
  return a;
}
std::string get(const std::map<std::string, std::string>& a, const std::string& k, const std::string& def) {
  const auto it = a.find(k);
  return it == a.end() ? def : it->second;
}

// Runs fn once (warm-up), then repeatedly until min_time has passed and at least min_calls
// calls were made; returns {seconds per call, CPU utilisation = CPU time / (wall x threads)}.
template <class F>
std::pair<double, double> time_loop(F&& fn, double min_time, int min_calls) {
  fn();
  const int threads = omp_get_max_threads();
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  int calls = 0;
  double el = 0;
  do {
    fn();
    ++calls;
    el = seconds(t0, Clock::now());
  } while (el < min_time || calls < min_calls);
  return {el / calls, (cpu_seconds() - c0) / (el * threads)};
}

using GemmFn = hddp::GemmFn<float>;

int gemm_worker(const std::map<std::string, std::string>& a) {
  const double min_time = std::stod(get(a, "min-time", "0.2"));
  std::vector<GemmShape> shapes;
  for (const std::string& s : split(get(a, "shapes", "fwd,dx,dw,sq2048"), ',')) shapes.push_back(parse_shape(s));
  std::vector<std::pair<std::string, GemmFn>> backends;
  for (const std::string& b : split(get(a, "backends", "hddp,openblas"), ',')) {
    if (b == "hddp") backends.emplace_back(b, &hddp::gemm_blocked<float>);
    else if (b == "openblas") backends.emplace_back(b, &hddp::gemm_openblas<float>);
    else throw UsageError("worker gemm: unknown backend '" + b + "'");
  }
  const int threads = omp_get_max_threads();
  for (size_t si = 0; si < shapes.size(); ++si) {
    const GemmShape& s = shapes[si];
    std::vector<float> A(size_t(s.M * s.K)), B(size_t(s.K * s.N)), C(size_t(s.M * s.N));
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> d(-100, 100);
    for (auto& x : A) x = float(d(rng)) / 128;
    for (auto& x : B) x = float(d(rng)) / 128;
    const hddp::Trans ta = s.trans[0] == 'T' ? hddp::Trans::Yes : hddp::Trans::No;
    const hddp::Trans tb = s.trans[1] == 'T' ? hddp::Trans::Yes : hddp::Trans::No;
    const int64_t lda = ta == hddp::Trans::No ? s.K : s.M, ldb = tb == hddp::Trans::No ? s.N : s.K;
    for (size_t bi = 0; bi < backends.size(); ++bi) {
      // Alternate which backend goes first from shape to shape.
      const auto& [bname, fn] = backends[(bi + si) % backends.size()];
      const auto [t, util] = time_loop(
          [&, fn = fn] { fn(ta, tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), s.N); },
          min_time, 1);
      std::printf("%s\n", row_line({{"kind", "gemm"},
                                    {"shape", s.name},
                                    {"M", std::to_string(s.M)},
                                    {"N", std::to_string(s.N)},
                                    {"K", std::to_string(s.K)},
                                    {"trans", s.trans},
                                    {"backend", bname},
                                    {"threads", std::to_string(threads)},
                                    {"time_s", fmt(t, 9)},
                                    {"cpu_util", fmt(util, 4)}})
                              .c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

struct WideData {
  std::vector<float> x, y;
  WideData(int64_t batch, uint64_t seed) : x(size_t(batch)), y(size_t(batch)) {
    hddp::Rng rng(seed);
    for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
    for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
  }
};

int step_worker(const std::map<std::string, std::string>& a) {
  const double min_time = std::stod(get(a, "min-time", "0.3"));
  const std::vector<hddp::LayerSpec> layers = wide_layers();
  const WideData data(kWideBatch, 2);
  const int threads = omp_get_max_threads();
  for (const std::string& b : split(get(a, "backends", "hddp,openblas"), ',')) {
    const hddp::GemmBackend backend = b == "hddp" ? hddp::GemmBackend::Blocked
                                      : b == "openblas" ? hddp::GemmBackend::OpenBLAS
                                                        : throw UsageError("worker step: unknown backend '" + b + "'");
    hddp::set_gemm_backend(backend);
    hddp::Rng rng(1);
    hddp::Sequential<float> model(layers, kWideBatch, rng);
    hddp::Adam<float> adam(model.num_params(), {.lr = kWideLr});
    float loss = 0;
    const auto [t, util] = time_loop(
        [&] {
          model.zero_grad();
          model.forward(data.x.data(), kWideBatch);
          loss = model.loss(data.y.data());
          model.backward(data.y.data());
          adam.step(model.params(), model.grads());
        },
        min_time, 2);
    if (!std::isfinite(loss)) throw Failure("worker step: the loss is not finite");
    std::printf("%s\n", row_line({{"kind", "step"},
                                  {"model", "wide"},
                                  {"backend", b},
                                  {"threads", std::to_string(threads)},
                                  {"time_s", fmt(t, 9)},
                                  {"gflop", fmt(gemm_flops_per_step(model, kWideBatch) * 1e-9, 6)},
                                  {"cpu_util", fmt(util, 4)}})
                            .c_str());
    std::fflush(stdout);
  }
  return 0;
}

// Every thread of this process and the CPUs it may run on (/proc/self/task/*/status).
std::vector<std::pair<std::string, std::string>> thread_affinities() {
  std::vector<std::pair<std::string, std::string>> v;
  DIR* d = opendir("/proc/self/task");
  if (!d) return v;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/status");
    std::string line, name, cpus;
    while (std::getline(f, line)) {
      if (line.rfind("Name:", 0) == 0) name = line.substr(line.find_first_not_of(" \t", 5));
      if (line.rfind("Cpus_allowed_list:", 0) == 0) cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
    for (char& c : name)
      if (c == ' ' || c == '=') c = '_';
    v.emplace_back(std::string(e->d_name) + ":" + name, cpus);
  }
  closedir(d);
  std::sort(v.begin(), v.end());
  return v;
}

int ddp_worker(int argc, char** argv, const std::map<std::string, std::string>& a) {
  const hddp::ReduceMode mode = hddp::parse_reduce_mode(get(a, "reduce-mode", "test"));
  hddp::mpi::Env env(&argc, &argv, hddp::required_thread_level(mode));
  const int rank = env.rank(), size = env.size();
  const int steps = std::stoi(get(a, "steps", "10")), warmup = std::stoi(get(a, "warmup", "2"));
  const int64_t batch = std::stoll(get(a, "batch", std::to_string(kWideBatch)));
  const bool tune_first = get(a, "tune-first", "0") == "1";
  const bool pin_progress = get(a, "progress-core", "0") == "1";
  const bool show_affinity = get(a, "show-affinity", "0") == "1";
  const std::vector<std::string> caps = split(get(a, "caps", "25"), ',');
  const std::vector<hddp::LayerSpec> layers = wide_layers();
  const WideData data(batch, 100 + uint64_t(rank));

  struct Run {
    std::string label;
    std::unique_ptr<hddp::Sequential<float>> model;
    std::unique_ptr<hddp::Adam<float>> adam;
    std::unique_ptr<hddp::DistributedModel> ddp;
    hddp::ReducerOptions opt;
    std::vector<double> fwd, bwd, optim, step, comm, exposed;
  };
  std::vector<Run> runs(caps.size());
  bool have_auto = false;
  hddp::AutosizeResult autosize;
  for (size_t i = 0; i < caps.size(); ++i) {
    Run& r = runs[i];
    r.label = caps[i];
    hddp::Rng init(1);
    r.model = std::make_unique<hddp::Sequential<float>>(layers, batch, init);
    r.adam = std::make_unique<hddp::Adam<float>>(r.model->num_params(), hddp::AdamHyper{.lr = kWideLr});
    r.opt.mode = mode;
    if (caps[i] == "auto") {
      hddp::AutosizeOptions ao;
      ao.tune_first = tune_first;
      autosize = hddp::autosize_buckets(env.comm(), *r.model, data.x.data(), batch, data.y.data(), ao, r.opt);
      have_auto = true;
      r.opt.bucket_cap_bytes = autosize.plan.cap_bytes;
      r.opt.first_bucket_cap_bytes = autosize.plan.first_cap_bytes;
    } else {
      char* end = nullptr;
      const double mb = std::strtod(caps[i].c_str(), &end);
      if (end == caps[i].c_str() || *end || !(mb > 0)) throw UsageError("worker ddp: bad cap '" + caps[i] + "'");
      r.opt.bucket_cap_bytes = std::max<int64_t>(4, int64_t(mb * 1048576.0));
    }
  }
  // --progress-core 1: the progress thread on the place OpenMP leaves free (run with
  // OMP_NUM_THREADS one below the rank's cores, OMP_PLACES=cores, OMP_PROC_BIND=close).
  int pcpu = -1;
  if (pin_progress && mode == hddp::ReduceMode::Thread) {
    pcpu = hddp::spare_progress_cpu();
    if (pcpu < 0) throw Failure("worker ddp: --progress-core needs OMP_PLACES with more places than OpenMP threads");
  }
  for (Run& r : runs) {
    r.opt.progress_cpu = pcpu;
    r.ddp = std::make_unique<hddp::DistributedModel>(env.comm(), *r.model, r.opt);
  }

  for (int s = -warmup; s < steps; ++s)
    for (size_t k = 0; k < runs.size(); ++k) {
      Run& r = runs[(k + size_t(std::max(s, 0))) % runs.size()];  // rotating order
      HDDP_MPI(MPI_Barrier(env.comm()));
      const auto t0 = Clock::now();
      r.model->zero_grad();
      r.model->forward(data.x.data(), batch);
      const float loss = r.model->loss(data.y.data());
      const auto t1 = Clock::now();
      r.ddp->backward(data.y.data());
      const auto t2 = Clock::now();
      r.adam->step(r.model->params(), r.model->grads());
      const auto t3 = Clock::now();
      if (!std::isfinite(loss)) throw Failure("worker ddp: the loss is not finite");
      if (s < 0) continue;
      const hddp::ReducerTimes& last = r.ddp->reducer().stats().last;
      r.fwd.push_back(seconds(t0, t1)), r.bwd.push_back(seconds(t1, t2)), r.optim.push_back(seconds(t2, t3));
      r.step.push_back(seconds(t0, t3)), r.comm.push_back(last.comm), r.exposed.push_back(last.exposed);
    }

  if (show_affinity) {  // after the steps: OpenMP's threads exist by now
    std::string mine;
    for (const auto& [tid, cpus] : thread_affinities()) mine += row_line({{"kind", "affinity"}, {"rank", std::to_string(rank)}, {"thread", tid}, {"cpus", cpus}}) + "\n";
    for (const std::string& lines : hddp::mpi::gather_strings(mine, 0, env.comm())) std::fputs(lines.c_str(), stdout);
  }

  const size_t kFields = 6;
  std::vector<double> mine, all;
  for (const Run& r : runs)
    for (const auto* v : {&r.fwd, &r.bwd, &r.optim, &r.step, &r.comm, &r.exposed}) mine.push_back(hddp::median(*v));
  all.resize(rank == 0 ? mine.size() * size_t(size) : 0);
  HDDP_MPI(MPI_Gather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, 0, env.comm()));
  if (rank != 0) return 0;
  const std::vector<hddp::ParamSlice> layout = hddp::param_layout(runs[0].model->param_views());
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    std::vector<std::pair<std::string, std::string>> common = {
        {"kind", "ddp"},
        {"cap", r.label},
        {"cap_bytes", std::to_string(r.opt.bucket_cap_bytes)},
        {"first_cap_bytes", std::to_string(r.opt.first_bucket_cap_bytes)},
        {"buckets", std::to_string(r.ddp->reducer().buckets().size())},
        {"ranks", std::to_string(size)},
        {"threads", std::to_string(omp_get_max_threads())},
        {"progress", hddp::to_string(mode)},
        {"steps", std::to_string(steps)}};
    if (have_auto) {
      const hddp::BucketPlan p = hddp::predict_buckets(layout, 4, autosize.profile, autosize.model,
                                                       r.opt.bucket_cap_bytes, r.opt.first_bucket_cap_bytes);
      common.insert(common.end(), {{"predicted_exposed_s", fmt(p.exposed, 6)},
                                   {"predicted_comm_s", fmt(p.comm, 6)},
                                   {"alpha_s", fmt(autosize.model.alpha, 6)},
                                   {"beta_s_per_byte", fmt(autosize.model.beta, 6)},
                                   {"backward_profile_s", fmt(autosize.profile.total, 6)},
                                   {"autosize_s", fmt(autosize.measure_seconds, 4)}});
    }
    for (int rk = 0; rk < size; ++rk) {
      const double* m = &all[(size_t(rk) * runs.size() + i) * kFields];
      auto kv = common;
      kv.insert(kv.end(), {{"rank", std::to_string(rk)},
                           {"forward_s", fmt(m[0], 6)},
                           {"backward_s", fmt(m[1], 6)},
                           {"optim_s", fmt(m[2], 6)},
                           {"step_s", fmt(m[3], 6)},
                           {"comm_s", fmt(m[4], 6)},
                           {"exposed_s", fmt(m[5], 6)}});
      std::printf("%s\n", row_line(kv).c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int worker_main(int argc, char** argv) {
  if (argc < 3) throw UsageError("--worker needs a kind: gemm, step or ddp");
  const std::string kind = argv[2];
  const auto a = worker_args(argc, argv);
  if (kind == "gemm") return gemm_worker(a);
  if (kind == "step") return step_worker(a);
  if (kind == "ddp") return ddp_worker(argc, argv, a);
  throw UsageError("--worker: unknown kind '" + kind + "' (gemm, step, ddp)");
}

}  // namespace scaling
