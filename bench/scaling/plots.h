#pragma once
// bench/scaling's PDFs, drawn by gnuplot through gnuplot-iostream from the studies' CSVs, so
// `scaling --plot-only --out DIR` redraws results measured elsewhere (e.g. on a machine
// without gnuplot).
#include <string>

namespace scaling {

// Each reads DIR/<study>.csv and writes DIR/<study>.pdf; `note` goes under the title
// (machine, load). Throw Failure if gnuplot fails.
void plot_gemm(const std::string& dir, const std::string& note);
void plot_step(const std::string& dir, const std::string& note);
void plot_ranks(const std::string& dir, const std::string& note);
void plot_poly(const std::string& dir, const std::string& note);
void plot_buckets(const std::string& dir, const std::string& note);
void plot_placement(const std::string& dir, const std::string& note);

// The CSVs in DIR as markdown tables on stdout (`scaling --tables`, for bench/RESULTS.md).
void print_tables(const std::string& dir);

}  // namespace scaling
