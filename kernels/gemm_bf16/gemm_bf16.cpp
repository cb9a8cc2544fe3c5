// gemm_bf16 (gemm_bf16.h): the loops around the micro-kernels of gemm_bf16_ukernel.h, the AMX
// micro-kernel on the tile model (amx/amx_tile_model.h), and the choice of a set.
//
// The loops are gemm_blocked's, with A and B rounded to bf16 as they are packed:
//   loop 5  jc over N by NC
//   loop 4  pc over K by KC        pack B (kc x nc) into NR-column pair panels, threads split the panels
//   loop 3  ic over M by MC        tasks (an M block x a group of B panels), one per thread:
//                                  pack A (mc x kc) into MR-row panels (each task its own copy;
//                                  one M block: packed once by all threads before the tasks;
//                                  AMX reads bf16 A's whole panels in place instead)
//   loop 2  jr over the group's B panels
//   loop 1  ir over A's panels     micro-kernel on an MR x NR tile of C
// (loops 2 and 1 swap where a group has at most two B panels: an A micro-panel then feeds both
// from L1, as in a convolution's thin products).
// Each element of C is summed by one task, in k order: the same bits for any thread count.
#include <hddp/kernels/gemm_bf16.h>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <hddp/kernels/check.h>
#include <hddp/kernels/amx/amx_tile_model.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>
#include <hddp/kernels/gemm/gemm_common.h>
#include <hddp/kernels/units.h>

namespace hddp::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Below this many flops the product runs on one thread (a team costs more than it saves).
constexpr int64_t kParallelFlops = int64_t(1) << 22;

}  // namespace

template <class S>
void gemm_bf16_with(const Bf16Kernels& k, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const S* A, int64_t lda, const S* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  const Bf16Blocking& bl = k.blocking;
  const PackFn<S> pack_a = std::is_same_v<S, float> ? PackFn<S>(k.pack_a_f) : PackFn<S>(k.pack_a_h);
  const PackFn<S> pack_b = std::is_same_v<S, float> ? PackFn<S>(k.pack_b_f) : PackFn<S>(k.pack_b_h);
  const Strides as = a_strides(ta, lda), bs = b_strides(tb, ldb);
  const int64_t kpad_max = ceil_div(std::min(K, bl.KC), bl.KU) * bl.KU;
  const int64_t nc_max = ceil_div(std::min(N, bl.NC), bl.NR) * bl.NR;
  std::vector<uint16_t> bpack(size_t(nc_max * kpad_max));
  // One M block split among several tasks (M small, more threads than blocks): its A is packed
  // once, by all threads, into ashared, not by every task alone.
  const int64_t apack_size = ceil_div(std::min(M, bl.MC), bl.MR) * bl.MR * kpad_max;
  std::vector<uint16_t> ashared(size_t(M <= bl.MC ? apack_size : 0));
  const int threads = 2 * M * N * K >= kParallelFlops ? omp_get_max_threads() : 1;
  const bool in_place = std::is_same_v<S, uint16_t> && k.a_in_place && as.cs == 1;

#pragma omp parallel num_threads(threads)
  {
    std::vector<uint16_t> apack(size_t(M <= bl.MC ? 0 : apack_size));
    std::vector<float> edge(size_t(bl.MR * bl.NR));
    const int64_t nthreads = omp_get_num_threads();
    for (int64_t jc = 0; jc < N; jc += bl.NC) {  // loop 5
      const int64_t nc = std::min(bl.NC, N - jc), npanels = ceil_div(nc, bl.NR);
      for (int64_t pc = 0; pc < K; pc += bl.KC) {  // loop 4
        const int64_t kc = std::min(bl.KC, K - pc), kpad = ceil_div(kc, bl.KU) * bl.KU;
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < npanels; ++jp)
          pack_b(B + (jc + jp * bl.NR) * bs.rs + pc * bs.cs, bs.rs, bs.cs, std::min(bl.NR, nc - jp * bl.NR), bl.NR,
                 kc, kpad, bpack.data() + jp * bl.NR * kpad);
        const float bet = pc == 0 ? beta : 1.0f;
        const bool a_direct = in_place && kc % bl.KU == 0;  // A's full panels read in place
        const int64_t mblocks = ceil_div(M, bl.MC);
        const int64_t groups = std::min(npanels, ceil_div(nthreads, mblocks));
        uint16_t* const abuf = M <= bl.MC ? ashared.data() : apack.data();
        if (M <= bl.MC) {
#pragma omp for schedule(static)
          for (int64_t ip = 0; ip < ceil_div(M, bl.MR); ++ip)
            if (!a_direct || std::min(bl.MR, M - ip * bl.MR) < bl.MR)
              pack_a(A + ip * bl.MR * as.rs + pc * as.cs, as.rs, as.cs, std::min(bl.MR, M - ip * bl.MR), bl.MR, kc, kpad,
                     abuf + ip * bl.MR * kpad);
        }
#pragma omp for schedule(static)
        for (int64_t task = 0; task < mblocks * groups; ++task) {  // loop 3
          const int64_t ic = task / groups * bl.MC, g = task % groups;
          const int64_t mc = std::min(bl.MC, M - ic), mpanels = ceil_div(mc, bl.MR);
          for (int64_t ip = 0; ip < mpanels && M > bl.MC; ++ip)
            if (!a_direct || std::min(bl.MR, mc - ip * bl.MR) < bl.MR)
              pack_a(A + (ic + ip * bl.MR) * as.rs + pc * as.cs, as.rs, as.cs, std::min(bl.MR, mc - ip * bl.MR), bl.MR,
                   kc, kpad, abuf + ip * bl.MR * kpad);
          auto tile = [&](int64_t jp, int64_t ip) {
            const uint16_t* b = bpack.data() + jp * bl.NR * kpad;
            const int64_t n = std::min(bl.NR, nc - jp * bl.NR), m = std::min(bl.MR, mc - ip * bl.MR);
            const bool direct = a_direct && m == bl.MR;
            const uint16_t* a = direct ? reinterpret_cast<const uint16_t*>(A) + (ic + ip * bl.MR) * as.rs + pc
                                       : abuf + ip * bl.MR * kpad;
            const int64_t a_rs = direct ? as.rs : bl.KU, a_ks = direct ? bl.KU : bl.MR * bl.KU;
            float* c = C + (ic + ip * bl.MR) * ldc + jc + jp * bl.NR;
            if (m == bl.MR && n == bl.NR) return k.ukernel(kpad, a, a_rs, a_ks, b, alpha, bet, c, ldc);
            k.ukernel(kpad, a, a_rs, a_ks, b, 1.0f, 0.0f, edge.data(), bl.NR);
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                const float s = alpha * edge[size_t(i * bl.NR + j)];
                c[i * ldc + j] = bet == 0.0f ? s : s + bet * c[i * ldc + j];
              }
          };
          const int64_t jp0 = g * npanels / groups, jp1 = (g + 1) * npanels / groups;
          if (jp1 - jp0 <= 2) {  // few B panels (N small): each A micro-panel feeds them while in L1
            for (int64_t ip = 0; ip < mpanels; ++ip)    // loop 1, outside
              for (int64_t jp = jp0; jp < jp1; ++jp)    // loop 2, inside
                tile(jp, ip);
          } else {
            for (int64_t jp = jp0; jp < jp1; ++jp)      // loop 2
              for (int64_t ip = 0; ip < mpanels; ++ip)  // loop 1: the B micro-panel stays in L1
                tile(jp, ip);
          }
        }
      }
    }
  }
}

namespace {

void model_ukernel(int64_t kpad, const uint16_t* a, int64_t a_rs, int64_t a_ks, const uint16_t* b, float alpha,
                   float beta, float* c, int64_t ldc) {
  amx_tile_program<ModelOps>(kpad, a, a_rs, a_ks, b, alpha, beta, c, ldc);
}

constexpr IsaTable<Bf16Kernels> kBf16Sets{
    kGemmBf16Isa, {gemm_bf16_kernels_amx, gemm_bf16_kernels_avx512bf16, gemm_bf16_kernels_portable}};

// HDDP_GEMM_BF16_KERNEL where set, else the set of the bf16 unit (units.h): amx, avx512bf16, or
// portable (the float GEMM on rounded copies) where neither beats the float FMA.
const Bf16Kernels& chosen_kernels() {
  static const Bf16Kernels& k = [&]() -> const Bf16Kernels& {
    const char* env = std::getenv(kGemmBf16Isa.env_var);
    if (env && *env) return kBf16Sets.chosen();
    switch (bf16_unit()) {
      case Bf16Unit::Amx: return gemm_bf16_kernels_amx();
      case Bf16Unit::Avx512Bf16: return gemm_bf16_kernels_avx512bf16();
      case Bf16Unit::Float: break;
    }
    return gemm_bf16_kernels_portable();
  }();
  return k;
}

template <class S>
void dispatch(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda, const S* B,
              int64_t ldb, float beta, float* C, int64_t ldc) {
  const Bf16Kernels& k = chosen_kernels();
  if (k.ukernel) gemm_bf16_with(k, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else gemm_bf16_portable(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

const Bf16Kernels& amx_model_kernels() {
  static const Bf16Kernels k{"amx-model",          kBf16Amx,         model_ukernel,
                             pack_rows32<float>, pack_pairs<float>, pack_rows32<uint16_t>, pack_pairs<uint16_t>, true};
  return k;
}

template void gemm_bf16_with<float>(const Bf16Kernels&, Trans, Trans, int64_t, int64_t, int64_t, float, const float*,
                                    int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_bf16_with<uint16_t>(const Bf16Kernels&, Trans, Trans, int64_t, int64_t, int64_t, float,
                                       const uint16_t*, int64_t, const uint16_t*, int64_t, float, float*, int64_t);

}  // namespace hddp::detail

namespace hddp {

void gemm_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
               const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  detail::dispatch(ta, tb, M, N, K, alpha, reinterpret_cast<const uint16_t*>(A), lda,
                   reinterpret_cast<const uint16_t*>(B), ldb, beta, C, ldc);
}

void gemm_bf16(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  detail::dispatch(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* gemm_bf16_kernel_name() { return detail::chosen_kernels().name; }

bool bf16_product_pays(int64_t M, int64_t N, int64_t K) {
  return 2 * M * N * K >= kBf16MinFlops && bf16_unit() != Bf16Unit::Float;
}

std::string gemm_bf16_unsupported_reason(const std::string& name) {
  return detail::isa_unsupported_reason(detail::kGemmBf16Isa, name);
}

}  // namespace hddp
