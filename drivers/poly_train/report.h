#pragma once
// Rank 0's outputs: eval.csv, loss.csv and errors.pdf (gnuplot through gnuplot-iostream).
#include <cstdint>
#include <string>
#include <vector>

namespace poly {

struct Curve {
  std::vector<double> x, f, g;  // f: target, g: model
};

// eval.csv: x,f,g,abs_err for the evaluation points.
void write_eval_csv(const std::string& path, const Curve& eval);
// loss.csv: epoch,rank,loss; losses[r][e] is rank r's loss at epoch e+1.
void write_loss_csv(const std::string& path, const std::vector<std::vector<float>>& losses);


// errors.pdf: left, f and g over `dense` with the training range shaded and the evaluation
// points; right, |f - g| with the same shading. Throws hddp::Error if gnuplot fails.
void plot_errors(const std::string& path, const Curve& dense, const Curve& eval, int64_t epochs,
                 double train_lo, double train_hi);

// Writes path atomically enough for our purpose: to path.tmp, then rename.
void write_file(const std::string& path, const std::string& content);

}  // namespace poly
