// The micro-kernel sets by name; the one gemm_blocked runs is gemm_config()'s choice.
#include <string>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm_config.h>
#include <hddp/kernels/gemm_ukernel.h>

namespace hddp::detail {

std::string kernel_unsupported_reason(const std::string& name) {
  return isa_unsupported_reason(name, "HDDP_GEMM_KERNEL");
}

const Kernels* kernels_by_name(const std::string& name) {
  if (!kernel_unsupported_reason(name).empty()) return nullptr;
  if (name == "avx512") return &avx512_kernels();
  if (name == "avx2") return &avx2_kernels();
  return &portable_kernels();
}

const Kernels& cpu_kernels() { return gemm_config().kernels; }

}  // namespace hddp::detail
