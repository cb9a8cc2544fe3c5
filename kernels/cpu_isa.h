#pragma once
// Which instruction sets this CPU (and OS) can execute, and the one rule that picks a kernel set
// for the GEMM micro-kernels (HDDP_GEMM_KERNEL) and the element-wise loops
// (HDDP_ELEMENTWISE_KERNEL): the variable's value where it is set, else the widest the CPU has.
// The names: avx512 (AVX-512F, ZMM state enabled, and AVX2+FMA), avx2 (AVX2+FMA), portable.
#include <string>

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

// Why the set `name` cannot run here ("" when it can); an unknown name throws
// std::invalid_argument naming `env_var` and the valid names.
std::string isa_unsupported_reason(const std::string& name, const char* env_var);

// The set to use: env_var's value if set and non-empty (throws std::invalid_argument, with what
// to do, where this CPU cannot run it), else the widest the CPU supports.
std::string isa_choice(const char* env_var);

}  // namespace hddp::detail
