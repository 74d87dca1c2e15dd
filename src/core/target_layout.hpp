// The engine layouts (mxfp8_scale_layout) as index functions, usable on host and device: where scale (r, c) of
// an R x C matrix lies in a layout, and which scale (or padding) each byte of the layout holds. Adding a
// layout is one case in each function below plus one entry in api/layouts.cpp (its name, byte count
// and which directions it takes); the generic layout job (scale_job.hpp) and its host and CUDA loops
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

// DeepGEMM's float32 scales on Hopper (MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32), as SGLang builds them
// (sglang/srt/layers/quantization/fp8.py, Fp8LinearMethod._process_mxfp8_linear_weight_scale, when
// DEEPGEMM_SCALE_UE8M0 is off): (u8.to(int32) << 23).view(float32), row-major [n, k / 32]. An E8M0 byte
// is a float32's exponent field, so each scale takes one little-endian float32 whose two high bytes
// hold it and whose other bits are zero.
constexpr int kFloat32ExponentShift = 23;
constexpr int64_t kFloat32Bytes = 4;

// ---- The FlashInfer TRT-LLM MoE layouts (MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, _TRTLLM_SHUFFLED_GATED) ----
//
// What vLLM's FlashInfer TRT-LLM MXFP8 MoE backend loads (vLLM prepare_fp8_moe_layer_for_fi with
// is_trtllm and _shuffle_mxfp8_moe_weights; FlashInfer's test_trtllm_gen_fused_moe.py does the same), per
// expert, for a weight of M rows (M % 128 == 0) and its scales S (M x C):
//
//  1. w13 of a gated activation (SwiGLU; _GATED only). The checkpoint and vLLM's w13_weight hold
//     [gate (w1) rows 0 .. N-1; up (w3) rows N .. 2N-1], M = 2N.
//     a. vLLM swap_w13_to_w31: the halves swap to [up; gate] (FlashInfer's gated GEMM wants w3 first).
//     b. FlashInfer reorder_rows_for_gated_act_gemm (get_reorder_rows_for_gated_act_gemm_row_indices):
//        row 2i <- row i, row 2i + 1 <- row N + i, interleaving the two halves.
//     Together: row 2i <- up_i = source row N + i, row 2i + 1 <- gate_i = source row i.
//     w2 (and w13 of a non-gated activation) skips this step (MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED).
//  2. FlashInfer shuffle_matrix_a with epilogue_tile_m = 128 (get_shuffle_matrix_a_row_indices): 128 %
//     128 == 0 selects blocks of 32 rows and srcToDstBlk32RowMap = {0, 8, 16, 24, 1, 9, 17, 25, ...,
//     7, 15, 23, 31}: row 32b + i moves to row 32b + map[i], map[i] = 8 * (i % 4) + i / 4. So row
//     32b + k of the result is row 32b + 4 * (k % 8) + k / 8 of its input.
//  3. Values: rows permuted by 1 (when gated) then 2; each row's K bytes unchanged.
//     Scales: FlashInfer shuffle_matrix_sf_a (num_elts_per_sf 32): the same row permutation of S
//     (get_shuffle_matrix_sf_a_row_indices is get_shuffle_matrix_a_row_indices, and asserts M % 128 ==
//     0), then block_scale_interleave: the 128x4 layout of cuBLAS (get_sf_out_offset_128x4 is
//     swizzled_offset), columns padded to roundup(C, 4) with zeros, M * roundup(C, 4) bytes per expert.
//
// vLLM then keeps w13_weight [E, 2N, K] / w2_weight [E, H, N] (fp8) and reshapes the scale bytes back to
// the parameter's shape [E, M, C] (which holds them when C % 4 == 0, as vLLM's sizes require).

// Destination row of shuffle_matrix_a's row permutation for input row t, and its inverse.
MXFP8_HOST_DEVICE inline int64_t trtllm_shuffled_row(int64_t t) {
  const int64_t i = t % 32;
  return t - i + 8 * (i % 4) + i / 4;
}
// Int: int64_t on the host; uint32_t in the CUDA row kernel (permute_rows_cuda.cu), where rows < 2^31
// and unsigned 32-bit math makes these a few shifts and adds.
template <class Int>
MXFP8_HOST_DEVICE inline Int trtllm_unshuffled_row(Int d) {
  const Int k = d % 32;
  return d - k + 4 * (k % 8) + k / 8;
}

// The source row (of `rows`, one expert) that destination row d of a TRT-LLM layout holds: the value
// rows and the scale rows alike. Identity for every other layout.
template <class Int>
MXFP8_HOST_DEVICE inline Int layout_source_row(int32_t layout, Int rows, Int d) {
  if (layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED) return trtllm_unshuffled_row(d);
  if (layout != MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) return d;
  const Int t = trtllm_unshuffled_row(d), half = rows / 2;  // t: the row of the interleaved matrix
  return t % 2 == 0 ? half + t / 2 : t / 2;                  // up_i at 2i, gate_i at 2i + 1
}

// Its inverse: the destination row of source row s.
MXFP8_HOST_DEVICE inline int64_t layout_destination_row(int32_t layout, int64_t rows, int64_t s) {
  if (layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED) return trtllm_shuffled_row(s);
  if (layout != MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) return s;
  const int64_t half = rows / 2;
  return trtllm_shuffled_row(s < half ? 2 * s + 1 : 2 * (s - half));
}

MXFP8_HOST_DEVICE inline bool is_trtllm_layout(int32_t layout) {
  return layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
}

// The bytes of an R x C matrix in `layout`, unchecked (api/layouts.cpp computes the same with checked
// arithmetic before any job exists, so here nothing can overflow).
MXFP8_HOST_DEVICE inline int64_t layout_size(int32_t layout, int64_t rows, int64_t cols) {
  switch (layout) {
    case MXFP8_SCALE_LAYOUT_128X4:
      return (rows + kTileRows - 1) / kTileRows * kTileRows * ((cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED:
      return (cols + kPackedScalesPerWord - 1) / kPackedScalesPerWord * kPackedScalesPerWord *
             ((rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment);
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED:  // rows % 128 == 0 (api/layouts.cpp checks it)
      return rows * ((cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32:
      return rows * cols * kFloat32Bytes;
    default:  // MXFP8_SCALE_LAYOUT_COMPACT
      return rows * cols;
  }
}

// Byte offset of scale (r, c), 0 <= r < rows, 0 <= c < cols: of its float32 for
// MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 (layout_decode reads the scale there).
MXFP8_HOST_DEVICE inline int64_t layout_offset(int32_t layout, int64_t rows, int64_t cols, int64_t r, int64_t c) {
  switch (layout) {
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32:
      return (r * cols + c) * kFloat32Bytes;
    case MXFP8_SCALE_LAYOUT_128X4:
      return swizzled_offset(r, c, (cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED:
      return swizzled_offset(layout_destination_row(layout, rows, r), c, (cols + kTileCols - 1) / kTileCols * kTileCols);
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED: {
      // int32 (r, c / 4) of an MN-major [mn, ceil(sf_k / 4)] tensor with column stride mn_aligned;
      // little-endian, so the int32's lowest byte (the first in memory) holds the lowest K block.
      const int64_t mn_aligned = (rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment;
      return ((c / kPackedScalesPerWord) * mn_aligned + r) * kPackedScalesPerWord + c % kPackedScalesPerWord;
    }
    default:  // MXFP8_SCALE_LAYOUT_COMPACT
      return r * cols + c;
  }
}

// The inverse: the scale that byte `offset` (< layout_size) holds, in *r and *c; false for padding.
MXFP8_HOST_DEVICE inline bool layout_element(int32_t layout, int64_t rows, int64_t cols, int64_t offset, int64_t *r,
                                             int64_t *c) {
  switch (layout) {
    case MXFP8_SCALE_LAYOUT_128X4:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED: {
      const int64_t tile_cols = (cols + kTileCols - 1) / kTileCols;
      const int64_t tile = offset / kTileBytes, in_tile = offset % kTileBytes;
      *r = (tile / tile_cols) * kTileRows + ((in_tile % kLineBytes) / kTileCols) * kSubtileRows + in_tile / kLineBytes;
      *c = (tile % tile_cols) * kTileCols + in_tile % kTileCols;
      // The TRT-LLM layouts: *r is a row of the permuted matrix (rows % 128 == 0: no padding rows).
      if (*r < rows) *r = layout_source_row(layout, rows, *r);
      break;
    }
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED: {
      const int64_t mn_aligned = (rows + kDeepGemmMnAlignment - 1) / kDeepGemmMnAlignment * kDeepGemmMnAlignment;
      const int64_t word = offset / kPackedScalesPerWord;
      *r = word % mn_aligned;
      *c = (word / mn_aligned) * kPackedScalesPerWord + offset % kPackedScalesPerWord;
      break;
    }
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32:  // all four bytes of a float32 belong to its scale (layout_encode)
      *r = offset / kFloat32Bytes / cols;
      *c = offset / kFloat32Bytes % cols;
      break;
    default:  // MXFP8_SCALE_LAYOUT_COMPACT
      *r = offset / cols;
      *c = offset % cols;
  }
  return *r < rows && *c < cols;
}

// Byte `offset` of the layout when it belongs to scale `e` (layout_element true): the scale itself, but
// for MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 the byte of e << 23 that the offset is in.
MXFP8_HOST_DEVICE inline uint8_t layout_encode(int32_t layout, uint8_t e, int64_t offset) {
  if (layout != MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) return e;
  return static_cast<uint8_t>((static_cast<uint32_t>(e) << kFloat32ExponentShift) >> (8 * (offset % kFloat32Bytes)));
}

// The scale at `at` (layout_offset's byte of it): the byte, or a float32's exponent field.
MXFP8_HOST_DEVICE inline uint8_t layout_decode(int32_t layout, const uint8_t *at) {
  if (layout != MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) return *at;
  return static_cast<uint8_t>((at[3] << 1) | (at[2] >> 7));  // bits 23..30, little-endian
}

// Whether every aligned 4 bytes of the layout hold the scales (r, c0 .. c0 + 3) of one row, c0 a multiple
// of 4, so that byte `offset` % 4 == 0's element gives the whole word (its padding bytes being the
// columns >= C): true for the 128x4, DeepGEMM and TRT-LLM layouts (the last permute whole rows). The CUDA layout job then reads a row-major
// source one 32-bit word at a time.
MXFP8_HOST_DEVICE inline bool layout_packs_row_words(int32_t layout) {
  return layout == MXFP8_SCALE_LAYOUT_128X4 || layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED || is_trtllm_layout(layout);
}

}  // namespace mxfp8
