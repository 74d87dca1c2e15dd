/* The FlashInfer TRT-LLM MoE layouts (MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, _TRTLLM_SHUFFLED_GATED) rebuilt the
 * way the consumers build them, one step at a time, never from the library's index functions:
 *   - vLLM swap_w13_to_w31 (gated only): the two halves of w13's rows swap, [gate; up] -> [up; gate];
 *   - FlashInfer get_reorder_rows_for_gated_act_gemm_row_indices (gated only): top = rows [0, (M+1)/2),
 *     bottom = the rest; out[0::2] = top, out[1::2] = bottom;
 *   - FlashInfer get_shuffle_matrix_a_row_indices(M, epilogue_tile_m = 128): its literal
 *     srcToDstBlk32RowMap table, new_row = old_row / 32 * 32 + map[old_row % 32], row_indices[new] = old;
 *   - values: x[row_indices] after each step; scales: the same gathers, then block_scale_interleave, the
 *     128x4 layout (ref_swizzled_index), padding zero.
 * Shared by test_trtllm_layout.c (host) and test_gpu_import.c (device). */
#ifndef MXFP8_TRTLLM_REFERENCE_H_
#define MXFP8_TRTLLM_REFERENCE_H_

#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const int64_t kRefSrcToDstBlk32RowMap[32] = {0, 8,  16, 24, 1, 9,  17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                                                    4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};

/* row_indices (destination row j takes source row idx[j]) of the whole per-expert permutation. */
static inline int64_t *ref_trtllm_row_indices(int64_t m, int gated) {
  int64_t *step = malloc(sizeof(int64_t) * (size_t)(m + 1)), *out = malloc(sizeof(int64_t) * (size_t)(m + 1));
  for (int64_t j = 0; j < m; ++j) step[j] = j;
  if (gated) {
    int64_t *swapped = malloc(sizeof(int64_t) * (size_t)(m + 1));
    const int64_t half = m / 2;
    for (int64_t j = 0; j < m; ++j) swapped[j] = j < half ? half + j : j - half; /* [up; gate] */
    const int64_t top = (m + 1) / 2;
    for (int64_t i = 0; i < top; ++i) step[2 * i] = swapped[i];
    for (int64_t i = 0; top + i < m; ++i) step[2 * i + 1] = swapped[top + i];
    free(swapped);
  }
  for (int64_t old = 0; old < m; ++old) {
    const int64_t new_row = old / 32 * 32 + kRefSrcToDstBlk32RowMap[old % 32];
    out[new_row] = step[old]; /* shuffle_matrix_a gathers the previous step's rows */
  }
  free(step);
  return out;
}

/* One expert's values (m x k) and scales S (m x c) in the layout: *values m * k bytes, *scales
 * m * roundup(c, 4) bytes (m % 128 == 0). */
static inline void ref_trtllm(const uint8_t *values, const uint8_t *s, int64_t m, int64_t k, int64_t c, int gated,
                              uint8_t *values_out, uint8_t *scales_out) {
  int64_t *idx = ref_trtllm_row_indices(m, gated);
  uint8_t *permuted = malloc((size_t)(m * c) + 1);
  for (int64_t j = 0; j < m; ++j) {
    memcpy(values_out + j * k, values + idx[j] * k, (size_t)k);
    memcpy(permuted + j * c, s + idx[j] * c, (size_t)c);
  }
  const int64_t cp = ref_round_up(c, 4);
  memset(scales_out, 0, (size_t)(m * cp));
  for (int64_t y = 0; y < m; ++y)
    for (int64_t x = 0; x < c; ++x) scales_out[ref_swizzled_index(y, x, cp)] = permuted[y * c + x];
  free(permuted);
  free(idx);
}

#endif
