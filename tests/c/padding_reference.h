/* An engine's padding of one expert, written from vLLM 0.33's align_mxfp8_moe_weights_for_fi_trtllm (and
 * align_moe_weights_for_fi) as it reads, never from the library's index functions: the rows of w13
 * [gate; up] (gated) are padded half by half, gate rows to 0 .. I - 1 and up rows to I' .. I' + I - 1 of
 * 2 I' = 2 roundup(I, rows_to); other weights' rows to roundup(N, rows_to); K to roundup(K, cols_to);
 * padding values 0 and padding scales `pad` (vLLM: 127), the scale matrix becoming N' x K' / 32.
 * Shared by test_convert_padding.c (host) and test_gpu_trtllm.c (device). */
#ifndef MXFP8_PADDING_REFERENCE_H_
#define MXFP8_PADDING_REFERENCE_H_

#include <stdlib.h>
#include <string.h>

#include "test_support.h"

struct ref_padded {
  int64_t n, k, c; /* the padded rows, K and scale columns */
  uint8_t *values; /* n x k */
  uint8_t *scales; /* n x c, compact */
};

/* One expert's values (n x k) and compact scales (n x ceil(k / 32)) padded; rows_to / cols_to 0: none. */
static inline struct ref_padded ref_pad_expert(const uint8_t *values, const uint8_t *scales, int64_t n, int64_t k,
                                               int64_t rows_to, int64_t cols_to, int gated, uint8_t pad) {
  const int64_t c = ref_ceil_div(k, 32), halves = gated ? 2 : 1, half = n / halves;
  struct ref_padded p;
  p.n = rows_to > 1 ? halves * ref_round_up(half, rows_to) : n;
  p.k = cols_to > 0 ? ref_round_up(k, cols_to) : k;
  p.c = cols_to > 0 ? p.k / 32 : c;
  p.values = calloc((size_t)(p.n * p.k) + 1, 1);
  p.scales = malloc((size_t)(p.n * p.c) + 1);
  memset(p.scales, pad, (size_t)(p.n * p.c));
  const int64_t padded_half = p.n / halves;
  for (int64_t h = 0; h < halves; ++h)
    for (int64_t i = 0; i < half; ++i) {
      const int64_t from = h * half + i, to = h * padded_half + i;
      memcpy(p.values + to * p.k, values + from * k, (size_t)k);
      memcpy(p.scales + to * p.c, scales + from * c, (size_t)c);
    }
  return p;
}

static inline void ref_padded_free(struct ref_padded *p) {
  free(p->values);
  free(p->scales);
}

#endif
