#pragma once
// The command-line layer of the drivers (poly_train, mnist_train): each option is
// one CLI11 call with its check beside it, using the validators below, whose messages CLI11
// prefixes with the flag ("--epochs: must be in [1, 1000000000], got -5"). parse() adds the
// rules CLI11 lacks and turns every CLI11 error into a UsageError the driver prints with a
// pointer to --help (exit code 2).
#include <CLI/CLI.hpp>

#include <hddp/core/util.h>

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hddp::cli {

// Bad command-line input: the driver prints it with "Try '<prog> --help'." and exits with 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The house --help layout: the usage line first (the description's first line), groups one
// blank line apart, defaults after '='. --help is an ordinary flag setting `help` (a driver
// prints help() on rank 0 only, after MPI has started); of a repeated option, the last value
// counts (a list's too: see parse()).
// With config_help, --config FILE reads options from a TOML/INI file (keys the long options
// without dashes; the command line overrides it). Both in the group "Command line".
void house_style(CLI::App& app, const std::string& description, const std::string& footer, size_t column_width,
                 bool& help, const char* config_help = nullptr);

// Validators. Numbers must be finite; lists are checked item by item by CLI11 (->delimiter).
CLI::Validator integer(int64_t lo, int64_t hi);  // "expected an integer, got 'x'", "must be in [lo, hi], got v"
// A number for which ok(x) holds: "expected a number, got 'x'", else "must be <rule>, got v".
CLI::Validator number_where(std::function<bool(double)> ok, std::string rule);
CLI::Validator number(double lo, double hi);     // in [lo, hi]
CLI::Validator positive();                       // > 0
CLI::Validator non_empty();                      // "must not be empty"
// "auto" or what `v` accepts ("expected a number or auto, got 'x'"); "auto" arrives as the
// empty string, which CLI11 stores as an empty std::optional.
CLI::Validator or_auto(CLI::Validator v);

// One of `names`, converted to its value ("expected one of adam, sgd, got 'x'"). Only the
// names: CLI11's CheckedTransformer alone would also take the value itself ("1" for sgd).
template <class E>
CLI::Validator one_of(const std::vector<std::pair<std::string, E>>& names) {
  std::string list;
  for (const auto& [n, e] : names) list += (list.empty() ? "" : ", ") + n;
  CLI::Validator to_value = CLI::CheckedTransformer(names);
  return CLI::Validator(
      [names, to_value, list](std::string& v) {
        for (const auto& [n, e] : names)
          if (v == n) return to_value(v);
        return "expected one of " + list + ", got " + hddp::quote_input(v, 60);
      },
      "");
}

// Options that were removed, with what to write instead ({"--progress", "--reduce-mode MODE"}):
// on the command line or in a --config file they are refused naming the replacement.
using Renamed = std::map<std::string, std::string>;

// Parses argv (without argv[0]) into the options of `app`. On top of CLI11: a flag takes no
// value (CLI11 reads --resume=0 as false); "--name=" is the empty value (CLI11 takes the next
// argument); the argument after a value option is its value whatever it looks like (--out
// --x: the directory "--x"); a list option (->delimiter) takes one argument, its last
// occurrence counts and has no empty items ("20,,3"; in a --config file CLI11 drops them);
// "--" and positionals are errors; a --config file's unknown key is named; a --config file of
// more than 1 MiB or holding a NUL byte is refused before CLI11 reads it; messages quote at
// most 60 bytes of a value. Throws UsageError. Returns FNV-1a of the arguments and the
// --config file's bytes as this process read them: the ranks of one job compare it
// (drivers/common/driver_setup.h).
uint64_t parse(CLI::App& app, int argc, const char* const* argv, const Renamed& renamed = {});

}  // namespace hddp::cli
