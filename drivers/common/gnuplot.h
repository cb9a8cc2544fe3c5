#pragma once
// Finding and starting gnuplot, for the programs that draw PDFs (poly_train, bench/scaling).
// Header-only: the drivers and benchmarks share it; the libraries never plot.
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace hddp::gnuplot {

// The gnuplot program: $HDDP_GNUPLOT, else "gnuplot" (found on PATH).
inline std::string program() {
  const char* env = std::getenv("HDDP_GNUPLOT");
  return env && *env ? env : "gnuplot";
}

// Whether program() can be run: an executable path, or a name found on PATH.
inline bool available() {
  const std::string prog = program();
  if (prog.find('/') != std::string::npos) return access(prog.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  return false;
}

// The command line for gnuplot-iostream's Gnuplot(cmd), which runs it through popen (and waits
// for it in its destructor): the program quoted, its messages on stdout with ours.
// (Built by append: GCC 12's -Wrestrict misfires on "'" + program() + ....)
inline std::string command() {
  std::string cmd(1, '\'');
  cmd.append(program()).append("' 2>&1");
  return cmd;
}

}  // namespace hddp::gnuplot
