#include "common/options.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <hddp/core/util.h>

namespace hddp::cli {
namespace {

// Messages go to every rank's terminal: one carrying a megabyte value is cut.
constexpr size_t kMaxMessage = 2000;
// A configuration file is a few lines; one of more than 1 MiB is refused before CLI11 reads it.
constexpr uint64_t kMaxConfigBytes = uint64_t(1) << 20;

[[noreturn]] void fail(const std::string& msg) {
  if (msg.size() <= kMaxMessage) throw UsageError(msg);
  throw UsageError(msg.substr(0, kMaxMessage) + "... (" + std::to_string(msg.size()) + " bytes)");
}

// A value in a message: as is when short, else its first 60 bytes escaped and quoted.
std::string cut(const std::string& v) { return v.size() <= 60 ? v : quote_input(v, 60); }

std::string shown(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// The whole of v as T (from_chars: no sign '+', no spaces, no hex), or nothing.
template <class T>
bool whole(const std::string& v, T& x) {
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  return !v.empty() && ec == std::errc() && p == v.data() + v.size();
}

// CLI11's layout with the usage line first (it is the first line of the description), and
// one blank line, not two, between groups of options.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return "\n"; }
  std::string make_group(std::string group, bool positional, std::vector<const CLI::Option*> opts) const override {
    return CLI::Formatter::make_group(std::move(group), positional, std::move(opts)).substr(1);
  }
};

const CLI::Option* long_option(const CLI::App& app, const std::string& arg, size_t eq) {
  return arg.rfind("--", 0) == 0 ? app.get_option_no_throw(arg.substr(0, eq)) : nullptr;
}

// A --config file, checked before CLI11 reads it (CLI11 reads any size, line by line, and
// takes a NUL byte for the end of a value): a regular file of at most kMaxConfigBytes
// without NUL bytes. Returns its bytes.
std::string checked_config(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) fail("--config: cannot read " + quote_input(path));
  if (uint64_t(st.st_size) > kMaxConfigBytes)
    fail("--config " + path + ": " + std::to_string(st.st_size) + " bytes, more than a configuration file holds (" +
         std::to_string(kMaxConfigBytes) + ")");
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const std::exception&) {
    fail("--config: cannot read " + quote_input(path));
  }
  if (bytes.size() > kMaxConfigBytes) fail("--config " + path + ": more than " + std::to_string(kMaxConfigBytes) + " bytes");
  if (const size_t nul = bytes.find('\0'); nul != std::string::npos)
    fail("--config " + path + ": line " + std::to_string(1 + std::count(bytes.begin(), bytes.begin() + std::ptrdiff_t(nul), '\n')) +
         ": a NUL byte (not a text file)");
  return bytes;
}

}  // namespace

void house_style(CLI::App& app, const std::string& description, const std::string& footer, size_t column_width,
                 bool& help, const char* config_help) {
  app.description(description);
  app.footer(footer);
  app.formatter(std::make_shared<Formatter>());
  app.get_formatter()->column_width(column_width);
  app.get_formatter()->label("OPTIONS", "options");
  app.set_help_flag();     // --help is an ordinary flag: the driver decides who prints it
  app.allow_extras(true);  // reported by parse() in its own words
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  if (config_help) app.set_config("--config", "", config_help)->type_name("FILE")->group("Command line");
  app.add_flag("--help", help, "this text")->group("Command line");
}

CLI::Validator integer(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        int64_t x = 0;
        if (!whole(v, x)) return "expected an integer, got " + quote_input(v, 60);
        if (x < lo || x > hi) return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + cut(v);
        return "";
      },
      "");
}

CLI::Validator number_where(std::function<bool(double)> ok, std::string rule) {
  return CLI::Validator(
      [ok, rule](std::string& v) -> std::string {
        double x = 0;
        if (!whole(v, x) || !std::isfinite(x)) return "expected a number, got " + quote_input(v, 60);
        return ok(x) ? "" : "must be " + rule + ", got " + cut(v);
      },
      "");
}

CLI::Validator number(double lo, double hi) {
  return number_where([lo, hi](double x) { return x >= lo && x <= hi; }, "in [" + shown(lo) + ", " + shown(hi) + "]");
}

CLI::Validator positive() {
  return number_where([](double x) { return x > 0; }, "> 0");
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) -> std::string { return v.empty() ? "must not be empty" : ""; }, "");
}

CLI::Validator or_auto(CLI::Validator v) {
  return CLI::Validator(
      [v](std::string& s) -> std::string {
        if (s == "auto") {
          s.clear();
          return "";
        }
        double x = 0;
        if (!whole(s, x) || !std::isfinite(x)) return "expected a number or auto, got " + quote_input(s, 60);
        return v(s);
      },
      "");
}

uint64_t parse(CLI::App& app, int argc, const char* const* argv, const Renamed& renamed) {
  // The command line as CLI11 is to see it: "--name=VALUE" of a value option as "--name",
  // "VALUE"; a value option's next argument is its value whatever it looks like. A list is one
  // argument and its last occurrence counts (CLI11 would take "--hidden 20 30" as two widths,
  // and append every occurrence).
  std::vector<std::pair<const CLI::Option*, std::vector<std::string>>> items;  // option, its arguments
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") fail("unknown option '--'");  // not CLI11's end of options: there are no positionals
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    if (const auto r = renamed.find(a.substr(0, eq)); r != renamed.end())
      fail(r->first + ": removed; write " + r->second);
    const CLI::Option* opt = long_option(app, a, eq);
    if (!opt) {
      items.push_back({nullptr, {a}});
      continue;
    }
    const std::string name = a.substr(0, eq);
    if (opt->get_expected_max() == 0) {
      if (eq != std::string::npos) fail(name + ": takes no value");
      items.push_back({opt, {a}});
    } else {
      if (eq == std::string::npos && i + 1 >= argc) fail(name + ": missing value");
      const std::string v = eq != std::string::npos ? a.substr(eq + 1) : argv[++i];
      // A list (->delimiter): CLI11 would drop empty items ("20,,3": 20 and 3; ",": nothing).
      const std::string sep(1, opt->get_delimiter());
      if (sep[0] != '\0' && (v.empty() || (sep + v + sep).find(sep + sep) != std::string::npos))
        fail(name + ": expected a '" + sep + "'-separated list without empty items, got '" + v + "'");
      items.push_back({opt, {name, v}});
    }
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [opt, a] = items[i];
    const bool list = opt && opt->get_delimiter() != '\0';
    if (list && std::any_of(items.begin() + std::ptrdiff_t(i) + 1, items.end(), [&](const auto& x) { return x.first == opt; }))
      continue;
    args.insert(args.end(), a.begin(), a.end());
  }
  for (CLI::Option* opt : app.get_options([](CLI::Option* o) { return o->get_delimiter() != '\0'; }))
    opt->allow_extra_args(false);
  uint64_t hash = fnv1a64(nullptr, 0);
  for (const std::string& a : args) hash = fnv1a64(a.c_str(), a.size() + 1, hash);

  const CLI::Option* config = app.get_config_ptr();
  const auto config_file = [&] { return config->as<std::string>(); };
  std::string config_bytes;  // the last --config file's
  for (const auto& [opt, a] : items)
    if (opt && opt == config) config_bytes = checked_config(a.back());
  std::reverse(args.begin(), args.end());  // CLI11 takes them from the back
  try {
    app.parse(args);
  } catch (const CLI::FileError&) {  // the only file CLI11 reads is --config's
    fail("--config: cannot read " + quote_input(config_file()));
  } catch (const CLI::ConfigError& e) {  // a key that is no option: "INI was not able to parse KEY"
    const std::string what = e.what(), prefix = "INI was not able to parse ";
    if (what.rfind(prefix, 0) != 0) fail("--config " + config_file() + ": " + what);
    const std::string key = what.substr(prefix.size());
    if (key.ends_with(".++"))
      fail("--config " + config_file() + ": unknown section [" + cut(key.substr(0, key.size() - 3)) + "]");
    if (const auto r = renamed.find("--" + key); r != renamed.end())
      fail("--config " + config_file() + ": '" + key + "' was removed; write the equivalent of " + r->second);
    fail("--config " + config_file() + ": unknown key " + quote_input(key, 60));
  } catch (const CLI::Error& e) {
    fail(e.what());
  }
  for (const std::string& r : app.remaining()) {
    if (r.rfind("--", 0) == 0) fail("unknown option " + quote_input(r.substr(0, r.find('=')), 60));
    fail("unexpected argument " + quote_input(r, 60));
  }
  if (config && config->count() > 0)  // the file's bytes count: a node that reads it otherwise differs
    hash = fnv1a64(config_bytes.data(), config_bytes.size(), hash);
  return hash;
}

}  // namespace hddp::cli
