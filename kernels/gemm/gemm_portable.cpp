// Portable micro-kernel and direct path: plain C++, built with the default flags, so it runs
// on any CPU. The AVX2+FMA twin is gemm_avx2.cpp.
#define HDDP_ISA portable
#include <hddp/kernels/gemm/gemm_small.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp::detail {
namespace {

template <class T, int64_t MR, int64_t NR>
void ukernel_portable(int64_t k, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb, T alpha, T beta, T* c,
                      int64_t ldc) {
  T acc[MR][NR] = {};
  for (int64_t p = 0; p < k; ++p)
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += a[i * rsa + p * csa] * b[p * rsb + j];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NR; ++j)
      c[i * ldc + j] = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * c[i * ldc + j];
}

}  // namespace

const Kernels& gemm_kernels_portable() {
  static const Tile<float> tiles_s[] = {{kPortableFloat, &ukernel_portable<float, kPortableFloat.MR, kPortableFloat.NR>}};
  static const Tile<double> tiles_d[] = {
      {kPortableDouble, &ukernel_portable<double, kPortableDouble.MR, kPortableDouble.NR>}};
  static const Kernels k{
      "portable",
      make_kernel_set<float>(tiles_s, kPortableFloatClasses, &portable::gemm_small<float>),
      make_kernel_set<double>(tiles_d, kPortableDoubleClasses, &portable::gemm_small<double>)};
  return k;
}

}  // namespace hddp::detail
