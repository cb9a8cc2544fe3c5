#include "poly_train/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gnuplot-iostream.h>
#include <sstream>

#include "drivers/common/gnuplot.h"
#include "kernels/check.h"

namespace poly {

void write_file(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    HDDP_CHECK(f, "cannot write '" << tmp << "'");
    f << content;
    f.flush();
    HDDP_CHECK(f.good(), "error writing '" << tmp << "'");
  }
  HDDP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

void write_eval_csv(const std::string& path, const Curve& e) {
  std::ostringstream os;
  os.precision(9);
  os << "x,f,g,abs_err\n";
  for (size_t i = 0; i < e.x.size(); ++i) os << e.x[i] << ',' << e.f[i] << ',' << e.g[i] << ',' << std::fabs(e.f[i] - e.g[i]) << '\n';
  write_file(path, os.str());
}

void write_loss_csv(const std::string& path, const std::vector<std::vector<float>>& losses) {
  std::ostringstream os;
  os.precision(9);
  os << "epoch,rank,loss\n";
  const size_t epochs = losses.empty() ? 0 : losses[0].size();
  for (size_t e = 0; e < epochs; ++e)
    for (size_t r = 0; r < losses.size(); ++r) os << e + 1 << ',' << r << ',' << losses[r][e] << '\n';
  write_file(path, os.str());
}

void plot_errors(const std::string& path, const Curve& dense, const Curve& eval, int64_t epochs,
                 double lo, double hi) {
  const std::string tmp = path + ".tmp";
  std::vector<std::pair<double, double>> f, g, pts, err, err_pts;
  for (size_t i = 0; i < dense.x.size(); ++i) {
    f.emplace_back(dense.x[i], dense.f[i]);
    g.emplace_back(dense.x[i], dense.g[i]);
    err.emplace_back(dense.x[i], std::fabs(dense.f[i] - dense.g[i]));
  }
  for (size_t i = 0; i < eval.x.size(); ++i) {
    pts.emplace_back(eval.x[i], eval.g[i]);
    err_pts.emplace_back(eval.x[i], std::fabs(eval.f[i] - eval.g[i]));
  }
  {
    Gnuplot gp(hddp::gnuplot::command());
    gp << "set terminal pdfcairo size 11in,4in font 'Sans,10'\n"
       << "set output '" << tmp << "'\n"
       << "set multiplot layout 1,2\n"
       << "set grid\n"
       << "set key top center\n"
       << "set xlabel 'x'\n"
       << "set object 1 rectangle from " << lo << ", graph 0 to " << hi
       << ", graph 1 behind fillcolor rgb '#dde8f6' fillstyle solid 1.0 noborder\n"
       << "set title '" << epochs << " epochs of training'\n"
       << "set ylabel 'y'\n"
       << "plot '-' with lines lw 2 lc rgb '#1f77b4' title 'f(x)', "
          "'-' with lines lw 2 dt 2 lc rgb '#ff7f0e' title 'g(x) (model)', "
          "'-' with points pt 7 ps 0.5 lc rgb '#d62728' title 'evaluation points', "
          "keyentry with boxes fillcolor rgb '#dde8f6' fillstyle solid border lc rgb '#9fb6d8' title 'training range'\n";
    gp.send1d(f);
    gp.send1d(g);
    gp.send1d(pts);
    gp << "set title 'Absolute difference between prediction and actual function'\n"
       << "set ylabel '|f(x) - g(x)|'\n"
       << "plot '-' with lines lw 2 lc rgb '#2ca02c' title '|f - g|', "
          "'-' with points pt 7 ps 0.5 lc rgb '#d62728' title 'evaluation points', "
          "keyentry with boxes fillcolor rgb '#dde8f6' fillstyle solid border lc rgb '#9fb6d8' title 'training range'\n";
    gp.send1d(err);
    gp.send1d(err_pts);
    gp << "unset multiplot\nset output\n";
  }
  struct stat st{};
  HDDP_CHECK(stat(tmp.c_str(), &st) == 0 && st.st_size > 0,
             "gnuplot did not write '" << tmp << "' (is gnuplot built with the pdfcairo terminal? "
                                       "Debian: gnuplot-nox)");
  HDDP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

}  // namespace poly
