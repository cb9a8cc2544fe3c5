#include "bench/at_scale/step_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <sstream>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

// ---- CSV reading: one small line splitter, errors as path:line ----

namespace {

struct CsvLine {
  int number = 0;
  std::vector<std::string> fields;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// Non-empty, non-comment lines split at commas, fields trimmed.
std::vector<CsvLine> csv_lines(const std::string& text) {
  std::vector<CsvLine> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    CsvLine l{n, {}};
    std::string f;
    std::istringstream fs(t);
    while (std::getline(fs, f, ',')) l.fields.push_back(trim(f));
    if (t.back() == ',') l.fields.push_back("");
    out.push_back(std::move(l));
  }
  return out;
}

#define HDDP_CSV_CHECK(cond, path, line, msg) HDDP_CHECK(cond, path << ":" << (line) << ": " << msg)

double number(const std::string& s, const std::string& path, int line, const char* what) {
  char* end = nullptr;
  const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  HDDP_CSV_CHECK(!s.empty() && end && *end == '\0' && std::isfinite(v) && v >= 0, path, line,
                 what << " '" << s << "' is not a finite number >= 0");
  return v;
}

int64_t count(const std::string& s, const std::string& path, int line, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long long v = s.empty() ? -1 : std::strtoll(s.c_str(), &end, 10);
  HDDP_CSV_CHECK(!s.empty() && end && *end == '\0' && errno == 0 && v >= 0, path, line,
                 what << " '" << s << "' is not a whole number >= 0");
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ',';
    s += x;
  }
  return s;
}

}  // namespace

// ---- The model profile ----

double ModelProfile::compute() const {
  double s = 0;
  for (const LayerProfile& l : layers) s += l.forward + l.backward;
  return s;
}

int64_t ModelProfile::num_params() const {
  int64_t n = 0;
  for (const LayerProfile& l : layers)
    for (int64_t p : l.params) n += p;
  return n;
}

ModelProfile parse_model_profile(const std::string& text, const std::string& path) {
  const std::vector<CsvLine> lines = csv_lines(text);
  HDDP_CHECK(!lines.empty(), path << ": empty profile: expected the header layer,params,forward_s,backward_s");
  const std::string header = join(lines[0].fields);
  ModelProfile m;
  if (header == "layer,params,forward_flop,backward_flop") m.flop = true;
  else
    HDDP_CSV_CHECK(header == "layer,params,forward_s,backward_s", path, lines[0].number,
                   "header '" << header << "' is neither layer,params,forward_s,backward_s nor layer,params,forward_flop,backward_flop");
  std::set<std::string> names;
  for (size_t i = 1; i < lines.size(); ++i) {
    const CsvLine& l = lines[i];
    HDDP_CSV_CHECK(l.fields.size() == 4, path, l.number, "expected 4 fields, found " << l.fields.size());
    LayerProfile layer;
    layer.name = l.fields[0];
    HDDP_CSV_CHECK(!layer.name.empty(), path, l.number, "empty layer name");
    HDDP_CSV_CHECK(names.insert(layer.name).second, path, l.number, "layer '" << layer.name << "' appears twice");
    HDDP_CSV_CHECK(!l.fields[1].empty(), path, l.number, "empty parameter count (0 for none)");
    std::istringstream ps(l.fields[1]);
    std::string p;
    while (std::getline(ps, p, '+')) {
      const int64_t n = count(trim(p), path, l.number, "parameter count");
      if (n > 0) layer.params.push_back(n);
    }
    layer.forward = number(l.fields[2], path, l.number, "forward time");
    layer.backward = number(l.fields[3], path, l.number, "backward time");
    m.layers.push_back(std::move(layer));
  }
  HDDP_CHECK(m.num_params() > 0, path << ": the profile has no parameters");
  return m;
}

ModelProfile read_model_profile(const std::string& path) { return parse_model_profile(read_file(path), path); }

std::string model_profile_csv(const ModelProfile& m) {
  std::string s = m.flop ? "layer,params,forward_flop,backward_flop\n" : "layer,params,forward_s,backward_s\n";
  char buf[96];
  for (const LayerProfile& l : m.layers) {
    std::string p;
    for (int64_t n : l.params) {
      if (!p.empty()) p += '+';
      p += std::to_string(n);
    }
    std::snprintf(buf, sizeof buf, ",%.9g,%.9g\n", l.forward, l.backward);
    s += l.name;
    s += ',';
    s += p.empty() ? "0" : p;
    s += buf;
  }
  return s;
}

void profile_to_seconds(ModelProfile& m, double rate) {
  HDDP_CHECK_ARG(rate > 0 && std::isfinite(rate), "profile_to_seconds: flop rate must be > 0");
  for (LayerProfile& l : m.layers) l.forward /= rate, l.backward /= rate;
  m.flop = false;
}

void profile_scale_to(ModelProfile& m, double seconds) {
  HDDP_CHECK_ARG(seconds > 0 && std::isfinite(seconds), "profile_scale_to: compute time must be > 0");
  const double c = m.compute();
  HDDP_CHECK_ARG(c > 0, "profile_scale_to: the profile has no compute to scale");
  for (LayerProfile& l : m.layers) l.forward *= seconds / c, l.backward *= seconds / c;
  m.flop = false;
}

std::vector<ParamSlice> profile_layout(const ModelProfile& m) {
  std::vector<ParamSlice> layout;
  int64_t off = 0;
  for (const LayerProfile& l : m.layers)
    for (size_t k = 0; k < l.params.size(); ++k) {
      layout.push_back({l.name + "." + std::to_string(k), off, l.params[k]});
      off += l.params[k];
    }
  return layout;
}

// ---- The allreduce table ----

AllreduceTable parse_allreduce_table(const std::string& text, const std::string& path) {
  const std::vector<CsvLine> lines = csv_lines(text);
  HDDP_CHECK(!lines.empty(), path << ": empty table: expected the header " << kAllreduceTableHeader);
  HDDP_CSV_CHECK(join(lines[0].fields) == kAllreduceTableHeader, path, lines[0].number,
                 "header '" << join(lines[0].fields) << "' is not " << kAllreduceTableHeader);
  AllreduceTable t;
  for (size_t i = 1; i < lines.size(); ++i) {
    const CsvLine& l = lines[i];
    HDDP_CSV_CHECK(l.fields.size() == 5, path, l.number, "expected 5 fields, found " << l.fields.size());
    AllreduceTable::Row r;
    r.op = l.fields[0];
    HDDP_CSV_CHECK(r.op == "allreduce" || r.op == "iallreduce", path, l.number,
                   "op '" << r.op << "' is neither allreduce nor iallreduce");
    const int64_t ranks = count(l.fields[1], path, l.number, "ranks");
    HDDP_CSV_CHECK(ranks >= 1 && ranks <= (1 << 24), path, l.number, "ranks " << ranks << " out of range [1, 2^24]");
    r.ranks = int(ranks);
    r.bytes = count(l.fields[2], path, l.number, "bytes");
    r.seconds = number(l.fields[3], path, l.number, "seconds");
    HDDP_CSV_CHECK(r.seconds > 0 || r.ranks == 1, path, l.number, "seconds must be > 0");
    HDDP_CSV_CHECK(l.fields[4] == "0" || l.fields[4] == "1", path, l.number,
                   "reduction_charged '" << l.fields[4] << "' is neither 0 nor 1");
    r.reduction_charged = l.fields[4] == "1";
    for (const AllreduceTable::Row& o : t.rows)
      HDDP_CSV_CHECK(!(o.op == r.op && o.ranks == r.ranks && o.bytes == r.bytes), path, l.number,
                     r.op << " at " << r.ranks << " ranks, " << r.bytes << " bytes appears twice");
    t.rows.push_back(r);
  }
  HDDP_CHECK(!t.rows.empty(), path << ": the table has no rows");
  return t;
}

AllreduceTable read_allreduce_table(const std::string& path) { return parse_allreduce_table(read_file(path), path); }

namespace {
std::vector<const AllreduceTable::Row*> rows_of(const AllreduceTable& t, const std::string& op, int ranks) {
  std::vector<const AllreduceTable::Row*> r;
  for (const auto& row : t.rows)
    if (row.op == op && row.ranks == ranks) r.push_back(&row);
  std::sort(r.begin(), r.end(), [](auto* a, auto* b) { return a->bytes < b->bytes; });
  return r;
}
}  // namespace

bool AllreduceTable::has(const std::string& op, int p) const { return !rows_of(*this, op, p).empty(); }

std::vector<int> AllreduceTable::ranks(const std::string& op) const {
  std::set<int> s;
  for (const Row& r : rows)
    if (r.op == op) s.insert(r.ranks);
  return {s.begin(), s.end()};
}

double AllreduceTable::seconds(const std::string& op, int p, int64_t bytes) const {
  const auto r = rows_of(*this, op, p);
  if (r.empty()) {
    std::string have;
    for (int q : ranks(op)) {
      if (!have.empty()) have += ' ';
      have += std::to_string(q);
    }
    HDDP_CHECK(false, "the allreduce table has no " << op << " rows at " << p << " ranks (it has: "
                                                    << (have.empty() ? "none" : have) << ")");
  }
  if (r.size() == 1 || bytes <= r.front()->bytes) return r.front()->seconds;
  size_t i = 1;
  while (i + 1 < r.size() && r[i]->bytes < bytes) ++i;
  const Row &a = *r[i - 1], &b = *r[i];
  const double slope = (b.seconds - a.seconds) / double(b.bytes - a.bytes);
  return std::max(a.seconds + slope * double(bytes - a.bytes), 0.0);
}

bool AllreduceTable::reduction_charged(const std::string& op, int p) const {
  const auto r = rows_of(*this, op, p);
  return !r.empty() && r.front()->reduction_charged;
}

AllreduceModel AllreduceTable::fit(const std::string& op, int p) const {
  std::vector<int64_t> b;
  std::vector<double> s;
  for (const Row* r : rows_of(*this, op, p))
    if (r->seconds > 0) b.push_back(r->bytes), s.push_back(r->seconds);
  if (b.size() < 2 || std::all_of(b.begin(), b.end(), [&](int64_t x) { return x == b.front(); })) return {};
  return fit_alpha_beta(b, s);
}

// ---- The replay ----

std::vector<Round> rabenseifner_rounds(int64_t bytes, int ranks) {
  HDDP_CHECK_ARG(ranks >= 1 && bytes >= 0, "rabenseifner_rounds: bad bytes " << bytes << " or ranks " << ranks);
  int steps = 0;
  while ((1 << steps) < ranks) ++steps;
  std::vector<Round> r;
  for (int k = 0; k < steps; ++k) {  // recursive halving: exchange half, reduce what stays
    const int64_t half = bytes >> (k + 1);
    r.push_back({half, half});
  }
  for (int k = steps - 1; k >= 0; --k) r.push_back({bytes >> (k + 1), 0});  // doubling: gather back
  return r;
}

double rabenseifner_reduced(int64_t bytes, int ranks) {
  double reduced = 0;
  for (const Round& r : rabenseifner_rounds(bytes, ranks)) reduced += double(r.reduced);
  return reduced;
}

namespace {

void check_replay(const ModelProfile& m, const ReplayOptions& o) {
  HDDP_CHECK_ARG(!m.flop, "replay: the profile is in flop: convert it with profile_to_seconds or profile_scale_to");
  HDDP_CHECK_ARG(o.ranks >= 1, "replay: ranks must be >= 1, got " << o.ranks);
  HDDP_CHECK_ARG(o.poll_interval > 0 && std::isfinite(o.poll_interval), "replay: poll interval must be > 0");
  HDDP_CHECK_ARG(o.reduce_bandwidth > 0 && std::isfinite(o.reduce_bandwidth), "replay: reduction bandwidth must be > 0");
  HDDP_CHECK_ARG(m.other >= 0 && std::isfinite(m.other), "replay: other compute must be >= 0");
}

constexpr int64_t kElem = 4;  // float gradients

double forward_time(const ModelProfile& m) {
  double f = 0;
  for (const LayerProfile& l : m.layers) f += l.forward;
  return f;
}
double backward_time(const ModelProfile& m) {
  double b = 0;
  for (const LayerProfile& l : m.layers) b += l.backward;
  return b;
}

// Bytes reduced on each rank by the whole schedule, and the 1/P averaging pass over the
// bucket (the reducer runs it over the arena in finish() for P > 2; at 2 ranks the reduction
// op averages).
double reduction_seconds(int64_t bytes, int p, double bw) {
  if (p == 1) return 0;
  return (rabenseifner_reduced(bytes, p) + (p > 2 ? double(bytes) : 0.0)) / bw;
}

// The backward profile the hook would report with unstretched compute: after layer i (in
// reverse), every gradient at offset >= the layer's first parameter is final.
BackwardProfile backward_events(const ModelProfile& m) {
  BackwardProfile p;
  std::vector<int64_t> first(m.layers.size());
  int64_t off = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    first[i] = off;
    for (int64_t n : m.layers[i].params) off += n;
  }
  int64_t ready = off;
  double t = 0;
  for (size_t i = m.layers.size(); i-- > 0;) {
    t += m.layers[i].backward;
    if (!m.layers[i].params.empty()) ready = first[i];
    p.events.push_back({ready, t});
  }
  p.total = t;
  return p;
}

}  // namespace

StepTimeline replay_blocking(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o) {
  check_replay(m, o);
  StepTimeline s;
  s.forward = forward_time(m), s.backward = s.backward_stretched = backward_time(m), s.other = m.other;
  const std::vector<Bucket> buckets = assign_buckets(profile_layout(m), kElem, o.cap_bytes, o.first_cap_bytes);
  s.num_buckets = buckets.size();
  if (o.ranks > 1) {
    const bool charged = t.reduction_charged(o.blocking_op, o.ranks);
    for (const Bucket& b : buckets) {
      const int64_t bytes = b.size() * kElem;
      s.comm_span += t.seconds(o.blocking_op, o.ranks, bytes);
      s.comm_span += charged ? (o.ranks > 2 ? double(bytes) / o.reduce_bandwidth : 0.0)
                             : reduction_seconds(bytes, o.ranks, o.reduce_bandwidth);
    }
  }
  s.step = s.compute() + s.comm_span;
  s.exposed = s.comm_span;
  return s;
}

StepTimeline replay_overlapped(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o) {
  check_replay(m, o);
  StepTimeline s;
  s.forward = forward_time(m), s.backward = backward_time(m), s.other = m.other;
  const std::vector<Bucket> buckets = assign_buckets(profile_layout(m), kElem, o.cap_bytes, o.first_cap_bytes);
  s.num_buckets = buckets.size();
  if (o.ranks == 1) {
    s.backward_stretched = s.backward;
    s.step = s.compute();
    return s;
  }
  // Each bucket's rounds: network time (the table's time, latency split evenly, the rest by
  // bytes) and the reduction run on the compute thread when the round completes.
  const bool charged = t.reduction_charged(o.overlapped_op, o.ranks);
  const double alpha = t.fit(o.overlapped_op, o.ranks).alpha;
  struct R {
    double network, reduce;
  };
  std::vector<std::vector<R>> rounds(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t bytes = buckets[b].size() * kElem;
    const std::vector<Round> sched = rabenseifner_rounds(bytes, o.ranks);
    double total = t.seconds(o.overlapped_op, o.ranks, bytes);
    if (charged) total = std::max(0.0, total - reduction_seconds(bytes, o.ranks, o.reduce_bandwidth));
    const double lat = std::min(alpha, total), n = double(sched.size());
    double sum_bytes = 0;
    for (const Round& r : sched) sum_bytes += double(r.bytes);
    for (size_t k = 0; k < sched.size(); ++k) {
      const double share = sum_bytes > 0 ? double(sched[k].bytes) / sum_bytes : 1.0 / n;
      const double network = lat / n + (total - lat) * share, reduce = double(sched[k].reduced) / o.reduce_bandwidth;
      if (o.transfers_on_caller) rounds[b].push_back({0.0, network + reduce});  // all inside the call
      else rounds[b].push_back({network, reduce});
    }
  }
  // When each bucket is launched: in the hook after the layer that completes it, i.e. once
  // the unstretched backward time done so far reaches its launch time.
  const BackwardProfile events = backward_events(m);
  const std::vector<double> launch_at = bucket_launch_times(buckets, events);  // unstretched

  // The state of the one bucket in flight (buckets run one after another).
  double clock = s.forward;          // now
  size_t launched = 0, cur = 0, k = 0;  // buckets launched, the bucket in flight, its round
  bool in_flight = false;
  double arrive = 0, first_launch = -1, last_complete = 0;
  auto start_next = [&] {  // posts round 0 of bucket `cur` if launched
    if (!in_flight && cur < launched) {
      in_flight = true, k = 0, arrive = clock + rounds[cur][0].network;
      if (first_launch < 0) first_launch = clock;
    }
  };
  // One MPI call at `clock`: the bucket in flight advances by at most one round.
  auto progress = [&] {
    if (!in_flight || arrive > clock) return;
    clock += rounds[cur][k].reduce;
    if (++k < rounds[cur].size()) {
      arrive = clock + rounds[cur][k].network;
      return;
    }
    in_flight = false, last_complete = clock, ++cur;
    start_next();
  };
  // Backward, layer by layer in reverse, with the hook after each layer.
  const double bwd_start = clock;
  double unstretched = 0;
  for (size_t i = m.layers.size(); i-- > 0;) {
    double remaining = m.layers[i].backward;
    while (remaining > 0) {
      if (!in_flight) {  // no MPI call while nothing is in flight
        clock += remaining, remaining = 0;
        break;
      }
      // Polls fall every poll interval; jump to the first one at or after the data arrived.
      const double wait = std::max(0.0, arrive - clock);
      const double polls = std::max(1.0, std::ceil(wait / o.poll_interval - 1e-12));
      const double step = polls * o.poll_interval;
      if (step > remaining) {
        clock += remaining, remaining = 0;
        break;
      }
      clock += step, remaining -= step;
      progress();
    }
    unstretched += m.layers[i].backward;
    while (launched < buckets.size() && launch_at[launched] <= unstretched) ++launched;
    start_next();
    progress();  // the hook's MPI_Test
  }
  s.backward_stretched = clock - bwd_start;
  // finish(): launch the rest; MPI_Wait progresses continuously.
  launched = buckets.size();
  start_next();
  while (in_flight) {
    clock = std::max(clock, arrive);
    progress();
  }
  s.comm_span = last_complete - std::max(first_launch, 0.0);
  // The averaging pass over the whole arena at the end of finish() (P > 2; at 2 ranks the
  // reduction op averages).
  if (o.ranks > 2) clock += double(m.num_params() * kElem) / o.reduce_bandwidth;
  s.step = clock + s.other;
  s.exposed = s.step - s.compute();
  return s;
}

BestCap best_overlapped_cap(const ModelProfile& m, const AllreduceTable& t, const ReplayOptions& o,
                            size_t max_candidates, const AutosizeOptions& ties) {
  const std::vector<int64_t> caps = candidate_caps(profile_layout(m), kElem, max_candidates);
  std::vector<StepTimeline> lines;
  std::vector<PlanScore> scores;
  for (int64_t c : caps) {
    ReplayOptions oc = o;
    oc.cap_bytes = c, oc.first_cap_bytes = std::min(c, o.first_cap_bytes);
    lines.push_back(replay_overlapped(m, t, oc));
    // The cost is the exposed time (the step less its fixed compute), so that the tie
    // tolerance is relative to the communication, as in choose_bucket_caps.
    scores.push_back({lines.back().exposed, lines.back().num_buckets, c, oc.first_cap_bytes});
  }
  const size_t i = pick_least(scores, ties.tie_abs, ties.tie_rel);
  return {caps[i], lines[i]};
}

std::string timeline_csv_row(const std::string& model, int ranks, const std::string& mode, int64_t cap_bytes,
                             int64_t first_cap_bytes, const StepTimeline& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s,%d,%s,%lld,%lld,%zu,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.5f\n", model.c_str(), ranks,
                mode.c_str(), (long long)cap_bytes, (long long)first_cap_bytes, s.num_buckets, s.forward * 1e3,
                s.backward * 1e3, s.other * 1e3, s.backward_stretched * 1e3, s.comm_span * 1e3, s.exposed * 1e3,
                s.step * 1e3, s.efficiency());
  return buf;
}

}  // namespace hddp
