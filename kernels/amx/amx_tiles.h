#pragma once
// The AMX tile unit as the bf16 kernels use it: eight tile registers of 16 rows x 64 bytes, in
// one fixed roles plan (Intel's ISA manual, TDPBF16PS; the oneDNN brgemm idea):
//   tiles 0-3  accumulators, 16 x 16 float each, a 32 x 32 block of C
//   tiles 4, 5 A: 16 rows x 32 bf16 (rows 0-15 and 16-31 of the block; k along the row)
//   tiles 6, 7 B: 16 pair rows x 16 columns, a 32 x 16 matrix in "VNNI" pairs (pair row p holds
//              k = 2p and 2p + 1 of each column, interleaved; columns 0-15 and 16-31)
// The operations every tile program is written over (`Ops`): TileOps below (the instructions;
// include this header only in files built with -mamx-tile -mamx-bf16) or ModelOps
// (amx_tile_model.h: the same in plain C++, so the programs are tested on any CPU).
//   Ops::zero_acc()                      tiles 0-3 = 0
//   Ops::load_acc(c0, c1, c2, c3, stride) tiles 0-3 from memory (16 rows x 16 floats each)
//   Ops::load_a<I>(a, stride)            A tile I (tile 4 + I: 16 rows, stride in bytes)
//   Ops::load_b<J>(b, stride)            B tile J (tile 6 + J)
//   Ops::dot<I, J>()                     accumulator 2I + J += A tile I . B tile J
// A program interleaves the loads and products (load A0, B0, product 00, load B1, product 01,
// load A1, products 10, 11): each product starts as soon as its two tiles are in.
//   Ops::store_acc(c0, c1, c2, c3, stride)
// GCC's tile intrinsics take the tile number as a literal, hence one function per role.
#include <immintrin.h>

#include <cstdint>

namespace hddp::detail {

// Loads the one configuration (all eight tiles 16 rows x 64 bytes) on this thread, once; every
// tile program calls it before its first tile instruction (amx_tiles.cpp). Needs Linux's
// permission first (cpu_isa.h, amx_permission_error).
void amx_configure_tiles();

namespace {

struct TileOps {
  static void zero_acc() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  static void load_acc(const float* c0, const float* c1, const float* c2, const float* c3, int64_t stride) {
    _tile_loadd(0, c0, stride);
    _tile_loadd(1, c1, stride);
    _tile_loadd(2, c2, stride);
    _tile_loadd(3, c3, stride);
  }
  // A tile I (0: tile 4, 1: tile 5), B tile J (0: tile 6, 1: tile 7), accumulator 2I + J.
  template <int I>
  static void load_a(const void* a, int64_t stride) {
    if constexpr (I == 0) _tile_loadd(4, a, stride);
    else _tile_loadd(5, a, stride);
  }
  template <int J>
  static void load_b(const void* b, int64_t stride) {
    if constexpr (J == 0) _tile_loadd(6, b, stride);
    else _tile_loadd(7, b, stride);
  }
  template <int I, int J>
  static void dot() {
    if constexpr (I == 0 && J == 0) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (I == 0) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (J == 0) _tile_dpbf16ps(2, 5, 6);
    else _tile_dpbf16ps(3, 5, 7);
  }
  static void store_acc(float* c0, float* c1, float* c2, float* c3, int64_t stride) {
    _tile_stored(0, c0, stride);
    _tile_stored(1, c1, stride);
    _tile_stored(2, c2, stride);
    _tile_stored(3, c3, stride);
  }
};

}  // namespace

}  // namespace hddp::detail
