#pragma once
// gnuplot for programs that draw their own figures through gnuplot-iostream (bench/scaling):
// the program and whether it runs are the run kit's (train/plot.h); command() is the line
// gnuplot-iostream's Gnuplot(cmd) runs through popen, gnuplot's messages on stdout with ours.
#include <string>

#include <hddp/train/plot.h>

namespace hddp::gnuplot {

inline bool available() { return gnuplot_available(); }

// (Built by append: GCC 12's -Wrestrict misfires on "'" + program() + ....)
inline std::string command() {
  std::string cmd(1, '\'');
  cmd.append(gnuplot_program()).append("' 2>&1");
  return cmd;
}

}  // namespace hddp::gnuplot
