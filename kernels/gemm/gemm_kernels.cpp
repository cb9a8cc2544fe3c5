// The micro-kernel sets by name (the family's IsaTable); the one gemm_blocked runs is
// gemm_config()'s choice.
#include <string>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp::detail {

namespace {
constexpr IsaTable<Kernels> kGemmSets{kGemmIsa, {gemm_kernels_avx512, gemm_kernels_avx2, gemm_kernels_portable}};
}

std::string kernel_unsupported_reason(const std::string& name) { return isa_unsupported_reason(kGemmIsa, name); }

const Kernels* kernels_by_name(const std::string& name) { return kGemmSets.find(name); }

const Kernels& cpu_kernels() { return gemm_config().kernels; }

}  // namespace hddp::detail
