#pragma once
// Which instruction sets this CPU (and OS) can execute, and the one rule that picks a kernel
// family's set: the family's variable where it is set, else the widest set the CPU has.
//   family        variable                 sets, widest first
//   gemm          HDDP_GEMM_KERNEL         avx512, avx2, portable  (between the two: gemm/gemm_config.h)
//   gemm_bf16     HDDP_GEMM_BF16_KERNEL    amx, avx512bf16, portable
//   conv          HDDP_CONV_KERNEL         avx512, avx2, portable
//   elementwise   HDDP_ELEMENTWISE_KERNEL  avx512, avx2, portable
// The sets: avx512 (AVX-512F, ZMM state enabled, and AVX2+FMA), avx2 (AVX2+FMA), avx512bf16
// (AVX512_BF16), amx (AMX-BF16, the tile state granted by Linux), portable (plain C++).
// Each family's sets are an IsaTable below, one getter <family>_kernels_<isa>() per set, each
// defined in the family's file for that set (<family>/<family>_<isa>.cpp, the only file built
// with the set's flags).
#include <string>
#include <string_view>

namespace hddp::detail {

// CPUID, and XGETBV for the OS saving the registers.
bool cpu_has_avx2_fma();
bool cpu_has_avx512();
bool cpu_has_avx512_bf16();  // AVX512_BF16 (and AVX-512F)
bool cpu_has_amx_bf16();     // AMX-TILE + AMX-BF16, tile state enabled in XCR0
// Asks Linux once per process for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM);
// "" when granted, else why not. No tile instruction may run before it returned "".
std::string amx_permission_error();

// This CPU's model as tuned choices are keyed by (gemm_config.h): vendor, family and model as
// Linux shows them (display family/model) and the brand string, e.g.
// "GenuineIntel family 6 model 207: Intel(R) Xeon(R) Processor".
std::string cpu_model_key();
// Vendor, display family and model alone (the built-in table's rows match on these).
struct CpuModel {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", "" off x86
  int family = 0, model = 0;
};
CpuModel cpu_model();

// A kernel family as the choice sees it: the variable that forces a set, and its sets.
struct IsaFamily {
  const char* env_var;
  const char* what;            // "kernel", "bf16 kernel": the messages' word for a set
  std::string_view isas[3];    // widest first
};
inline constexpr IsaFamily kGemmIsa{"HDDP_GEMM_KERNEL", "kernel", {"avx512", "avx2", "portable"}};
inline constexpr IsaFamily kGemmBf16Isa{"HDDP_GEMM_BF16_KERNEL", "bf16 kernel", {"amx", "avx512bf16", "portable"}};
inline constexpr IsaFamily kConvIsa{"HDDP_CONV_KERNEL", "kernel", {"avx512", "avx2", "portable"}};
inline constexpr IsaFamily kElementwiseIsa{"HDDP_ELEMENTWISE_KERNEL", "kernel", {"avx512", "avx2", "portable"}};
inline constexpr IsaFamily kAttentionIsa{"HDDP_ATTENTION_KERNEL", "kernel", {"avx512", "avx2", "portable"}};

// Why the family's set `name` cannot run here ("" when it can); a name the family does not have
// throws std::invalid_argument naming the variable and the valid names.
std::string isa_unsupported_reason(const IsaFamily& f, const std::string& name);
// The same for the family whose variable is env_var (one of the five above).
std::string isa_unsupported_reason(const std::string& name, const char* env_var);
// The widest set of the family this CPU runs.
std::string_view isa_widest(const IsaFamily& f);
// The set to use: the family's variable if set and non-empty (throws std::invalid_argument, with
// what to do, where this CPU cannot run it), else isa_widest.
std::string isa_choice(const IsaFamily& f);

// A family's sets, one getter per set in its IsaFamily's order (call a getter only where this
// CPU runs its set). K: the family's kernel set type (Kernels, Bf16Kernels, ConvKernels, EltKernels).
template <class K>
struct IsaTable {
  const IsaFamily& family;
  const K& (*get[3])();

  // The set `name` if this CPU can execute it, else nullptr; throws on a name the family lacks.
  const K* find(const std::string& name) const {
    if (!isa_unsupported_reason(family, name).empty()) return nullptr;
    for (int i = 0; i < 3; ++i)
      if (family.isas[i] == name) return &get[i]();
    return nullptr;
  }
  // The set isa_choice picks.
  const K& chosen() const { return *find(isa_choice(family)); }
};

}  // namespace hddp::detail
