#pragma once
// Which micro-kernel set and blocking gemm_blocked runs, per precision, decided once per process
// (ATLAS's install-time search and FFTW's wisdom are the models):
//   1. HDDP_GEMM_KERNEL=avx512|avx2|portable forces the set; its blocking comes from the wisdom
//      entry for this CPU if that entry measured the set, else from the set's row of
//      gemm_blocking.h;
//   2. else the wisdom file's entry for this CPU (gemm_tune measured it here);
//   3. else the built-in table kCpuChoices (gemm_blocking.h), first matching row;
//   4. else the widest set this CPU runs, with its blocking.
// Wisdom file: $HDDP_GEMM_WISDOM (set but empty: none), else
// $XDG_CONFIG_HOME/hddp/gemm_wisdom.json, else $HOME/.config/hddp/gemm_wisdom.json. One file
// serves a mixed cluster: entries are keyed by cpu_model_key(). A missing file is no error; a
// malformed one, or an entry this CPU cannot run, throws std::invalid_argument naming the file
// and what to do. Results are bitwise identical across thread counts for any one choice.
//
// Format (gemm_tune writes it; "blocking" may be left out, then each set runs its own; where it
// is given it must hold the chosen kernel's entry, the other sets' entries are optional):
//   {"format": "hddp-gemm-wisdom-1",
//    "cpus": {"GenuineIntel family 6 model 207: Intel(R) Xeon(R) Processor": {
//       "float":  {"kernel": "avx512", "blocking": {"avx512": {"MC": 192, "KC": 256, "NC": 4096,
//                                                              "narrow": {"MR": 12, "NR": 32, "MC": 192,
//                                                                         "KC": 256, "NC": 4096},
//                                                              "thin": {"MR": 8, "NR": 48, ...},
//                                                              "long_k": {"MR": 8, "NR": 32, ...}},
//                                                   "avx2":   {"MC": 144, "KC": 256, "NC": 4080}}},
//       "double": {"kernel": "avx512", "blocking": {"avx512": {"MC": 84, "KC": 384, "NC": 4096}}},
//       "tuned": "...", "threads": 1, "score": {...}}}}   (the last three: information only)
// A set's entry may name its micro-tile ("MR", "NR": one of the set's tiles, gemm_blocking.h;
// left out: the set's own) and holds the other shape classes' tiles under "narrow", "thin" and
// "long_k" (left out, as in files written before the classes existed: the set's own rows).
#include <string>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp::detail {

struct GemmConfig {
  Kernels kernels;     // kernels.s / kernels.d: the chosen sets with the chosen blocking;
                       // kernels.name: the float set's name
  const char* set_s;   // the set each precision runs: "avx512", "avx2" or "portable"
  const char* set_d;
  std::string source;  // where the choice came from, for messages and tables
};

// The configuration in effect (decided on first use, as above).
const GemmConfig& gemm_config();

// The decision itself, from explicit inputs (tests call it directly):
//   forced        HDDP_GEMM_KERNEL's value, "" when unset
//   wisdom_text   the wisdom file's contents, "" when there is none
//   wisdom_origin its path, for messages
std::string wisdom_path();
GemmConfig make_gemm_config(const std::string& forced, const std::string& wisdom_text,
                            const std::string& wisdom_origin, const std::string& cpu_key,
                            const CpuModel& cpu);

// "avx512 12x32 MC 192 KC 256 NC 4096" for one precision.
std::string describe(const char* set_name, const Blocking& b);
// "narrow 12x32 MC 192 KC 256 NC 4096, thin 8x48 ..., long_k 8x32 ...": the tiles of the shape
// classes other than the general one (gemm_blocking.h; describe() gives that one).
std::string describe_classes(const ClassBlocking& b);

}  // namespace hddp::detail
