#pragma once
// bench/scaling's PDFs, drawn by gnuplot through gnuplot-iostream from the studies' CSVs, so
// `scaling --plot-only --out DIR` redraws results measured elsewhere (e.g. on a machine
// without gnuplot), and their markdown summaries. main.cpp's study registry names them.
#include <string>

#include "common.h"

namespace scaling {

// Each draws one study's PDF from its CSV's table; `note` goes under the title (machine, load).
// Throw Failure if gnuplot fails.
void plot_gemm(const Table& t, const std::string& pdf, const std::string& note);
void plot_step(const Table& t, const std::string& pdf, const std::string& note);
void plot_ranks(const Table& t, const std::string& pdf, const std::string& note);
void plot_poly(const Table& t, const std::string& pdf, const std::string& note);
void plot_buckets(const Table& t, const std::string& pdf, const std::string& note);
void plot_placement(const Table& t, const std::string& pdf, const std::string& note);

// Each prints one study's CSV (file name `csv`, for the heading) as a markdown table on
// stdout (`scaling --tables`, for bench/RESULTS.md).
void table_gemm(const Table& t, const std::string& csv);
void table_step(const Table& t, const std::string& csv);
void table_ranks(const Table& t, const std::string& csv);
void table_poly(const Table& t, const std::string& csv);
void table_buckets(const Table& t, const std::string& csv);
void table_placement(const Table& t, const std::string& csv);

}  // namespace scaling
