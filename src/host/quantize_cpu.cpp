// The host loop of mxfp8_quantize. Per block: the amax (every NaN skipped, as the GPU's max.f32 skips it,
// except under compressed-tensors' rule, where a NaN counts as +Inf),
// the E8M0 exponent, then every element multiplied by the block's reciprocal and encoded; see
// mx_numerics.hpp. The elements are handled 32 at a time (one block: a row's 32 values, or one value of
// each of 32 columns) in the branch-free forms of mx_numerics_lanes.hpp, so the compiler vectorizes them
// (host_isa.hpp picks AVX-512, AVX2 or the baseline build per call); scales are chosen one block at a time
// in scalar code. Calls are split across threads by rows (host_threads.hpp): single rows for rowwise-only
// 1x32 quantization, whole 32-row blocks otherwise, so a block never spans two threads.
#include <algorithm>
#include <cstring>

#include "host/host_isa.hpp"
#include "host/host_threads.hpp"
#include "host/mx_numerics_lanes.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"

namespace mxfp8 {
namespace {

constexpr int kLanes = static_cast<int>(kBlockSize);  // one block: kLanes / N vectors of N lanes

// How each input type is read: N elements at a time as float bits.
struct Bf16Input {
  using Element = uint16_t;
  template <int N>
  MXFP8_ALWAYS_INLINE static Lanes<N> load(const uint16_t *p) { return load_bf16_lanes<N>(p); }
};
struct Fp16Input {
  using Element = uint16_t;
  template <int N>
  MXFP8_ALWAYS_INLINE static Lanes<N> load(const uint16_t *p) { return load_fp16_lanes<N>(p); }
};
struct Fp32Input {
  using Element = float;
  template <int N>
  MXFP8_ALWAYS_INLINE static Lanes<N> load(const float *p) { return load_u32_lanes<N>(p); }
};

struct BlockScaler {
  bool e5m2;
  ScaleRounding rounding;
  uint32_t nan_key;  // what a NaN element counts as in the amax (magnitude_key_lanes): 0, or +Inf's bits
  BlockScaler(bool five_two, ScaleRounding rule)
      : e5m2(five_two), rounding(rule), nan_key(nan_counts_in_amax(rule) ? 0x7F800000u : 0u) {}
  uint8_t exponent(uint32_t amax_bits) const { return block_exponent(bits_float(amax_bits), rounding, e5m2); }
  float reciprocal(uint8_t e) const { return block_reciprocal(e, rounding); }
};

// A tile of up to 32 rows by exactly 32 columns: where it is read and written. Edge tiles narrower than
// 32 columns go through a zero-padded copy (Padded below); zeros never raise an amax.
template <class In>
struct Tile {
  const typename In::Element *in;
  int64_t in_stride;  // elements
  uint8_t *out;
  int64_t out_stride;
  int64_t rows;
};

// 32 values of one row (or the amaxes or reciprocals of 32 columns), as kLanes / N vectors.
template <int N>
struct Row32 {
  static constexpr int kVectors = kLanes / N;
  typename Lanes<N>::U32 v[kVectors];
};

// The loops over a row's vectors are unrolled so that the vectors stay in registers.
#define MXFP8_UNROLL _Pragma("GCC unroll 8")

template <class In, int N>
MXFP8_ALWAYS_INLINE void load_row(const typename In::Element *p, Row32<N> &x) {
  MXFP8_UNROLL for (int k = 0; k < Row32<N>::kVectors; ++k) x.v[k] = In::template load<N>(p + k * N).v;
}

template <int N>
MXFP8_ALWAYS_INLINE void max_row(Row32<N> &acc, const Row32<N> &x, uint32_t nan_key) {
  MXFP8_UNROLL for (int k = 0; k < Row32<N>::kVectors; ++k)
    acc.v[k] = max_lanes<N>(acc.v[k], magnitude_key_lanes<N>(x.v[k], nan_key).v).v;
}

template <int N>
MXFP8_ALWAYS_INLINE uint32_t row_max(const Row32<N> &acc) {
  typename Lanes<N>::U32 m = acc.v[0];
  MXFP8_UNROLL for (int k = 1; k < Row32<N>::kVectors; ++k) m = max_lanes<N>(m, acc.v[k]).v;
  return horizontal_max<N>(m);
}

// The reciprocals a row's elements are multiplied by: one for all (a rowwise or 32x32 block), or one per
// column (columnwise 1x32).
template <int N>
struct SharedReciprocal {
  float r;
  MXFP8_ALWAYS_INLINE float operator[](int) const { return r; }
};
template <int N>
struct ColumnReciprocals {
  typename Lanes<N>::F32 r[kLanes / N];
  MXFP8_ALWAYS_INLINE const typename Lanes<N>::F32 &operator[](int k) const { return r[k]; }
};

// Element i times its reciprocal, encoded, to `out`.
template <bool E5M2, int N, class Reciprocal>
MXFP8_ALWAYS_INLINE void encode_row(const Row32<N> &x, const Reciprocal &reciprocal, uint8_t *out) {
  MXFP8_UNROLL for (int k = 0; k < Row32<N>::kVectors; ++k)
    store_u8_lanes<N>(out + k * N, fp8_encode_lanes<E5M2, N>(multiply_lanes<N>(x.v[k], reciprocal[k]).v).v);
}

// One rowwise block (row r of the tile is 32 consecutive elements of one input row): returns its scale.
template <class In, bool E5M2, int N>
MXFP8_ALWAYS_INLINE uint8_t quantize_row_block(const Tile<In> &t, const BlockScaler &scaler) {
  Row32<N> x, amax{};
  load_row<In, N>(t.in, x);
  max_row<N>(amax, x, scaler.nan_key);
  const uint8_t e = scaler.exponent(row_max<N>(amax));
  encode_row<E5M2, N>(x, SharedReciprocal<N>{scaler.reciprocal(e)}, t.out);
  return e;
}

// The amax of each of the tile's 32 columns.
template <class In, int N>
MXFP8_ALWAYS_INLINE Row32<N> column_amax(const Tile<In> &t, uint32_t nan_key) {
  Row32<N> amax{}, x;
  for (int64_t r = 0; r < t.rows; ++r) {
    load_row<In, N>(t.in + r * t.in_stride, x);
    max_row<N>(amax, x, nan_key);
  }
  return amax;
}

// Every element of the tile times its column's reciprocal, encoded.
template <class In, bool E5M2, int N, class Reciprocal>
MXFP8_ALWAYS_INLINE void encode_tile(const Tile<In> &t, const Reciprocal &reciprocal) {
  Row32<N> x;
  for (int64_t r = 0; r < t.rows; ++r) {
    load_row<In, N>(t.in + r * t.in_stride, x);
    encode_row<E5M2, N>(x, reciprocal, t.out + r * t.out_stride);
  }
}

// Columnwise 1x32: each column of the tile is one block; its 32 scales go to `scales`.
template <class In, bool E5M2, int N>
MXFP8_ALWAYS_INLINE void quantize_column_tile(const Tile<In> &t, const BlockScaler &scaler, uint8_t *scales) {
  const Row32<N> amax = column_amax<In, N>(t, scaler.nan_key);
  uint32_t column_amax_bits[kLanes];
  std::memcpy(column_amax_bits, amax.v, sizeof column_amax_bits);
  float reciprocal[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    scales[i] = scaler.exponent(column_amax_bits[i]);
    reciprocal[i] = scaler.reciprocal(scales[i]);
  }
  ColumnReciprocals<N> r;
  std::memcpy(r.r, reciprocal, sizeof r.r);
  encode_tile<In, E5M2, N>(t, r);
}

// A 32x32 block: one scale for the whole tile, returned.
template <class In, bool E5M2, int N>
MXFP8_ALWAYS_INLINE uint8_t quantize_square_tile(const Tile<In> &t, const BlockScaler &scaler) {
  const uint8_t e = scaler.exponent(row_max<N>(column_amax<In, N>(t, scaler.nan_key)));
  encode_tile<In, E5M2, N>(t, SharedReciprocal<N>{scaler.reciprocal(e)});
  return e;
}

// A tile narrower than 32 columns (the last `cols` columns of the input), through zero-padded copies.
template <class In>
struct Padded {
  typename In::Element in[kLanes * kLanes] = {};
  uint8_t out[kLanes * kLanes];
  Tile<In> tile;
  const Tile<In> real;  // a copy: callers pass temporaries
  int64_t cols;
  Padded(const Tile<In> &t, int64_t c) : tile{in, kLanes, out, kLanes, t.rows}, real(t), cols(c) {
    for (int64_t r = 0; r < t.rows; ++r)
      std::memcpy(in + r * kLanes, t.in + r * t.in_stride, static_cast<size_t>(cols) * sizeof(in[0]));
  }
  void write_back() const {
    for (int64_t r = 0; r < real.rows; ++r)
      std::memcpy(real.out + r * real.out_stride, out + r * kLanes, static_cast<size_t>(cols));
  }
};

// Rows [r0, r1) of the job; r0 is a multiple of 32 unless the job is rowwise-only 1x32.
template <class In, bool E5M2>
struct QuantizeRows {
  template <int N>
  MXFP8_ALWAYS_INLINE static void run(const QuantizeJob &j, const int64_t &r0, const int64_t &r1) {
    const int64_t K = j.cols, full_blocks = K / kBlockSize, tail = K - full_blocks * kBlockSize;
    const auto *input = static_cast<const typename In::Element *>(j.input);
    const BlockScaler scaler(E5M2, j.rounding);
    if (j.row_values && !j.block_32x32) {
      for (int64_t r = r0; r < r1; ++r) {
        const Tile<In> row{input + r * K, 0, j.row_values + r * K, 0, 1};
        for (int64_t b = 0; b < full_blocks; ++b) {
          const Tile<In> t{row.in + b * kBlockSize, 0, row.out + b * kBlockSize, 0, 1};
          j.row_scales.data[scale_offset(j.row_scales, r, b)] = quantize_row_block<In, E5M2, N>(t, scaler);
        }
        if (tail) {
          Padded<In> p(Tile<In>{row.in + full_blocks * kBlockSize, 0, row.out + full_blocks * kBlockSize, 0, 1}, tail);
          j.row_scales.data[scale_offset(j.row_scales, r, full_blocks)] = quantize_row_block<In, E5M2, N>(p.tile, scaler);
          p.write_back();
        }
      }
    }
    if (!j.col_values && !j.block_32x32) return;
    // Tiles of 32 rows: columnwise 1x32 blocks, or 32x32 blocks for either direction.
    for (int64_t rb = r0 / kBlockSize; rb * kBlockSize < r1; ++rb) {
      const int64_t first_row = rb * kBlockSize, rows = std::min(kBlockSize, r1 - first_row);
      uint8_t *values = j.block_32x32 && j.row_values ? j.row_values : j.col_values;
      for (int64_t cb = 0; cb * kBlockSize < K; ++cb) {
        const int64_t c0 = cb * kBlockSize, cols = std::min(kBlockSize, K - c0);
        const Tile<In> t{input + first_row * K + c0, K, values + first_row * K + c0, K, rows};
        if (j.block_32x32) {
          uint8_t e;
          if (cols == kBlockSize) {
            e = quantize_square_tile<In, E5M2, N>(t, scaler);
          } else {
            Padded<In> p(t, cols);
            e = quantize_square_tile<In, E5M2, N>(p.tile, scaler);
            p.write_back();
          }
          if (j.row_values && j.col_values)  // both directions hold the same values
            for (int64_t r = first_row; r < first_row + rows; ++r)
              std::memcpy(j.col_values + r * K + c0, j.row_values + r * K + c0, static_cast<size_t>(cols));
          if (j.row_values)  // the block's scale on each of its rows
            for (int64_t r = first_row; r < first_row + rows; ++r) j.row_scales.data[scale_offset(j.row_scales, r, cb)] = e;
          if (j.col_values)  // and on each of its columns
            for (int64_t c = c0; c < c0 + cols; ++c) j.col_scales.data[scale_offset(j.col_scales, rb, c)] = e;
        } else {
          uint8_t scales[kLanes];
          if (cols == kBlockSize) {
            quantize_column_tile<In, E5M2, N>(t, scaler, scales);
          } else {
            Padded<In> p(t, cols);
            quantize_column_tile<In, E5M2, N>(p.tile, scaler, scales);
            p.write_back();
          }
          for (int64_t i = 0; i < cols; ++i) j.col_scales.data[scale_offset(j.col_scales, rb, c0 + i)] = scales[i];
        }
      }
    }
  }
};

void zero_padding(const ScaleOut &s) {
  if (s.data && s.padded) std::memset(s.data, 0, static_cast<size_t>(s.bytes));
}

template <class In, bool E5M2>
void quantize_typed(const QuantizeJob &j) {
  const int64_t M = j.rows;
  const int64_t unit_rows = j.block_32x32 || j.col_values ? kBlockSize : 1;
  const int64_t outputs = (j.row_values ? 1 : 0) + (j.col_values ? 1 : 0);
  const int64_t bytes = M * j.cols * (static_cast<int64_t>(sizeof(typename In::Element)) + outputs);
  parallel_for(ceil_div(M, unit_rows), bytes, [&](int64_t begin, int64_t end) {
    run_for_host_isa<QuantizeRows<In, E5M2>>(j, begin * unit_rows, std::min(end * unit_rows, M));
  });
}

template <class In>
void quantize_input(const QuantizeJob &j) {
  if (j.e5m2) return quantize_typed<In, true>(j);
  quantize_typed<In, false>(j);
}

}  // namespace

void quantize_host(const QuantizeJob &j) {
  zero_padding(j.row_scales);
  zero_padding(j.col_scales);
  switch (j.input_type) {
    case InputType::BFloat16: return quantize_input<Bf16Input>(j);
    case InputType::Float16: return quantize_input<Fp16Input>(j);
    case InputType::Float32: return quantize_input<Fp32Input>(j);
  }
}

}  // namespace mxfp8
