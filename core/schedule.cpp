#include <hddp/core/schedule.h>

#include <charconv>
#include <cmath>
#include <numbers>
#include <vector>

#include <hddp/kernels/check.h>

namespace hddp {
namespace {

bool positive_finite(double x) { return x > 0 && std::isfinite(x); }

void check_base_lr(double base_lr) {
  HDDP_CHECK_ARG(positive_finite(base_lr), "LrSchedule: base_lr must be finite and > 0, got " << base_lr);
}

// Shortest text that reads back as the same double.
std::string shortest(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t lo = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(lo, i - lo));
      lo = i + 1;
    }
  return out;
}

// The whole token as a number, or false (no sign before digits other than '-', no spaces, no
// trailing characters).
bool parse_int(const std::string& s, int64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}
bool parse_double(const std::string& s, double& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

LrSchedule LrSchedule::constant(double base_lr) {
  check_base_lr(base_lr);
  LrSchedule s;
  s.kind_ = Kind::Constant;
  s.base_lr_ = base_lr;
  return s;
}

LrSchedule LrSchedule::step(double base_lr, int64_t step_size, double gamma) {
  check_base_lr(base_lr);
  HDDP_CHECK_ARG(step_size >= 1, "LrSchedule: step_size must be >= 1, got " << step_size);
  HDDP_CHECK_ARG(positive_finite(gamma), "LrSchedule: gamma must be finite and > 0, got " << gamma);
  LrSchedule s;
  s.kind_ = Kind::Step;
  s.base_lr_ = base_lr, s.step_size_ = step_size, s.gamma_ = gamma;
  return s;
}

LrSchedule LrSchedule::cosine(double base_lr, int64_t t_max, double eta_min) {
  check_base_lr(base_lr);
  HDDP_CHECK_ARG(t_max >= 1, "LrSchedule: t_max must be >= 1, got " << t_max);
  HDDP_CHECK_ARG(eta_min >= 0 && eta_min < base_lr,
                 "LrSchedule: eta_min must be in [0, base_lr " << base_lr << "), got " << eta_min);
  LrSchedule s;
  s.kind_ = Kind::Cosine;
  s.base_lr_ = base_lr, s.t_max_ = t_max, s.eta_min_ = eta_min;
  return s;
}

LrSchedule LrSchedule::with_warmup(int64_t steps, double start_factor) const {
  HDDP_CHECK_ARG(steps >= 0, "LrSchedule: warmup steps must be >= 0, got " << steps);
  HDDP_CHECK_ARG(start_factor > 0 && start_factor <= 1,
                 "LrSchedule: warmup start_factor must be in (0, 1], got " << start_factor);
  LrSchedule s = *this;
  s.warmup_ = steps, s.start_factor_ = start_factor;
  return s;
}

LrSchedule LrSchedule::warmup_cosine(double base_lr, int64_t warmup, int64_t total_steps, double eta_min) {
  HDDP_CHECK_ARG(warmup >= 0 && warmup < total_steps, "LrSchedule: warmup must be in [0, total_steps " << total_steps
                                                          << "), got " << warmup);
  return cosine(base_lr, total_steps - warmup, eta_min).with_warmup(warmup);
}

double LrSchedule::lr_at(int64_t t) const {
  HDDP_CHECK_ARG(t >= 0, "LrSchedule: the step count must be >= 0, got " << t);
  // PyTorch's closed forms, operation for operation (schedule.h).
  if (t < warmup_)
    return base_lr_ * (start_factor_ + ((1.0 - start_factor_) * double(t)) / double(warmup_));
  const int64_t k = t - warmup_;
  switch (kind_) {
    case Kind::Constant:
      return base_lr_;
    case Kind::Step:
      return base_lr_ * std::pow(gamma_, double(k / step_size_));
    case Kind::Cosine:
      return eta_min_ + ((base_lr_ - eta_min_) * (1.0 + std::cos((std::numbers::pi * double(k)) / double(t_max_)))) / 2.0;
  }
  return base_lr_;  // not reached
}

std::string to_string(const LrSchedule& s) {
  std::string out;
  switch (s.kind()) {
    case LrSchedule::Kind::Constant:
      out = "constant base_lr=" + shortest(s.base_lr());
      break;
    case LrSchedule::Kind::Step:
      out = "step base_lr=" + shortest(s.base_lr()) + " step_size=" + std::to_string(s.step_size()) +
            " gamma=" + shortest(s.gamma());
      break;
    case LrSchedule::Kind::Cosine:
      out = "cosine base_lr=" + shortest(s.base_lr()) + " t_max=" + std::to_string(s.t_max()) +
            " eta_min=" + shortest(s.eta_min());
      break;
  }
  if (s.warmup_steps() > 0)
    out += " warmup=" + std::to_string(s.warmup_steps()) + " start_factor=" + shortest(s.warmup_start_factor());
  return out;
}

LrSchedule parse_lr_schedule(const std::string& spec, double base_lr, int64_t total_steps, int64_t warmup_steps) {
  const std::string where = "lr schedule '" + spec + "': ";
  const char* forms = "constant, step:STEP_SIZE:GAMMA, cosine or cosine:ETA_MIN";
  HDDP_CHECK_ARG(positive_finite(base_lr), where << "the base learning rate must be finite and > 0, got " << base_lr);
  HDDP_CHECK_ARG(total_steps >= 1, where << "the total number of steps must be >= 1, got " << total_steps);
  HDDP_CHECK_ARG(warmup_steps >= 0, where << "the number of warmup steps must be >= 0, got " << warmup_steps);
  const std::vector<std::string> f = split(spec, ':');
  const std::string& kind = f[0];
  LrSchedule s = LrSchedule::constant(base_lr);
  if (kind == "constant") {
    HDDP_CHECK_ARG(f.size() == 1, where << "constant takes no parameters");
  } else if (kind == "step") {
    HDDP_CHECK_ARG(f.size() == 3, where << "expected step:STEP_SIZE:GAMMA");
    int64_t step_size = 0;
    double gamma = 0;
    HDDP_CHECK_ARG(parse_int(f[1], step_size) && step_size >= 1,
                   where << "STEP_SIZE must be an integer >= 1, got '" << f[1] << "'");
    HDDP_CHECK_ARG(parse_double(f[2], gamma) && positive_finite(gamma),
                   where << "GAMMA must be a finite number > 0, got '" << f[2] << "'");
    s = LrSchedule::step(base_lr, step_size, gamma);
  } else if (kind == "cosine") {
    HDDP_CHECK_ARG(f.size() <= 2, where << "expected cosine or cosine:ETA_MIN");
    double eta_min = 0;
    if (f.size() == 2)
      HDDP_CHECK_ARG(parse_double(f[1], eta_min) && eta_min >= 0 && eta_min < base_lr,
                     where << "ETA_MIN must be a number in [0, the base learning rate " << base_lr << "), got '"
                           << f[1] << "'");
    HDDP_CHECK_ARG(warmup_steps < total_steps, where << "cosine anneals over the steps after the warmup: needs more total "
                                                        "steps than warmup steps, got "
                                                     << total_steps << " total and " << warmup_steps << " warmup");
    s = LrSchedule::cosine(base_lr, total_steps - warmup_steps, eta_min);
  } else {
    HDDP_CHECK_ARG(false, where << (spec.empty() ? std::string("empty") : "unknown kind '" + kind + "'")
                                << " (expected " << forms << ")");
  }
  return s.with_warmup(warmup_steps);
}

}  // namespace hddp
