// hddp's GEMM: the Goto/BLIS algorithm. Five loops around one micro-kernel:
//   loop 5 (jc, NC)  columns of C and B
//   loop 4 (pc, KC)  the shared dimension: pack a KC x NC panel of B
//   loop 3 (ic, MC)  rows of C and A: pack an MC x KC block of A
//   loop 2 (jr, NR)  micro-panels of packed B
//   loop 1 (ir, MR)  micro-panels of packed A -> micro-kernel on an MR x NR tile of C
// References: Goto & van de Geijn, "Anatomy of high-performance matrix multiplication"
// (TOMS 2008); Van Zee & van de Geijn, "BLIS" (TOMS 2015); BLISlab.
//
// Threads: C is cut into a tm x tn grid of tiles whose edges fall on MR/NR multiples; each
// thread runs the five loops on its own tile with its own packing buffers, so there is no
// barrier inside, and every element of C sees exactly the same operations, in the same order,
// for any thread count (bitwise identical results). The K dimension is never split.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <hddp/kernels/gemm/gemm_blocking.h>
#include <hddp/kernels/gemm/gemm_common.h>
#include <hddp/kernels/gemm/gemm_pack.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>
#include <hddp/kernels/progress.h>

namespace hddp {
namespace detail {
namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// One thread's packing buffers, allocated on first use and grown only up to the bounds
// MC*KC (A) and KC*NC (B), then reused by every later call on that thread.
template <class T>
struct PackBuffers {
  std::unique_ptr<T, AlignedFree> a, b;
  int64_t a_size = 0, b_size = 0;

  static void reserve(std::unique_ptr<T, AlignedFree>& buf, int64_t& size, int64_t need) {
    if (need <= size) return;
    const size_t bytes = (static_cast<size_t>(need) * sizeof(T) + 63) / 64 * 64;
    T* p = static_cast<T*>(std::aligned_alloc(64, bytes));
    HDDP_CHECK(p != nullptr, "gemm: cannot allocate " << bytes << " bytes of packing buffer");
    buf.reset(p);
    size = need;
  }
};

template <class T>
PackBuffers<T>& thread_buffers() {
  thread_local PackBuffers<T> buffers;
  return buffers;
}

template <class T>
struct Problem {
  Trans ta, tb;
  int64_t M, N, K;
  T alpha;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T beta;
  T* C;
  int64_t ldc;
  const Tile<T>& tile;  // micro-kernel, packers and blocking sizes for this product's shape class
  int64_t kc_step;      // KC as the K loop steps (kc_step_for)
  bool a_in_place;      // full micro-panels read where they are, not packed (in_place_a/b)
  bool b_in_place;
};

// Operands the micro-kernel reads in place, as BLIS's unpacked path for skinny products does.
// Packing an operand pays for itself when each of its micro-panels is used many times; against a
// small extent of the other operand it is a pass over memory of its own that nothing overlaps:
// the second convolution's weight gradient (64 x 288 over K = 12544, TN) spent half as long
// packing B as multiplying. Read in place, its loads run between the FMAs and the prefetchers
// hide them.
//   A, where N <= kNarrowMax (each micro-panel serves at most kNarrowMax / NR micro-tiles, its
//   kc x MR stay in L1 meanwhile), where K <= kNarrowMax (a micro-panel is at most 4 KiB: the
//   second convolution's input gradient, 12544 x 288 x 64 NN, ran 6 % faster), or where A is
//   stored K x M with M <= kNarrowMax (A^T's rows, at most kNarrowMax long, read whole).
//   B, where its rows run along N (NN, TN) and M <= kNarrowMax, unless its rows are a multiple
//   of 512 bytes apart: a KC x NR micro-panel of such rows falls in 8 or fewer of L1's 64 sets
//   (TN 64 x 1024 x 8192 ran about 10 % slower in place, 64 x 288 x 12544 about 20 % faster).
// Partial micro-panels (the edges of C) are still packed, zero-padded. A function of the shape
// alone, so the same for any thread count.
inline bool in_place_a(Trans ta, int64_t M, int64_t N, int64_t K) {
  return N <= kNarrowMax || K <= kNarrowMax || (ta == Trans::Yes && M <= kNarrowMax);
}
template <class T>
bool in_place_b(Trans tb, int64_t M, int64_t ldb) {
  return tb == Trans::No && M <= kNarrowMax && ldb * int64_t(sizeof(T)) % 512 != 0;
}

// Step that cuts `extent` into ceil(extent / cap) blocks of nearly equal size, rounded up to
// a multiple of `unit` (cap is a multiple of unit, so the step never exceeds it).
inline int64_t balanced_step(int64_t extent, int64_t cap, int64_t unit) {
  const int64_t blocks = (extent + cap - 1) / cap;
  const int64_t step = (extent + blocks - 1) / blocks;
  return std::min(cap, (step + unit - 1) / unit * unit);
}

// The K loop's step: blocks of nearly equal size, at most KC, except that a last block of at most
// KC/4 is spread over the others: K = 288 with KC = 256 runs as one block of 288, not 256 + 32 (a
// 32-deep block reads and writes C for an eighth of the work), K = 3136 as 12 blocks of <= 262.
// A function of K and KC alone, so the same for any thread count.
inline int64_t kc_step_for(int64_t K, int64_t KC) {
  int64_t blocks = (K + KC - 1) / KC;
  if (blocks > 1 && K - (blocks - 1) * KC <= KC / 4) --blocks;
  return (K + blocks - 1) / blocks;
}

// The five loops over the tile C[m0:m1, n0:n1].
template <class T>
void blocked_tile(const Problem<T>& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1, bool poll) {
  const Blocking& b = p.tile.blocking;
  const int64_t MR = b.MR, NR = b.NR, MC = b.MC, NC = b.NC, KC = p.kc_step;
  const UKernel<T> ukernel = p.tile.ukernel;
  PackBuffers<T>& buf = thread_buffers<T>();
  const int64_t kc_max = std::min(KC, p.K);
  PackBuffers<T>::reserve(buf.a, buf.a_size, std::min(MC, (m1 - m0 + MR - 1) / MR * MR) * kc_max);
  PackBuffers<T>::reserve(buf.b, buf.b_size, std::min(NC, (n1 - n0 + NR - 1) / NR * NR) * kc_max);
  T* const abuf = buf.a.get();
  T* const bbuf = buf.b.get();
  alignas(64) T edge[kMaxMR * kMaxNR];

  // Blocks of (nearly) equal size, multiples of NR / MR, no larger than NC / MC: N = 4096 is
  // cut 2048 + 2048 rather than 4080 + 16. Edge micro-tiles still occur only at the edge of C,
  // so results stay independent of the thread count.
  const int64_t nc_step = balanced_step(n1 - n0, NC, NR), mc_step = balanced_step(m1 - m0, MC, MR);
  for (int64_t jc = n0; jc < n1; jc += nc_step) {                   // loop 5
    const int64_t nc = std::min(nc_step, n1 - jc);
    for (int64_t pc = 0; pc < p.K; pc += KC) {                      // loop 4
      const int64_t kc = std::min(KC, p.K - pc);
      const T beta = pc == 0 ? p.beta : T(1);
      // B's panel packed, or read in place: then columns [jc, jc + nb) are, the rest packed.
      const int64_t nb = p.b_in_place ? nc / NR * NR : 0;
      if (nb < nc) pack_b(NR, p.tb, p.B, p.ldb, pc, jc + nb, kc, nc - nb, bbuf + nb * kc, p.tile.pack_b_rows);
      for (int64_t ic = m0; ic < m1; ic += mc_step) {               // loop 3
        const int64_t mc = std::min(mc_step, m1 - ic);
        // A's block packed, or read in place: then rows [ic, ic + ma) are, the rest packed.
        const int64_t ma = p.a_in_place ? mc / MR * MR : 0;
        if (ma < mc) pack_a(MR, p.ta, p.A, p.lda, ic + ma, pc, mc - ma, kc, abuf + ma * kc, p.tile.pack_a_rows);
        for (int64_t jr = 0; jr < nc; jr += NR) {                   // loop 2
          const int64_t nr = std::min(NR, nc - jr);
          const bool b_here = jr < nb;
          const T* b = b_here ? p.B + pc * p.ldb + jc + jr : bbuf + jr * kc;
          const int64_t rsb = b_here ? p.ldb : NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {                 // loop 1
            const int64_t mr = std::min(MR, mc - ir);
            const bool a_here = ir < ma;
            const T* a = !a_here ? abuf + ir * kc
                       : p.ta == Trans::No ? p.A + (ic + ir) * p.lda + pc : p.A + pc * p.lda + ic + ir;
            const int64_t rsa = a_here && p.ta == Trans::No ? p.lda : 1;
            const int64_t csa = !a_here ? MR : p.ta == Trans::No ? 1 : p.lda;
            T* c = p.C + (ic + ir) * p.ldc + jc + jr;
            if (mr == MR && nr == NR) {
              ukernel(kc, a, rsa, csa, b, rsb, p.alpha, beta, c, p.ldc);
            } else {  // edge tile: full tile into a buffer, then the valid part into C
              ukernel(kc, a, rsa, csa, b, rsb, p.alpha, T(0), edge, NR);
              for (int64_t i = 0; i < mr; ++i)
                for (int64_t j = 0; j < nr; ++j) {
                  T& cij = c[i * p.ldc + j];
                  cij = beta == T(0) ? edge[i * NR + j] : edge[i * NR + j] + beta * cij;
                }
            }
          }
          if (poll) progress_poll();  // a few microseconds of work per call (progress.h)
        }
      }
    }
  }
}

// Threads for a product of this size: at least kMinFlopsPerThread of work each.
int threads_for(int64_t M, int64_t N, int64_t K) {
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const int by_work = static_cast<int>(std::min<double>(flops / kMinFlopsPerThread, 1 << 20));
  return std::max(1, std::min(omp_get_max_threads(), by_work));
}

// A tm x tn grid of tiles for nt threads over mu x nu micro-tiles: the factorisation that
// minimises the largest tile's packing volume (rows + columns); fewer threads if none fits.
struct Grid {
  int tm, tn;
};
Grid choose_grid(int nt, int64_t mu, int64_t nu, int64_t MR, int64_t NR) {
  for (; nt > 1; --nt) {
    Grid best{0, 0};
    int64_t best_cost = 0;
    for (int tm = 1; tm <= nt; ++tm) {
      if (nt % tm) continue;
      const int tn = nt / tm;
      if (tm > mu || tn > nu) continue;
      const int64_t cost = (mu + tm - 1) / tm * MR + (nu + tn - 1) / tn * NR;
      if (best.tm == 0 || cost < best_cost) best = {tm, tn}, best_cost = cost;
    }
    if (best.tm) return best;
  }
  return {1, 1};
}

}  // namespace

template <class T>
void gemm_blocked_with(const Kernels& kernels, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K,
                       T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                       int64_t ldc) {
  if (gemm_prologue(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  const KernelSet<T>& ks = kernel_set<T>(kernels);

  // Tiny products: the direct path, where it takes them.
  if (ks.small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;

  const Tile<T>& tile = tile_for(ks, M, N, K);
  const int64_t MR = tile.blocking.MR, NR = tile.blocking.NR;
  const Problem<T> p{ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, tile,
                     kc_step_for(K, tile.blocking.KC), in_place_a(ta, M, N, K), in_place_b<T>(tb, M, ldb)};
  const int64_t mu = (M + MR - 1) / MR, nu = (N + NR - 1) / NR;
  const Grid g = choose_grid(threads_for(M, N, K), mu, nu, MR, NR);
  if (g.tm * g.tn == 1) {
    blocked_tile(p, 0, M, 0, N, true);
    return;
  }
  // Parallel regions cannot throw out: catch on the thread, rethrow after.
  std::exception_ptr error;
#pragma omp parallel num_threads(g.tm * g.tn)
  {
    // The team can be smaller than asked (a call from inside a parallel region without nested
    // parallelism gets one thread): each thread takes every team-size-th tile. A tile's result
    // does not depend on which thread computes it.
    for (int t = omp_get_thread_num(); t < g.tm * g.tn; t += omp_get_num_threads()) {
      const int ti = t / g.tn, tj = t % g.tn;
      const int64_t m0 = std::min(M, mu * ti / g.tm * MR), m1 = std::min(M, mu * (ti + 1) / g.tm * MR);
      const int64_t n0 = std::min(N, nu * tj / g.tn * NR), n1 = std::min(N, nu * (tj + 1) / g.tn * NR);
      try {
        if (m0 < m1 && n0 < n1) blocked_tile(p, m0, m1, n0, n1, t == 0);
      } catch (...) {
#pragma omp critical(hddp_gemm_error)
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

template void gemm_blocked_with<float>(const Kernels&, Trans, Trans, int64_t, int64_t, int64_t, float,
                                       const float*, int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_blocked_with<double>(const Kernels&, Trans, Trans, int64_t, int64_t, int64_t, double,
                                        const double*, int64_t, const double*, int64_t, double, double*,
                                        int64_t);

}  // namespace detail

template <class T>
void gemm_blocked(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  detail::gemm_blocked_with(detail::cpu_kernels(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template void gemm_blocked<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*,
                                  int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_blocked<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace hddp
