#pragma once
// PDFs of a run's curves, drawn by gnuplot (its pdfcairo terminal) through gnuplot-iostream:
// panels side by side, each with its series. The file appears whole or not at all (written to
// a temporary name, then renamed).
//
//   Panel loss{"Cross-entropy loss", "epoch", "loss"};
//   loss.series.push_back({"training", "with linespoints lw 2 pt 7", points});
//   if (gnuplot_available()) plot_pdf(out + "/training.pdf", {loss, accuracy}, "Fashion-MNIST");
#include <string>
#include <utility>
#include <vector>

namespace hddp {

struct Series {
  std::string title;  // in the key
  std::string style;  // gnuplot's plot style: "with lines lw 2 lc rgb '#1f77b4'"
  std::vector<std::pair<double, double>> points;
};

struct Panel {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  std::string setup;  // gnuplot commands run before this panel's plot ("set key bottom right\n")
  std::string extra;  // more plot elements after the series ("keyentry with boxes ... title '...'")
};

// The gnuplot program: $HDDP_GNUPLOT, else "gnuplot" found on PATH; whether it can be run.
std::string gnuplot_program();
bool gnuplot_available();
// gnuplot_available(), else false after a warning on stderr: "<pdf> not drawn (<instead>
// holds the results)", with how to install it or turn the plot off (--no-plot).
bool gnuplot_or_warn(const std::string& pdf, const std::string& instead);

// Draws the panels side by side into `path` (width x height inches); throws hddp::Error naming
// the file when gnuplot fails or is missing (check gnuplot_available() first to warn instead).
void plot_pdf(const std::string& path, const std::vector<Panel>& panels, const std::string& title = "",
              double width_in = 11, double height_in = 4);

}  // namespace hddp
