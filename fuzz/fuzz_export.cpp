// libFuzzer harness over the whole host path: descriptor and option validation, mxfp8_tensor_create,
// mxfp8_export_components, mxfp8_export_scales_batched, and the swizzle pair. The input bytes choose
// shapes, dtypes, strides, layouts, struct sizes and option values, valid or not. Every buffer is
// allocated as large as its description claims (the library trusts that much, as any C API must), so
// ASan reports any read or write outside what a caller promised. On success the exported scales are
// checked against a reference built here from the layout's permute form: a wrong byte aborts.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <mxfp8/mxfp8.h>

#include "fuzz_support.hpp"

namespace {

using fuzz::Reader;
using fuzz::ref_swizzled_index;
using fuzz::round_up;

int deleter_calls = 0;
void count_deleter(DLManagedTensorVersioned *) { ++deleter_calls; }

// A host tensor whose memory covers every element its shape and strides reach.
struct HostTensor {
  DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
  std::vector<uint8_t> bytes;
  bool too_big = false;  // more bytes than a unit may fill in time (then it is skipped)

  HostTensor(Reader &in, std::vector<int64_t> dims, uint8_t code, bool strided) : shape(std::move(dims)) {
    int64_t extent = 1;
    bool empty = false;
    for (int64_t d : shape) empty |= d == 0;
    if (strided) {
      strides.resize(shape.size());
      for (size_t i = 0; i < shape.size(); ++i) strides[i] = in.below(600) - (in.byte() % 16 == 0 ? 300 : 0);
      for (size_t i = 0; i < shape.size(); ++i)
        if (!empty && strides[i] > 0) extent += (shape[i] - 1) * strides[i];
    } else {
      for (int64_t d : shape) extent *= d;
    }
    // A strided (90000, 1) scale buffer with a row stride of 600 is 54 MB, filled byte by byte under ASan:
    // longer than -timeout=10 on a loaded machine, and nothing a smaller buffer does not cover.
    too_big = !empty && extent > (int64_t{1} << 22);
    bytes.resize(static_cast<size_t>(empty || too_big ? 1 : extent) + 1);
    for (auto &b : bytes) b = static_cast<uint8_t>(1 + in.byte() % 254);
    managed.deleter = in.byte() % 2 ? count_deleter : nullptr;
    // Now and then another DLPack major version, which must be refused before any other field is read.
    managed.version = DLPackVersion{in.byte() % 32 == 0 ? static_cast<uint32_t>(in.byte() % 4) : DLPACK_MAJOR_VERSION,
                                    static_cast<uint32_t>(in.byte() % 4)};
    DLTensor &t = managed.dl_tensor;
    t.data = bytes.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = DLDataType{code, 8, 1};
    t.shape = shape.data();
    t.strides = strided ? strides.data() : nullptr;
  }
  // A negative stride that matters: on a dimension of more than one element, in a non-empty tensor.
  bool has_negative_stride() const {
    bool negative = false;
    for (size_t i = 0; i < strides.size(); ++i) {
      if (shape[i] == 0) return false;
      negative |= strides[i] < 0 && shape[i] > 1;
    }
    return negative;
  }
};

uint8_t pick_code(Reader &in) {
  static const uint8_t codes[] = {kDLUInt, kDLUInt, kDLFloat8_e4m3fn, kDLFloat8_e5m2, kDLFloat8_e8m0fnu, kDLInt};
  return codes[in.byte() % sizeof codes];
}

// The scale expected at (r, c) of the compact matrix, read the way the layout says.
uint8_t expected_scale(const HostTensor &buf, bool swizzled, bool columnwise, int64_t r, int64_t c, int64_t rows,
                       int64_t cols) {
  if (swizzled)
    return columnwise ? buf.bytes[ref_swizzled_index(c, r, round_up(rows, 4))]
                      : buf.bytes[ref_swizzled_index(r, c, round_up(cols, 4))];
  const int64_t row_cols = buf.shape.back();
  const int64_t row_stride = buf.strides.empty() || buf.shape.size() < 2 ? row_cols : buf.strides[buf.shape.size() - 2];
  return buf.bytes[static_cast<size_t>(r * row_stride + c)];
}

uint8_t read_element(const DLTensor &t, int64_t index) {
  int64_t offset = 0;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    offset += (index % t.shape[i]) * t.strides[i];
    index /= t.shape[i];
  }
  return static_cast<const uint8_t *>(t.data)[t.byte_offset + static_cast<uint64_t>(offset)];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  const int ndim = 1 + in.byte() % 3;
  std::vector<int64_t> shape(ndim);
  for (auto &d : shape) d = in.byte() % 8 == 0 ? 0 : 1 + in.below(in.byte() % 2 ? 40 : 300);
  const bool columnwise = in.byte() % 2;
  const bool swizzled = in.byte() % 2;
  int64_t m = 1;
  for (int i = 0; i + 1 < ndim; ++i) m *= shape[i];
  const int64_t k = shape.back();
  // Three dimensions of up to 300 fill 27 MB byte by byte under ASan, which takes longer than the 10 s
  // -timeout on a loaded machine: the harness, not the library, was slow. Larger shapes teach nothing new.
  if (m * k > (int64_t{1} << 21)) return 0;
  int64_t rows = columnwise ? (m + 31) / 32 : m, cols = columnwise ? k : (k + 31) / 32;

  // The data: usually the logical shape, sometimes another one.
  std::vector<int64_t> data_shape = shape;
  if (in.byte() % 8 == 0) data_shape[in.byte() % ndim] += 1;
  HostTensor values(in, data_shape, pick_code(in), in.byte() % 8 == 0);
  if (values.too_big) return 0;

  // The scales: compact, TE-padded, exactly swizzled, or something else.
  std::vector<int64_t> scale_shape;
  switch (in.byte() % 5) {
    case 0: scale_shape = {rows, cols}; break;
    case 1:
      scale_shape = columnwise ? std::vector<int64_t>{round_up(rows, 4), round_up(cols, 128)}
                               : std::vector<int64_t>{round_up(rows, 128), round_up(cols, 4)};
      break;
    case 2: scale_shape = {round_up(swizzled && columnwise ? cols : rows, 128) *
                           round_up(swizzled && columnwise ? rows : cols, 4)}; break;
    case 3: scale_shape = {in.below(400), in.below(40)}; break;
    default: scale_shape = {in.below(4), in.below(200), in.below(8)}; break;
  }
  HostTensor scales(in, scale_shape, pick_code(in), in.byte() % 4 == 0);
  if (scales.too_big) return 0;

  // A caller promises struct_size readable bytes: a newer caller's struct is the known one plus a tail.
  struct {
    mxfp8_tensor_desc known;
    uint8_t tail[256];
  } newer{};
  mxfp8_tensor_desc &desc = newer.known;
  desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = in.byte() % 6 == 0 ? in.byte() % 5 : (in.byte() % 2 ? MXFP8_FORMAT_E5M2 : MXFP8_FORMAT_E4M3);
  desc.scale_layout = in.byte() % 8 == 0 ? 2 : swizzled;
  if (in.byte() % 4 == 0) {
    desc.ndim = ndim;
    desc.shape = shape.data();
  }
  if (in.byte() % 16 == 0) desc.struct_size = static_cast<uint32_t>(in.below(sizeof newer + 1));
  if (in.byte() % 16 == 0) newer.tail[in.byte()] = 1;
  (columnwise ? desc.columnwise_data : desc.rowwise_data) = &values.managed;
  (columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &scales.managed;

  deleter_calls = 0;
  mxfp8_tensor *tensor = nullptr;
  const mxfp8_status created = mxfp8_tensor_create(&desc, &tensor);
  if (mxfp8_last_error() == nullptr) abort();
  if (created != MXFP8_OK) {
    if (tensor != nullptr || deleter_calls != 0) abort();  // nothing taken, nothing written
  } else {
    if (values.has_negative_stride() || scales.has_negative_stride()) abort();  // must have been refused
    if (values.managed.version.major != DLPACK_MAJOR_VERSION || scales.managed.version.major != DLPACK_MAJOR_VERSION)
      abort();  // another major version must have been refused
    if (desc.ndim == 0) {
      // The logical shape came from the data, which may differ from `shape`: the reference follows it.
      int64_t data_m = 1;
      for (int i = 0; i + 1 < ndim; ++i) data_m *= data_shape[i];
      rows = columnwise ? (data_m + 31) / 32 : data_m;
      cols = columnwise ? data_shape.back() : (data_shape.back() + 31) / 32;
    }
    struct {
      mxfp8_export_options known;
      uint8_t tail[256];
    } newer_options{};
    mxfp8_export_options &o = newer_options.known;
    o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = in.byte() % 8 == 0 ? in.byte() % 3 : columnwise;
    o.values_dtype = in.byte() % 3;
    o.scales_dtype = in.byte() % 3;
    o.padded_scales = in.byte() % 3;
    if (in.byte() % 16 == 0) o.struct_size = static_cast<uint32_t>(in.below(sizeof newer_options + 1));
    if (in.byte() % 16 == 0) newer_options.tail[in.byte()] = 1;
    DLManagedTensorVersioned *v = nullptr, *s = nullptr;
    if (mxfp8_export_components(tensor, &o, in.byte() % 4 ? &v : nullptr, &s) == MXFP8_OK) {
      const DLTensor &t = s->dl_tensor;
      int64_t n = 1;
      for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
      if (n != rows * cols || (t.ndim > 0 && !t.strides)) abort();
      for (int64_t i = 0; i < n; ++i)
        if (read_element(t, i) != expected_scale(scales, swizzled, columnwise, i / cols, i % cols, rows, cols)) abort();
      if (v && v->dl_tensor.data != values.managed.dl_tensor.data) abort();  // values are always a view
    }
    // The batched path into a caller buffer, against the same reference.
    std::vector<uint8_t> bucket(static_cast<size_t>(rows * cols) + 1, 0);
    int64_t flat = rows * cols;
    DLTensor dst{bucket.data(), {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &flat, nullptr, 0};
    DLTensor *dsts[1] = {&dst};
    const mxfp8_tensor *ts[1] = {tensor};
    mxfp8_export_options bo = MXFP8_EXPORT_OPTIONS_INIT;
    bo.direction = columnwise;
    if (mxfp8_export_scales_batched(ts, dsts, 1, &bo) != MXFP8_OK) abort();  // create validated everything
    for (int64_t i = 0; i < flat; ++i)
      if (bucket[i] != expected_scale(scales, swizzled, columnwise, i / cols, i % cols, rows, cols)) abort();
    mxfp8_tensor_release(tensor);
    if (v) v->deleter(v);
    if (s) s->deleter(s);
    const int owned = (values.managed.deleter != nullptr) + (scales.managed.deleter != nullptr);
    if (deleter_calls != owned) abort();  // each input deleter exactly once, after the last view
  }

  // The low-level pair on the same scale buffer, taken as a swizzled one for a random matrix.
  int64_t cshape[2] = {in.below(300), in.below(40)};
  std::vector<uint8_t> compact(static_cast<size_t>(cshape[0] * cshape[1]) + 1);
  DLTensor c{compact.data(), {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, cshape, nullptr, 0};
  if (mxfp8_unswizzle_scales(&scales.managed.dl_tensor, &c, nullptr) == MXFP8_OK &&
      mxfp8_swizzle_scales(&c, &scales.managed.dl_tensor, nullptr) != MXFP8_OK)
    abort();  // a pair that unswizzles must swizzle back
  return 0;
}
