#include <hddp/train/plot.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <gnuplot-iostream.h>
#include <sstream>

#include <hddp/kernels/check.h>

namespace hddp {

std::string gnuplot_program() {
  const char* env = std::getenv("HDDP_GNUPLOT");
  return env && *env ? env : "gnuplot";
}

bool gnuplot_available() {
  const std::string prog = gnuplot_program();
  if (prog.find('/') != std::string::npos) return access(prog.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  return false;
}

bool gnuplot_or_warn(const std::string& pdf, const std::string& instead) {
  if (gnuplot_available()) return true;
  std::fprintf(stderr, "warning: gnuplot not found (HDDP_GNUPLOT or PATH); %s not drawn (%s holds the results). "
                       "Install it (Debian: apt-get install gnuplot-nox) or pass --no-plot.\n", pdf.c_str(), instead.c_str());
  return false;
}

void plot_pdf(const std::string& path, const std::vector<Panel>& panels, const std::string& title, double width_in,
              double height_in) {
  HDDP_CHECK(gnuplot_available(), "cannot draw '" << path << "': gnuplot not found (HDDP_GNUPLOT or PATH; Debian: "
                                                  "apt-get install gnuplot-nox)");
  const std::string tmp = path + ".tmp";
  {
    // gnuplot-iostream runs the command through popen and waits for it in its destructor;
    // gnuplot's messages go to stdout with ours. (Built by append: GCC 12's -Wrestrict
    // misfires on "'" + program() + ....)
    std::string cmd(1, '\'');
    cmd.append(gnuplot_program()).append("' 2>&1");
    Gnuplot gp(cmd);
    gp << "set terminal pdfcairo size " << width_in << "in," << height_in << "in font 'Sans,10'\n"
       << "set output '" << tmp << "'\n"
       << "set multiplot layout 1," << panels.size();
    if (!title.empty()) gp << " title '" << title << "'";
    gp << "\nset grid\n";
    for (const Panel& p : panels) {
      gp << "set title '" << p.title << "'\nset xlabel '" << p.xlabel << "'\nset ylabel '" << p.ylabel << "'\n"
         << p.setup << "plot ";
      for (size_t i = 0; i < p.series.size(); ++i)
        gp << (i ? ", " : "") << "'-' " << p.series[i].style << " title '" << p.series[i].title << "'";
      if (!p.extra.empty()) gp << (p.series.empty() ? "" : ", ") << p.extra;
      gp << "\n";
      for (const Series& s : p.series) gp.send1d(s.points);
    }
    gp << "unset multiplot\nset output\n";
  }
  struct stat st{};
  HDDP_CHECK(stat(tmp.c_str(), &st) == 0 && st.st_size > 0,
             "gnuplot did not write '" << tmp << "' (is gnuplot built with the pdfcairo terminal? Debian: gnuplot-nox)");
  HDDP_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '" << tmp << "' to '" << path << "'");
}

}  // namespace hddp
