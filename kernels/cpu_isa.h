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

// Why the set `name` cannot run here ("" when it can); an unknown name throws
// std::invalid_argument naming `env_var` and the valid names.
std::string isa_unsupported_reason(const std::string& name, const char* env_var);

// The set to use: env_var's value if set and non-empty (throws std::invalid_argument, with what
// to do, where this CPU cannot run it), else the widest the CPU supports.
std::string isa_choice(const char* env_var);

}  // namespace hddp::detail
