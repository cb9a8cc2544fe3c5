#pragma once
// CSV files through libcsv (RFC 4180 as libcsv parses it, strict mode): the first row names
// the columns (quoted names allowed), every other row holds one number per column. A UTF-8
// BOM, CRLF or CR line ends, blank lines and a last line without a line end are accepted;
// spaces around a cell are ignored.
//
// Refused, with hddp::Error naming the file (lines are 1-based, the header is line 1, a quoted
// cell holding line breaks counts its lines): a missing or unreadable file; no data rows; a
// duplicate column name; more than 2^20 columns; a target or feature that is not a column (the message lists them); a
// row with more or fewer fields than the header; an empty cell, or one that is not a finite
// number (std::from_chars on the whole cell, read as a double then rounded to float, as pandas
// then .astype(np.float32) does); a label that is not an integer >= 0; a malformed quote.
// Columns that are neither features nor targets are not read. Messages quote at most 60 bytes
// of a cell or name and list at most 20 columns: a hostile file is never copied into one.
#include <string>
#include <vector>

#include <hddp/data/dataset.h>

namespace hddp {

struct CsvOptions {
  // Default member initialisers on all: designated initialisers ({.targets = {"price"}}) may
  // leave any out without -Wmissing-field-initializers.
  std::vector<std::string> targets = {};   // target columns, in this order (may be empty)
  std::vector<std::string> features = {};  // feature columns in this order; empty: every column that is not a target
  char delimiter = ',';
  bool labels = false;                // one target column of integer class labels 0..K-1
};

// The file as a Dataset: shape {features}, x the features, y (count x targets) or labels with
// num_classes = max label + 1; feature_names and target_names from the header. Throws
// std::invalid_argument for inconsistent options (labels without exactly one target, a name
// listed twice or as both feature and target, a delimiter that is a quote or line end).
Dataset read_csv(const std::string& path, const CsvOptions& o = {});

}  // namespace hddp
