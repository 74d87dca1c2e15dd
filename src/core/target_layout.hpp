// The engine layouts (mxfp8_layout) as index functions, usable on host and device: where scale (r, c) of
// an R x C matrix lies in a layout, and which scale (or padding) each byte of the layout holds. Adding a
// layout is one case in each function below plus one entry in api/layouts.cpp (its name, byte count
// and which directions it takes); the generic layout job (scale_copy.hpp) and its host and CUDA loops
// then write and read it with no code of their own.
#pragma once

#include <cstdint>

#include "mxfp8/mxfp8.h"
#include "core/swizzle_index.hpp"

namespace mxfp8 {

// DeepGEMM's packed UE8M0 scales, as verified against deepseek-ai/DeepGEMM (commit 54e2261):
//  - csrc/jit_kernels/impls/smxx_layout.hpp, get_mn_major_tma_aligned_packed_ue8m0_tensor: an int32
//    tensor [G, mn, ceil(sf_k/4)] with strides (ceil(sf_k/4) * mn_aligned, 1, mn_aligned), mn_aligned =
//    get_tma_aligned_size(mn, 4) (csrc/utils/math.hpp: 16 bytes / 4, so mn rounded up to 4);
//  - deep_gemm/include/deep_gemm/impls/smxx_layout.cuh, transpose_and_pack_fp32_into_ue8m0: int32 j of
//    a row holds K blocks 4j..4j+3, block 4j+b in bits 8b..8b+7 (the lowest byte first in memory);
//    blocks past sf_k are 0;
//  - rows mn..mn_aligned: that kernel leaves them unwritten, the torch path of the same function
//    (..._torch) writes zeros. We write zeros: nothing reads them, and an output never holds stale bytes.
constexpr int64_t kPackedScalesPerWord = 4;
constexpr int64_t kDeepGemmMnAlignment = 4;

// The bytes of an R x C matrix in `layout`, unchecked (api/layouts.cpp computes the same with checked
// arithmetic before any job exists, so here nothing can overflow).
MXFP8_HOST_DEVICE inline int64_t layout_size(int32_t layout, int64_t rows, int64_t cols) {
  switch (layout) {
    case MXFP8_LAYOUT_CUTLASS_128X4:
      return (rows + kTileRows - 1) / kTileRows * kTileRows * ((cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_LAYOUT_DEEPGEMM_PACKED:
      return (cols + kPackedScalesPerWord - 1) / kPackedScalesPerWord * kPackedScalesPerWord *
             ((rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment);
    default:  // MXFP8_LAYOUT_COMPACT
      return rows * cols;
  }
}

// Byte offset of scale (r, c), 0 <= r < rows, 0 <= c < cols.
MXFP8_HOST_DEVICE inline int64_t layout_offset(int32_t layout, int64_t rows, int64_t cols, int64_t r, int64_t c) {
  switch (layout) {
    case MXFP8_LAYOUT_CUTLASS_128X4:
      return swizzled_offset(r, c, (cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_LAYOUT_DEEPGEMM_PACKED: {
      // int32 (r, c / 4) of an MN-major [mn, ceil(sf_k / 4)] tensor with column stride mn_aligned;
      // little-endian, so the int32's lowest byte (the first in memory) holds the lowest K block.
      const int64_t mn_aligned = (rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment;
      return ((c / kPackedScalesPerWord) * mn_aligned + r) * kPackedScalesPerWord + c % kPackedScalesPerWord;
    }
    default:  // MXFP8_LAYOUT_COMPACT
      return r * cols + c;
  }
}

// The inverse: the scale that byte `offset` (< layout_size) holds, in *r and *c; false for padding.
MXFP8_HOST_DEVICE inline bool layout_element(int32_t layout, int64_t rows, int64_t cols, int64_t offset, int64_t *r,
                                             int64_t *c) {
  switch (layout) {
    case MXFP8_LAYOUT_CUTLASS_128X4: {
      const int64_t tile_cols = (cols + kTileCols - 1) / kTileCols;
      const int64_t tile = offset / kTileBytes, in_tile = offset % kTileBytes;
      *r = (tile / tile_cols) * kTileRows + ((in_tile % kLineBytes) / kTileCols) * kSubtileRows + in_tile / kLineBytes;
      *c = (tile % tile_cols) * kTileCols + in_tile % kTileCols;
      break;
    }
    case MXFP8_LAYOUT_DEEPGEMM_PACKED: {
      const int64_t mn_aligned = (rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment;
      const int64_t word = offset / kPackedScalesPerWord;
      *r = word % mn_aligned;
      *c = (word / mn_aligned) * kPackedScalesPerWord + offset % kPackedScalesPerWord;
      break;
    }
    default:  // MXFP8_LAYOUT_COMPACT
      *r = offset / cols;
      *c = offset % cols;
  }
  return *r < rows && *c < cols;
}

// Whether every aligned 4 bytes of the layout hold the scales (r, c0 .. c0 + 3) of one row, c0 a multiple
// of 4, so that byte `offset` % 4 == 0's element gives the whole word (its padding bytes being the
// columns >= C): true for the 128x4 and DeepGEMM layouts. The CUDA layout job then reads a row-major
// source one 32-bit word at a time.
MXFP8_HOST_DEVICE inline bool layout_packs_row_words(int32_t layout) {
  return layout == MXFP8_LAYOUT_CUTLASS_128X4 || layout == MXFP8_LAYOUT_DEEPGEMM_PACKED;
}

}  // namespace mxfp8
