#include "plots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <gnuplot-iostream.h>
#include <map>
#include <sstream>

#include "common.h"
#include "common/gnuplot.h"

namespace scaling {

namespace {

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
const char* kCompute = "#4c78a8";
const char* kExposed = "#f58518";

// Text inside a double-quoted gnuplot string (the terminal is noenhanced: no markup).
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

// CPU time / (wall x threads) of the measured loops, median per thread count - below 1, other
// processes had the cores part of the time. Rows without the column are left out.
std::map<int, double> median_cpu_share(const Table& t) {
  std::map<int, std::vector<double>> by;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double u = t.num(i, "cpu_util");
    if (std::isfinite(u)) by[int(t.num(i, "threads"))].push_back(u);
  }
  std::map<int, double> med;
  for (auto& [th, v] : by) {
    std::sort(v.begin(), v.end());
    med[th] = v[v.size() / 2];
  }
  return med;
}

// "; CPU share 1T 0.98, 2T 0.95" for a plot's title.
std::string cpu_share(const Table& t) {
  std::string s;
  for (const auto& [th, u] : median_cpu_share(t)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s %dT %.2f", s.empty() ? "; CPU share" : ",", th, u);
    s += buf;
  }
  return s;
}

std::string load_range(const Table& t) {
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double l = t.num(i, "load");
    if (std::isfinite(l) && l >= 0) lo = std::min(lo, l), hi = std::max(hi, l);
  }
  if (!std::isfinite(lo)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "; load average %.1f", hi);
  if (hi - lo > 0.05) std::snprintf(buf, sizeof buf, "; load average %.1f-%.1f", lo, hi);
  return buf;
}

// Runs the gnuplot program `body` writes, into pdf (through pdf.tmp, renamed when complete).
template <class F>
void with_gnuplot(const std::string& pdf, const std::string& size, F&& body) {
  const std::string tmp = pdf + ".tmp";
  std::remove(tmp.c_str());
  {
    Gnuplot gp(hddp::gnuplot::command());
    gp << "set terminal pdfcairo noenhanced size " << size << " font 'Sans,9'\n"
       << "set output \"" << esc(tmp) << "\"\n"
       << "set grid\n";
    body(gp);
    gp << "unset multiplot\nset output\n";
  }
  struct stat st{};
  if (stat(tmp.c_str(), &st) != 0 || st.st_size == 0)
    throw Failure("gnuplot did not write '" + tmp + "' (gnuplot with the pdfcairo terminal needed; Debian: gnuplot-nox)");
  if (std::rename(tmp.c_str(), pdf.c_str()) != 0) throw Failure("cannot rename '" + tmp + "'");
}

struct Series {
  std::string title;
  std::string color;
  int dash = 1;
  std::vector<std::pair<double, double>> perf, speedup, eff;
};

// Three panels vs threads: performance, speedup (with ideal), efficiency (with 1 and goals).
void thread_panels(Gnuplot& gp, const std::string& title, const std::string& perf_label, std::vector<Series>& series,
                   double max_threads) {
  gp << "set multiplot layout 1,3 title \"" << esc(title) << "\"\n"
     << "set logscale x 2\nset xlabel 'OpenMP threads'\nset xrange [0.8:" << max_threads * 1.25 << "]\n"
     << "set key bottom right font ',7'\n";
  // The series' legend in the first panel only.
  auto panel = [&](const std::string& ylabel, auto member, const std::string& extra, bool legend) {
    gp << "set ylabel '" << ylabel << "'\nset yrange [0:*]\n";
    gp << "plot ";
    bool first = true;
    for (const Series& s : series) {
      gp << (first ? "" : ", ") << "'-' with linespoints lw 2 pt 7 ps 0.5 dt " << s.dash << " lc rgb '" << s.color << "' ";
      if (legend) gp << "title \"" << esc(s.title) << "\"";
      else gp << "notitle";
      first = false;
    }
    gp << extra << "\n";
    for (const Series& s : series) gp.send1d(s.*member);
  };
  panel(perf_label, &Series::perf, "", true);
  gp << "set key top left\n";
  panel("speedup over 1 thread", &Series::speedup, ", x with lines dt 3 lc rgb 'gray' title 'ideal'", false);
  gp << "set key bottom left\n";
  gp << "set yrange [0:1.15]\n";
  gp << "set ylabel 'parallel efficiency'\nplot ";
  bool first = true;
  for (const Series& s : series) {
    gp << (first ? "" : ", ") << "'-' with linespoints lw 2 pt 7 ps 0.5 dt " << s.dash << " lc rgb '" << s.color
       << "' notitle";
    first = false;
  }
  gp << ", 0.9 with lines dt 3 lc rgb 'gray' title '0.9', 0.85 with lines dt 2 lc rgb 'gray' title '0.85'\n";
  for (const Series& s : series) gp.send1d(s.eff);
  gp << "unset logscale x\nset xrange [*:*]\nset yrange [*:*]\n";
}

}  // namespace

void plot_gemm(const Table& t, const std::string& pdf, const std::string& note) {
  std::map<std::string, Series> by;
  std::vector<std::string> order;
  std::map<std::string, int> shape_color;
  double maxt = 1;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const std::string shape = t.str(i, "shape"), backend = t.str(i, "backend");
    const std::string key = shape + " " + backend;
    if (!by.count(key)) {
      order.push_back(key);
      const int c = shape_color.try_emplace(shape, int(shape_color.size())).first->second;
      by[key] = {shape + " (" + t.str(i, "M") + "," + t.str(i, "N") + "," + t.str(i, "K") + ") " + t.str(i, "trans") +
                     ", " + (backend == "hddp" ? "hddp" : "OpenBLAS"),
                 kColors[c % 8], backend == "hddp" ? 1 : 2, {}, {}, {}};
    }
    const double th = t.num(i, "threads");
    maxt = std::max(maxt, th);
    by[key].perf.emplace_back(th, t.num(i, "gflops"));
    by[key].speedup.emplace_back(th, t.num(i, "speedup"));
    by[key].eff.emplace_back(th, t.num(i, "efficiency"));
  }
  std::vector<Series> series;
  for (const std::string& k : order) series.push_back(by[k]);
  const std::string pl = t.rows.empty() ? "" : t.str(0, "placement");
  with_gnuplot(pdf, "13in,4.2in", [&](Gnuplot& gp) {
    thread_panels(gp, "GEMM, hddp (solid) vs OpenBLAS (dashed), placement " + pl + "\n" + note + load_range(t) + cpu_share(t),
                  "GFLOP/s", series, maxt);
  });
}

void plot_step(const Table& t, const std::string& pdf, const std::string& note) {
  std::map<std::string, Series> by;
  std::vector<std::string> order;
  double maxt = 1;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const std::string b = t.str(i, "backend");
    if (!by.count(b)) {
      order.push_back(b);
      by[b] = {b == "hddp" ? "hddp GEMM" : "OpenBLAS GEMM", kColors[order.size() - 1], 1, {}, {}, {}};
    }
    const double th = t.num(i, "threads");
    maxt = std::max(maxt, th);
    by[b].perf.emplace_back(th, 1e3 * t.num(i, "time_s"));
    by[b].speedup.emplace_back(th, t.num(i, "speedup"));
    by[b].eff.emplace_back(th, t.num(i, "efficiency"));
  }
  std::vector<Series> series;
  for (const std::string& k : order) series.push_back(by[k]);
  const std::string pl = t.rows.empty() ? "" : t.str(0, "placement");
  with_gnuplot(pdf, "13in,4.2in", [&](Gnuplot& gp) {
    thread_panels(gp, "Wide-MLP training step (1-1024-1024-1024-1, batch 256, Adam), placement " + pl + "\n" + note +
                          load_range(t) + cpu_share(t),
                  "ms per step (median)", series, maxt);
  });
}

namespace {

// Rows "label compute_ms exposed_ms" as a gnuplot datablock named `name`.
std::string datablock(const std::string& name, const std::vector<std::tuple<std::string, double, double>>& rows) {
  std::ostringstream os;
  os << "$" << name << " << EOD\n";
  for (const auto& [label, c, e] : rows) os << '"' << label << "\" " << fmt(c) << " " << fmt(e) << "\n";
  os << "EOD\n";
  return os.str();
}

void stacked_style(Gnuplot& gp) {
  gp << "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border rgb '#333333'\n"
     << "set boxwidth 0.6\nset yrange [0:*]\nset key top left\nset grid noxtics\nset bmargin 4\n";
}

}  // namespace

void plot_ranks(const Table& t, const std::string& pdf, const std::string& note) {
  std::vector<std::tuple<std::string, double, double>> rows;
  for (size_t i = 0; i < t.rows.size(); ++i)
    rows.emplace_back(t.str(i, "ranks") + (t.str(i, "ranks") == "1" ? " rank" : " ranks") + "\\n(" + t.str(i, "placement") + ")",
                      1e3 * t.num(i, "compute_s"), 1e3 * t.num(i, "exposed_s"));
  const std::string th = t.rows.empty() ? "?" : t.str(0, "threads");
  with_gnuplot(pdf, "7in,4.5in", [&](Gnuplot& gp) {
    stacked_style(gp);
    gp << datablock("d", rows)
       << "set title \"" << esc("Data-parallel wide-MLP step (batch 256 per rank, 25 MiB buckets), " + th +
                               " thread(s) per rank\n" + note + load_range(t))
       << "\" font ',9'\n"
       << "set ylabel 'ms per step (median over steps and rounds, mean over ranks)'\n"
       << "plot $d using 2:xtic(1) title 'compute (step - exposed)' lc rgb '" << kCompute << "', "
       << "'' using 3 title 'exposed communication' lc rgb '" << kExposed << "'\n";
  });
}

void plot_poly(const Table& t, const std::string& pdf, const std::string& note) {
  std::vector<std::pair<double, double>> sweep;
  std::vector<std::tuple<std::string, double, double>> rows;
  double maxt = 1;
  std::string rank_threads = "?";
  int max_ranks = 1;
  for (size_t i = 0; i < t.rows.size(); ++i) max_ranks = std::max(max_ranks, int(t.num(i, "ranks")));
  for (size_t i = 0; i < t.rows.size(); ++i) {
    if (t.num(i, "ranks") == 1) {
      sweep.emplace_back(t.num(i, "threads"), 1e3 * t.num(i, "step_s"));
      maxt = std::max(maxt, t.num(i, "threads"));
    }
  }
  // The rank sweep: the rows of the thread count used at the highest rank count.
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (t.num(i, "ranks") == max_ranks) rank_threads = t.str(i, "threads");
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (t.str(i, "threads") == rank_threads)
      rows.emplace_back(t.str(i, "ranks") + (t.str(i, "ranks") == "1" ? " rank" : " ranks"), 1e3 * t.num(i, "compute_s"),
                        1e3 * t.num(i, "exposed_s"));
  std::sort(sweep.begin(), sweep.end());
  with_gnuplot(pdf, "11in,4.2in", [&](Gnuplot& gp) {
    gp << "set multiplot layout 1,2 title \"" << esc("poly_train --stats, per epoch\n" + note + load_range(t)) << "\"\n"
       << "set logscale x 2\nset xrange [0.8:" << maxt * 1.25 << "]\nset xlabel 'OpenMP threads (1 rank)'\n"
       << "set ylabel 'ms per epoch'\nset yrange [0:*]\n"
       << "plot '-' with linespoints lw 2 pt 7 lc rgb '" << kCompute << "' title 'training step'\n";
    gp.send1d(sweep);
    gp << "unset logscale x\nset xrange [*:*]\nunset xlabel\n";
    stacked_style(gp);
    gp << datablock("p", rows) << "set ylabel 'ms per epoch (" << rank_threads << " thread(s) per rank)'\n"
       << "plot $p using 2:xtic(1) title 'compute (step - exposed)' lc rgb '" << kCompute << "', "
       << "'' using 3 title 'exposed communication' lc rgb '" << kExposed << "'\n";
  });
}

void plot_buckets(const Table& t, const std::string& pdf, const std::string& note) {
  std::map<int, std::vector<std::tuple<std::string, double, double>>> by_ranks;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const std::string cap = t.str(i, "cap");
    const double mib = t.num(i, "cap_bytes") / 1048576.0;
    char label[96];
    const int P = int(t.num(i, "ranks"));
    if (cap == "auto") std::snprintf(label, sizeof label, "auto (%.2f MiB)\\n%d ranks", mib, P);
    else std::snprintf(label, sizeof label, "%s MiB\\n%d ranks", cap.c_str(), P);
    by_ranks[P].emplace_back(label, 1e3 * t.num(i, "compute_s"), 1e3 * t.num(i, "exposed_s"));
  }
  with_gnuplot(pdf, "8in,4.5in", [&](Gnuplot& gp) {
    stacked_style(gp);
    std::string plot = "plot ";
    bool first = true;
    for (const auto& [P, rows] : by_ranks) {
      const std::string name = std::string("r").append(std::to_string(P));
      gp << datablock(name, rows);
      plot += std::string(first ? "" : ", ") + "newhistogram '', $" + name +
              " using 2:xtic(1) " + (first ? "title 'compute (step - exposed)'" : "notitle") + " lc rgb '" + kCompute +
              "', '' using 3 " + (first ? "title 'exposed communication'" : "notitle") + " lc rgb '" + kExposed + "'";
      first = false;
    }
    gp << "set title \"" << esc("Bucket cap: auto vs 1 MiB vs 25 MiB, data-parallel wide-MLP step\n" + note + load_range(t))
       << "\" font ',9'\n"
       << "set ylabel 'ms per step (median, mean over ranks)'\n"
       << plot << "\n";
  });
}

void plot_placement(const Table& t, const std::string& pdf, const std::string& note) {
  // Left: time(unset) / time(close) per thread-sweep configuration; right: DDP step.
  std::map<std::string, double> close_t;
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (t.str(i, "bench") != "ddp" && t.str(i, "placement") == "close")
      close_t[t.str(i, "config") + " " + t.str(i, "threads")] = t.num(i, "time_s");
  std::ostringstream ratio;
  ratio << "$ratio << EOD\n";
  int n = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    if (t.str(i, "bench") == "ddp" || t.str(i, "placement") != "none") continue;
    const std::string k = t.str(i, "config") + " " + t.str(i, "threads");
    if (!close_t.count(k)) continue;
    ratio << '"' << t.str(i, "config") << "\\n" << t.str(i, "threads") << "T\" " << fmt(t.num(i, "time_s") / close_t[k]) << "\n";
    ++n;
  }
  ratio << "EOD\n";
  std::vector<std::tuple<std::string, double, double>> ddp;
  for (size_t i = 0; i < t.rows.size(); ++i)
    if (t.str(i, "bench") == "ddp")
      ddp.emplace_back(t.str(i, "placement") + "\\n" + t.str(i, "progress"),
                       1e3 * (t.num(i, "time_s") - t.num(i, "exposed_s")), 1e3 * t.num(i, "exposed_s"));
  with_gnuplot(pdf, "12in,4.5in", [&](Gnuplot& gp) {
    gp << "set multiplot layout 1,2 title \"" << esc("Placement: OMP_PLACES=cores OMP_PROC_BIND=close vs unset\n" + note + load_range(t))
       << "\"\n";
    gp << ratio.str() << "set style data histograms\nset style histogram clustered\nset style fill solid 0.85 border rgb '#333333'\n"
       << "set boxwidth 0.7\nset yrange [0:*]\nset grid noxtics\nset xtics font ',7'\n"
       << "set ylabel 'time unbound / time close (> 1: binding helps)'\n";
    if (n > 0) gp << "plot $ratio using 2:xtic(1) notitle lc rgb '" << kCompute << "', 1 with lines dt 2 lc rgb 'gray' notitle\n";
    else gp << "set label 1 'no thread-sweep rows' at graph 0.3, graph 0.5\nplot 1 notitle\nunset label 1\n";
    stacked_style(gp);
    gp << "set xtics font ',8'\n";
    if (!ddp.empty())
      gp << datablock("dd", ddp) << "set ylabel 'ms per step, 2 ranks (mpiexec placement, progress)'\n"
         << "plot $dd using 2:xtic(1) title 'compute' lc rgb '" << kCompute << "', '' using 3 title 'exposed communication' lc rgb '"
         << kExposed << "'\n";
    else
      gp << "set label 1 'no data-parallel rows (--ranks 1)' at graph 0.2, graph 0.5\nplot 1 notitle\n";
  });
}

namespace {

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s >= 0.1 ? "%.0f" : s >= 0.01 ? "%.1f" : "%.2f", 1e3 * s);
  return b;
}
std::string f2(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
std::string f1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// Per-thread-count cells of a thread sweep: rows grouped by `key`, columns by threads.
void thread_table(const Table& t, const std::vector<std::string>& key_cols, const std::string& what,
                  std::string (*cell)(const Table&, size_t)) {
  std::vector<int> threads;
  std::vector<std::string> keys;
  std::map<std::string, std::map<int, size_t>> at;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::string k;
    for (const std::string& c : key_cols) k.append(k.empty() ? "" : " | ").append(t.str(i, c));
    const int th = int(t.num(i, "threads"));
    if (!at.count(k)) keys.push_back(k);
    at[k][th] = i;
    if (std::find(threads.begin(), threads.end(), th) == threads.end()) threads.push_back(th);
  }
  std::sort(threads.begin(), threads.end());
  std::printf("|");
  for (const std::string& c : key_cols) std::printf(" %s |", c.c_str());
  for (int th : threads) std::printf(" %d thread%s: %s |", th, th == 1 ? "" : "s", what.c_str());
  std::printf("\n|");
  for (size_t i = 0; i < key_cols.size() + threads.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const std::string& k : keys) {
    std::printf("| %s |", k.c_str());
    for (int th : threads) std::printf(" %s |", at[k].count(th) ? cell(t, at[k][th]).c_str() : "");
    std::printf("\n");
  }
  std::printf("\nCPU share of the measured loops (CPU time / (wall x threads), median):");
  for (const auto& [th, u] : median_cpu_share(t)) std::printf(" %d thread%s %.2f;", th, th == 1 ? "" : "s", u);
  std::printf(" load average %.1f.\n\n", t.rows.empty() ? -1.0 : t.num(0, "load"));
}

void ddp_table(const Table& t, bool caps) {
  std::printf("| ranks | threads | placement | %sstep ms (min-max) | compute ms | exposed ms (min-max) | comm ms |%s\n",
              caps ? "cap | buckets | " : "", caps ? " predicted exposed ms |" : "");
  std::printf("|---|---|---|%s---|---|---|---|%s\n", caps ? "---|---|" : "", caps ? "---|" : "");
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::string cap;
    if (caps) {
      cap = t.str(i, "cap") == "auto" ? "auto: " + f2(t.num(i, "cap_bytes") / 1048576.0) + " MiB" : t.str(i, "cap") + " MiB";
      if (t.str(i, "cap") == "auto" && t.str(i, "caps_seen").find(';') != std::string::npos) {
        std::string seen;
        for (const std::string& c : split(t.str(i, "caps_seen"), ';'))
          seen.append(seen.empty() ? "" : ", ").append(f2(std::stod(c.substr(0, c.find('/'))) / 1048576.0));
        cap += " (rounds: " + seen + ")";
      }
      cap += " | " + t.str(i, "buckets") + " | ";
    }
    std::printf("| %s | %s | %s | %s%s (%s-%s) | %s | %s (%s-%s) | %s |%s\n", t.str(i, "ranks").c_str(),
                t.str(i, "threads").c_str(), t.str(i, "placement").c_str(), cap.c_str(), ms(t.num(i, "step_s")).c_str(),
                ms(t.num(i, "step_min_s")).c_str(), ms(t.num(i, "step_max_s")).c_str(), ms(t.num(i, "compute_s")).c_str(),
                ms(t.num(i, "exposed_s")).c_str(), ms(t.num(i, "exposed_min_s")).c_str(), ms(t.num(i, "exposed_max_s")).c_str(),
                ms(t.num(i, "comm_s")).c_str(), caps ? (" " + ms(t.num(i, "predicted_exposed_s")) + " |").c_str() : "");
  }
  std::printf("\n");
}

}  // namespace

void table_gemm(const Table& t, const std::string& csv) {
  std::printf("GEMM (%s): GFLOP/s (parallel efficiency), medians of %s rounds, placement %s\n\n", csv.c_str(),
              t.rows.empty() ? "?" : t.str(0, "reps").c_str(), t.rows.empty() ? "?" : t.str(0, "placement").c_str());
  thread_table(t, {"shape", "trans", "M", "N", "K", "backend"}, "GFLOP/s (eff.)", [](const Table& t, size_t i) {
    return f1(t.num(i, "gflops")) + " (" + f2(t.num(i, "efficiency")) + ")";
  });
}

void table_step(const Table& t, const std::string& csv) {
  std::printf("Wide-MLP step (%s): ms per step (parallel efficiency), medians of %s rounds\n\n", csv.c_str(),
              t.rows.empty() ? "?" : t.str(0, "reps").c_str());
  thread_table(t, {"model", "backend"}, "ms (eff.)", [](const Table& t, size_t i) {
    return ms(t.num(i, "time_s")) + " (" + f2(t.num(i, "efficiency")) + ")";
  });
}

void table_ranks(const Table& t, const std::string& csv) {
  std::printf("Data-parallel wide-MLP step vs ranks (%s), per step, mean over ranks, median over rounds\n\n", csv.c_str());
  ddp_table(t, false);
}

void table_buckets(const Table& t, const std::string& csv) {
  std::printf("Bucket caps (%s), per step, mean over ranks, median over rounds\n\n", csv.c_str());
  ddp_table(t, true);
}

void table_poly(const Table& t, const std::string& csv) {
  std::printf("poly_train --stats (%s), per epoch, mean over ranks, median over rounds\n\n"
              "| ranks | threads | placement | ms per epoch (min-max) | compute ms | exposed ms | comm ms | speedup |\n"
              "|---|---|---|---|---|---|---|---|\n",
              csv.c_str());
  for (size_t i = 0; i < t.rows.size(); ++i)
    std::printf("| %s | %s | %s | %s (%s-%s) | %s | %s | %s | %s |\n", t.str(i, "ranks").c_str(), t.str(i, "threads").c_str(),
                t.str(i, "placement").c_str(), ms(t.num(i, "step_s")).c_str(), ms(t.num(i, "step_min_s")).c_str(),
                ms(t.num(i, "step_max_s")).c_str(), ms(t.num(i, "compute_s")).c_str(), ms(t.num(i, "exposed_s")).c_str(),
                ms(t.num(i, "comm_s")).c_str(), t.str(i, "speedup").empty() ? "" : f2(t.num(i, "speedup")).c_str());
  std::printf("\n");
}

void table_placement(const Table& t, const std::string& csv) {
  std::printf("Placement (%s), medians of %s rounds\n\n"
              "| bench | config | ranks x threads | placement | progress | ms (min-max) | exposed ms | CPU share |\n"
              "|---|---|---|---|---|---|---|---|\n",
              csv.c_str(), t.rows.empty() ? "?" : t.str(0, "reps").c_str());
  for (size_t i = 0; i < t.rows.size(); ++i)
    std::printf("| %s | %s | %s x %s | %s | %s | %s (%s-%s) | %s | %s |\n", t.str(i, "bench").c_str(), t.str(i, "config").c_str(),
                t.str(i, "ranks").c_str(), t.str(i, "threads").c_str(), t.str(i, "placement").c_str(),
                t.str(i, "progress").c_str(), ms(t.num(i, "time_s")).c_str(), ms(t.num(i, "time_min_s")).c_str(),
                ms(t.num(i, "time_max_s")).c_str(), std::isfinite(t.num(i, "exposed_s")) ? ms(t.num(i, "exposed_s")).c_str() : "",
                std::isfinite(t.num(i, "cpu_util")) ? f2(t.num(i, "cpu_util")).c_str() : "");
  std::printf("\n");
}

}  // namespace scaling
