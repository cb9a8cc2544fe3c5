// Which micro-kernel set gemm_blocked runs: cpu_isa.h's rule with HDDP_GEMM_KERNEL.
#include <string>

#include "kernels/cpu_isa.h"
#include "kernels/gemm_ukernel.h"

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

const Kernels& cpu_kernels() {
  static const Kernels& k = *kernels_by_name(isa_choice("HDDP_GEMM_KERNEL"));
  return k;
}

}  // namespace hddp::detail
