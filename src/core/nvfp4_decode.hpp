// Decoding NVFP4, written once for host and device: the E2M1 values, the second-level scale in its two
// conventions, and the job mxfp8_dequantize runs on an NVFP4 tensor. The format is Transformer Engine's
// (the "NVFP4 tensors" comment of mxfp8/tensor.h lists the TE files each rule was read from); the E4M3
// block scale decodes with mx_numerics.hpp's fp8_decode.
#pragma once

#include <cstdint>

#include "core/mx_numerics.hpp"
#include "core/scale_source.hpp"

namespace mxfp8 {

constexpr int64_t kNvfp4BlockSize = 16;  // values sharing one E4M3 block scale
constexpr float kE2m1Max = 6.0f;         // the largest E2M1 magnitude

// The value of a 4-bit E2M1 code (bit 3 sign, bits 2..1 exponent with bias 1, bit 0 mantissa; exponent 0
// is the subnormal 0 or 0.5). Exact in float; -0 for code 8.
MXFP8_HOST_DEVICE inline float e2m1_decode(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8) << 28;
  const uint32_t exponent = (code >> 1) & 0x3, mantissa = code & 0x1;
  if (exponent == 0) return bits_float(sign | (mantissa ? 0x3F000000u : 0u));  // +-0 or +-0.5
  return bits_float(sign | ((exponent + 126) << 23) | (mantissa << 22));
}

// Element `c` of a row of packed codes: the even element sits in the low nibble.
MXFP8_HOST_DEVICE inline uint8_t e2m1_code(const uint8_t *row, int64_t c) {
  const uint8_t byte = row[c >> 1];
  return (c & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
}

// TE's factor_inv of dequantize_nvfp4.cuh: 1 / (6 * E4M3_MAX) rounded once to float.
MXFP8_HOST_DEVICE inline float nvfp4_decode_factor(int32_t e4m3_max) {
  return 1.0f / (kE2m1Max * static_cast<float>(e4m3_max));
}

// The per-block multiplier TE's dequantize kernel computes: (e4m3(s) * amax) * factor, in float.
MXFP8_HOST_DEVICE inline float nvfp4_block_scale(uint8_t e4m3_scale, float amax, float factor) {
  return fp8_decode(e4m3_scale, false) * amax * factor;
}

// The second-level scale in the decode convention: amax / (6 * E4M3_MAX), one float division (what
// ModelOpt stores as weight_scale_2).
// A NaN amax gives the canonical NaN 0x7FFFFFFF, as the decode does: the host division would keep the
// amax's payload and the device's would not (the GPU check found the two differing).
MXFP8_HOST_DEVICE inline float nvfp4_decode_global_scale(float amax, int32_t e4m3_max) {
  const float s = amax / (kE2m1Max * static_cast<float>(e4m3_max));
  return s != s ? bits_float(0x7FFFFFFFu) : s;
}

// The encode convention, as TE's compute_global_encode_scaling_factor_FP4 (core_nvfp4.cuh) computes it:
// (E4M3_MAX * 6) / amax, then fminf with FLT_MAX (which also turns a NaN quotient into FLT_MAX, as fminf
// returns its non-NaN operand), then 1 for an amax of zero or a quotient of zero.
MXFP8_HOST_DEVICE inline float nvfp4_encode_global_scale(float amax, int32_t e4m3_max) {
  constexpr float kFloatMax = 3.40282346638528859812e+38f;
  float s = (static_cast<float>(e4m3_max) * kE2m1Max) / amax;
  if (s != s || s > kFloatMax) s = kFloatMax;
  if (amax == 0.0f || s == 0.0f) return 1.0f;
  return s;
}

// One direction of an NVFP4 tensor to decode: the stored matrix rows x cols (cols even), packed codes
// row-major (cols / 2 bytes a row), its block scales wherever they are stored (read in place, swizzled or
// not), amax per tensor or per row, into float32 or bfloat16 output, row-major.
struct Nvfp4DequantizeJob {
  const uint8_t *values;
  ScaleSource scales;  // rows x ceil(cols / 16)
  const float *amax;
  int32_t amax_per_row;
  int32_t e4m3_max;
  int32_t bf16_output;
  int64_t rows;
  int64_t cols;
  void *output;
};

// Output element (r, c) of the job, NaN canonical (0x7FFFFFFF) as on the GPU.
MXFP8_HOST_DEVICE inline float nvfp4_dequantize_element(const Nvfp4DequantizeJob &j, int64_t r, int64_t c) {
  const float amax = j.amax[j.amax_per_row ? r : 0];
  const float scale = nvfp4_block_scale(*scale_address(j.scales, r, c / kNvfp4BlockSize), amax,
                                        nvfp4_decode_factor(j.e4m3_max));
  const float v = e2m1_decode(e2m1_code(j.values + r * (j.cols / 2), c)) * scale;
  return v != v ? bits_float(0x7FFFFFFFu) : v;
}

// What the global-scale export computes: out[i] = one convention of amax[i], for `count` amaxes.
struct Nvfp4GlobalScaleJob {
  const float *amax;
  float *out;
  int64_t count;
  int32_t e4m3_max;
  int32_t encode;
};

MXFP8_HOST_DEVICE inline float nvfp4_global_scale(const Nvfp4GlobalScaleJob &j, int64_t i) {
  return j.encode ? nvfp4_encode_global_scale(j.amax[i], j.e4m3_max)
                  : nvfp4_decode_global_scale(j.amax[i], j.e4m3_max);
}

// Host loops (nvfp4_dequantize_cpu.cpp): done when they return.
void nvfp4_dequantize_host(const Nvfp4DequantizeJob &job);
void nvfp4_global_scales_host(const Nvfp4GlobalScaleJob *jobs, size_t count);

namespace cuda {
// The same on device memory, queued on `stream` (nvfp4_dequantize_cuda.cu). The global scales of many
// tensors (a plan's NVFP4 entries) go in as few launches as their jobs fit, not one launch per tensor.
void nvfp4_dequantize(const Nvfp4DequantizeJob &job, void *stream);
void nvfp4_global_scales(const Nvfp4GlobalScaleJob *jobs, size_t count, void *stream);
}  // namespace cuda

}  // namespace mxfp8
