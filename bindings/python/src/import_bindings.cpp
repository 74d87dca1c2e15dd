// The receiver's import for Python: one mxfp8_transfer_desc (from a bucket or from tensors, to the
// engine's buffers) run by mxfp8_transfer, checked by mxfp8_transfer_check or prepared once, over DLPack
// producers. A translation layer only: it takes each object's DLTensor as every other call of the
// extension does (dlpack_take.hpp: the framework's DLPack C exchange API when the caller left the stream
// to it, else __dlpack__), fills the desc, and lets the library check everything.
// register_import adds the functions to a module (the extension calls it from its PYBIND11_MODULE).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"
#include "dlpack_take.hpp"
#include "shard_list.hpp"

namespace py = pybind11;

namespace {

using namespace mxfp8_python;

// The destinations of one call, as the desc's parallel arrays: the taken tensors stay alive for the call
// (and a preparation).
struct Destinations {
  std::vector<std::unique_ptr<TakenTensor>> taken;
  std::vector<DLTensor *> values, scales;
  std::vector<int32_t> layouts;
  // The desc's destination fields (TO_BUFFERS) over these arrays.
  void describe(mxfp8_transfer_desc &d) const {
    d.destination = MXFP8_TRANSFER_TO_BUFFERS;
    d.values = values.data();
    d.scales = scales.data();
    d.target_layouts = layouts.data();
  }
};

// What the caller called a part of entry i: "params['w'][1]" (owner params, part [1]) when the Python layer
// passed the entries' names (their repr), else "fallback[i]". A refusal names what the user passed, not
// the binding's lists.
std::string label(const std::vector<std::string> &names, size_t i, const char *owner, const char *part,
                  const char *fallback) {
  if (i < names.size()) return std::string(owner) + "[" + names[i] + "]" + part;
  return std::string(fallback) + "[" + std::to_string(i) + "]";
}

Destinations take_destinations(const py::list &values, const py::list &scales, const std::vector<int32_t> &layouts,
                               Exchange &ex, const std::vector<std::string> &names) {
  const size_t n = values.size();
  if (scales.size() != n || layouts.size() != n)
    throw py::value_error("values, scales and layouts must have one entry per tensor");
  Destinations d;
  d.taken.reserve(2 * n);
  d.layouts = layouts;
  for (size_t i = 0; i < n; ++i) {
    d.taken.push_back(take(values[i], label(names, i, "params", "[0]", "values").c_str(), ex, Access::Write));
    d.taken.push_back(take(scales[i], label(names, i, "params", "[1]", "scales").c_str(), ex, Access::Write));
    d.values.push_back(d.taken[2 * i]->tensor());
    d.scales.push_back(d.taken[2 * i + 1]->tensor());
  }
  return d;
}

// A refusal of the library's about one source, said of that source ("tensors['w']: rowwise_scale_inv: ..."),
// as export_bucket says it: the library's message names the field, not which of thousands of tensors.
// `where` is called only on failure (a label costs a repr, paid by no call that succeeds).
template <class Where>
void check_source(mxfp8_status status, Where where) {
  if (status == MXFP8_OK) return;
  const std::string prefix = where();
  raise_status(status, prefix.empty() ? mxfp8_last_error() : prefix + ": " + mxfp8_last_error());
}

// A refusal of a whole call whose message indexes one entry (shards[2], destinations[0].values, ...):
// the caller's name of that entry (names[i], a repr) is added, "... (entry 2 is 'layers.3.w')".
void check_entries(mxfp8_status status, const std::vector<std::string> &names) {
  if (status == MXFP8_OK) return;
  // A plain scan: the std::regex this was crashed the CUDA build's module on every such refusal on the
  // device (Python 3.12, SIGSEGV; not seen on this machine's 3.11), cause not pinned down.
  static const char *const kLists[] = {"shards", "values", "scales", "target_layouts", "global_scales", "tensors",
                                       "parts_in", "shapes", "ndims", "formats", "directions", "source_layouts",
                                       "e4m3_maxes", "scales_shapes", "scales_ndims"};
  std::string message = mxfp8_last_error();
  for (size_t open = message.find('['); open != std::string::npos; open = message.find('[', open + 1)) {
    size_t start = open;  // the identifier before '[' (a '.' ends it: "manifest.shards[2]" reads "shards")
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(message[start - 1])) || message[start - 1] == '_'))
      --start;
    const std::string list = message.substr(start, open - start);
    if (std::none_of(std::begin(kLists), std::end(kLists), [&](const char *k) { return list == k; })) continue;
    char *end = nullptr;
    const unsigned long long i = std::strtoull(message.c_str() + open + 1, &end, 10);
    if (end == message.c_str() + open + 1 || *end != ']') continue;
    if (i < names.size()) message += " (entry " + std::to_string(i) + " is " + names[i] + ")";
    break;
  }
  raise_status(status, message);
}

// "tensors[<repr>]" for entry i when the Python layer passed the names, else nothing.
std::string source_label(const std::vector<std::string> &names, size_t i) {
  return i < names.size() ? "tensors[" + names[i] + "]" : std::string();
}

// A tensor handle over a producer's data and scale_inv (taken: the handle owns them once created).
template <class Where>
mxfp8_tensor *make_tensor(TakenTensor &data, TakenTensor &scale_inv, const std::vector<int64_t> &shape, int32_t format,
                          bool swizzled, int32_t direction, Where where) {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = format;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  desc.ndim = static_cast<int32_t>(shape.size());
  desc.shape = shape.data();
  if (direction == MXFP8_DIRECTION_COLUMNWISE) {
    desc.columnwise_data = data.managed;
    desc.columnwise_scale_inv = scale_inv.managed;
  } else {
    desc.rowwise_data = data.managed;
    desc.rowwise_scale_inv = scale_inv.managed;
  }
  mxfp8_tensor *t = nullptr;
  check_source(mxfp8_tensor_create(&desc, &t), where);
  data.release();  // owned by the tensor now
  scale_inv.release();
  return t;
}

// The destinations of NVFP4 entries' global scales: DLTensor pointers (NULL where the Python list holds
// None, at MXFP8 entries) and the taken tensors behind them, alive for the call.
struct GlobalScales {
  std::vector<DLTensor *> tensors;
  std::vector<std::unique_ptr<TakenTensor>> taken;
  DLTensor *const *data() const { return tensors.empty() ? nullptr : tensors.data(); }
};

GlobalScales take_global_scales(const std::optional<py::list> &list, Exchange &ex,
                                const std::vector<std::string> &names) {
  GlobalScales g;
  if (!list) return g;
  for (size_t i = 0; i < list->size(); ++i) {
    py::handle t = (*list)[i];
    if (t.is_none()) {
      g.tensors.push_back(nullptr);
      continue;
    }
    g.taken.push_back(take(t, label(names, i, "params", "[2]", "global_scales").c_str(), ex, Access::Write));
    g.tensors.push_back(g.taken.back()->tensor());
  }
  return g;
}

// An NVFP4 tensor handle over a producer's data, scale_inv and amax of one direction (taken: the handle
// owns them once created).
template <class Where>
mxfp8_tensor *make_nvfp4_tensor(std::unique_ptr<TakenTensor> &data, std::unique_ptr<TakenTensor> &scale_inv,
                                      std::unique_ptr<TakenTensor> &amax, const std::vector<int64_t> &shape, bool swizzled,
                                      int32_t e4m3_max, int32_t direction, Where where) {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = MXFP8_FORMAT_NVFP4;
  desc.block = MXFP8_BLOCK_1X16;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  desc.e4m3_max = e4m3_max;
  desc.ndim = static_cast<int32_t>(shape.size());
  desc.shape = shape.data();
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  *(columnwise ? &desc.columnwise_data : &desc.rowwise_data) = data->managed;
  *(columnwise ? &desc.columnwise_scale_inv : &desc.rowwise_scale_inv) = scale_inv->managed;
  *(columnwise ? &desc.columnwise_amax : &desc.rowwise_amax) = amax->managed;
  mxfp8_tensor *t = nullptr;
  check_source(mxfp8_tensor_create(&desc, &t), where);
  data->release();  // owned by the tensor now
  scale_inv->release();
  amax->release();
  return t;
}

// A prepared import: checked once, run every step (one launch, no allocation, no synchronization). It
// keeps every destination taken (so the framework's storage stays alive, whatever becomes of the caller's
// params) for its whole life; the library's plan holds the sources.
class ImportPlan {
 public:
  ImportPlan(mxfp8_plan *p, Destinations &&destinations, GlobalScales &&globals)
      : plan_(p), destinations_(std::move(destinations)), globals_(std::move(globals)) {}
  ~ImportPlan() { mxfp8_plan_release(plan_); }
  ImportPlan(const ImportPlan &) = delete;
  ImportPlan &operator=(const ImportPlan &) = delete;
  // Runs of one plan write the same bytes, so the header forbids two at once; the run drops the GIL, so
  // two Python threads could otherwise enter together. Serialised here (the queueing, on CUDA: runs queued
  // on two streams must still be ordered by the caller, as for any two writes of the same buffer).
  void run(uintptr_t stream) {
    mxfp8_status st;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> one_run_at_a_time(running_);
      st = mxfp8_plan_run(plan_, reinterpret_cast<void *>(stream));
    }
    check(st);
  }

 private:
  mxfp8_plan *plan_;
  Destinations destinations_;
  GlobalScales globals_;
  std::mutex running_;
};

// The desc's source side for a bucket (FROM_BUCKET) over the Python layer's lists (which outlive it): what
// import_bucket and bucket_manifest_check both describe. parts: (values_offset, values_bytes, scales_offset,
// scales_bytes); nvfp4_entries: (amax_offset, amax_bytes, e4m3_max) per entry; scales_shapes: each entry's
// "scales_shape", or none (not checked).
struct BucketSource {
  std::vector<mxfp8_bucket_part> parts;
  std::vector<int32_t> ndims, scales_ndims, e4m3_maxes;
  std::vector<const int64_t *> shapes, scales_shapes;
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;

  BucketSource(const DLTensor *bucket, const std::vector<std::array<uint64_t, 4>> &entries,
               const std::vector<std::vector<int64_t>> &shape_list, const std::vector<int32_t> &formats,
               const std::vector<int32_t> &directions, const std::vector<int32_t> &scales_layouts,
               const std::optional<std::vector<std::array<uint64_t, 3>>> &nvfp4_entries,
               const std::optional<std::vector<std::vector<int64_t>>> &scales_shape_list) {
    const size_t n = entries.size();
    if (shape_list.size() != n || formats.size() != n || directions.size() != n || scales_layouts.size() != n ||
        (nvfp4_entries && nvfp4_entries->size() != n) || (scales_shape_list && scales_shape_list->size() != n))
      throw py::value_error("the manifest's lists must have one entry per tensor");
    for (size_t i = 0; i < n; ++i) {
      const auto &[offset, bytes, e4m3_max] = nvfp4_entries ? (*nvfp4_entries)[i] : std::array<uint64_t, 3>{0, 0, 0};
      parts.push_back(mxfp8_bucket_part{entries[i][0], entries[i][1], entries[i][2], entries[i][3], offset, bytes});
      e4m3_maxes.push_back(static_cast<int32_t>(e4m3_max));  // the Python layer checked it fits int32
      ndims.push_back(static_cast<int32_t>(shape_list[i].size()));
      shapes.push_back(shape_list[i].data());
      if (scales_shape_list) {
        scales_ndims.push_back(static_cast<int32_t>((*scales_shape_list)[i].size()));
        scales_shapes.push_back((*scales_shape_list)[i].data());
      }
    }
    desc.source = MXFP8_TRANSFER_FROM_BUCKET;
    desc.destination = MXFP8_TRANSFER_TO_NOTHING;
    desc.count = n;
    desc.bucket_in = bucket;
    desc.parts_in = parts.data();
    desc.ndims = ndims.data();
    desc.shapes = shapes.data();
    desc.formats = formats.data();
    desc.directions = directions.data();
    desc.source_layouts = scales_layouts.data();
    desc.e4m3_maxes = e4m3_maxes.data();
    desc.scales_ndims = scales_shape_list ? scales_ndims.data() : nullptr;
    desc.scales_shapes = scales_shape_list ? scales_shapes.data() : nullptr;
  }
  BucketSource(const BucketSource &) = delete;  // the desc points into the vectors
  BucketSource &operator=(const BucketSource &) = delete;
};

// mxfp8_transfer_check of the bucket alone (TO_NOTHING): the C library's reading of a manifest (what the
// import checks before it looks at a destination), for unpack_bucket's views. Only the bucket's address
// and size are read.
void bucket_manifest_check(py::handle bucket, const std::vector<std::array<uint64_t, 4>> &entries,
                           const std::vector<std::vector<int64_t>> &shapes, const std::vector<int32_t> &formats,
                           const std::vector<int32_t> &directions, const std::vector<int32_t> &scales_layouts,
                           const std::optional<std::vector<std::array<uint64_t, 3>>> &nvfp4_entries,
                           const std::optional<std::vector<std::vector<int64_t>>> &scales_shapes) {
  auto taken_bucket = take_dlpack(bucket, "bucket", py::none(), Access::Read);
  BucketSource source(taken_bucket->tensor(), entries, shapes, formats, directions, scales_layouts, nvfp4_entries,
                      scales_shapes);
  check(mxfp8_transfer_check(&source.desc));
}

// The transfer `d`, run on `stream` or prepared: an ImportPlan keeping the destinations, or None.
py::object run_transfer(const mxfp8_transfer_desc &d, uintptr_t stream, bool prepare, Destinations &&dst,
                        GlobalScales &&globals, const std::vector<std::string> &names) {
  mxfp8_status st;
  mxfp8_plan *plan = nullptr;
  {
    py::gil_scoped_release unlocked;
    st = prepare ? mxfp8_transfer_prepare(&d, &plan) : mxfp8_transfer(&d, reinterpret_cast<void *>(stream));
  }
  check_entries(st, names);
  if (prepare) return py::cast(std::make_unique<ImportPlan>(plan, std::move(dst), std::move(globals)));
  return py::none();
}

py::object import_bucket(py::handle bucket, const std::vector<std::array<uint64_t, 4>> &entries,
                         const std::vector<std::vector<int64_t>> &shapes, const std::vector<int32_t> &formats,
                         const std::vector<int32_t> &directions, const std::vector<int32_t> &scales_layouts,
                         const py::list &values, const py::list &scales, const std::vector<int32_t> &targets,
                         int32_t scale_fixup, py::object stream, py::object dlpack_stream, bool prepare,
                         const std::optional<std::vector<py::object>> &shards,
                         const std::optional<std::vector<std::array<uint64_t, 3>>> &nvfp4_entries,
                         const std::optional<py::list> &global_scales, int32_t global_scale,
                         const std::vector<std::string> &names,
                         const std::optional<std::vector<std::vector<int64_t>>> &scales_shapes) {
  const size_t n = entries.size();
  const ShardList shard_list(shards, n);
  if (global_scales && global_scales->size() != n)
    throw py::value_error("the manifest's lists must have one entry per tensor");
  Exchange ex = exchange_for_objects(bucket, stream, std::move(dlpack_stream));
  auto taken_bucket = take(bucket, "bucket", ex, Access::Read);  // in exchange mode, fixes the stream
  Destinations dst = take_destinations(values, scales, targets, ex, names);
  GlobalScales globals = take_global_scales(global_scales, ex, names);
  BucketSource source(taken_bucket->tensor(), entries, shapes, formats, directions, scales_layouts, nvfp4_entries,
                      scales_shapes);
  mxfp8_transfer_desc &d = source.desc;
  dst.describe(d);
  d.scale_fixup = scale_fixup;
  d.shards = shard_list.data();
  d.global_scales = globals.data();
  d.global_scale = global_scale;
  return run_transfer(d, ex.stream, prepare, std::move(dst), std::move(globals), names);
}

// Handles over the sources of one import, of either format (an NVFP4 handle is an mxfp8_tensor of format
// NVFP4 to the transfer); the tensors own their managed inputs once created.
struct Handles {
  std::vector<const mxfp8_tensor *> tensors;
  std::vector<mxfp8_tensor *> t;
  std::vector<mxfp8_tensor *> nv;
  Handles() = default;
  Handles(const Handles &) = delete;
  Handles &operator=(const Handles &) = delete;
  ~Handles() {
    for (mxfp8_tensor *h : t) mxfp8_tensor_release(h);
    for (mxfp8_tensor *h : nv) mxfp8_tensor_release(h);
  }
};

py::object import_tensors(const py::list &data, const py::list &scale_inv, const std::vector<std::vector<int64_t>> &shapes,
                          const std::vector<int32_t> &formats, const std::vector<bool> &swizzled, int32_t direction,
                          const py::list &values, const py::list &scales, const std::vector<int32_t> &targets,
                          int32_t scale_fixup, py::object stream, py::object dlpack_stream, bool prepare,
                          const std::optional<std::vector<py::object>> &shards, const std::optional<py::list> &amax,
                          const std::optional<std::vector<int32_t>> &e4m3_max, const std::optional<py::list> &global_scales,
                          int32_t global_scale, const std::vector<std::string> &names) {
  const size_t n = data.size();
  const ShardList shard_list(shards, n);
  if (scale_inv.size() != n || shapes.size() != n || formats.size() != n || swizzled.size() != n ||
      (amax && amax->size() != n) || (e4m3_max && e4m3_max->size() != n) || (global_scales && global_scales->size() != n))
    throw py::value_error("data, scale_inv, shapes, formats and swizzled must have one entry per tensor");
  const py::handle first = n ? PyList_GET_ITEM(data.ptr(), 0) : Py_None;  // None: no framework, count 0 a no-op
  Exchange ex = exchange_for_objects(first, stream, std::move(dlpack_stream));
  // With `amax`, entry i is NVFP4 where amax[i] is not None, else MXFP8.
  Handles handles;
  handles.tensors.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto d = take(data[i], label(names, i, "tensors", "['data']", "data").c_str(), ex, Access::Read);
    auto s = take(scale_inv[i], label(names, i, "tensors", "['scale_inv']", "scale_inv").c_str(), ex, Access::Read);
    if (amax && !(*amax)[i].is_none()) {
      auto a = take((*amax)[i], label(names, i, "tensors", "['amax']", "amax").c_str(), ex, Access::Read);
      handles.nv.push_back(make_nvfp4_tensor(d, s, a, shapes[i], swizzled[i], e4m3_max ? (*e4m3_max)[i] : 448, direction,
                                             [&] { return source_label(names, i); }));
      handles.tensors.push_back(handles.nv.back());
      continue;
    }
    handles.t.push_back(make_tensor(*d, *s, shapes[i], formats[i], swizzled[i], direction,
                                    [&] { return source_label(names, i); }));
    handles.tensors.push_back(handles.t.back());
  }
  Destinations dst = take_destinations(values, scales, targets, ex, names);
  GlobalScales globals = take_global_scales(global_scales, ex, names);
  const std::vector<int32_t> directions(n, direction);
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  d.count = n;
  d.tensors = handles.tensors.data();
  d.directions = directions.data();
  d.shards = shards ? shard_list.data() : nullptr;
  dst.describe(d);
  d.scale_fixup = scale_fixup;
  d.global_scales = globals.data();
  d.global_scale = global_scale;
  return run_transfer(d, ex.stream, prepare, std::move(dst), std::move(globals), names);  // stream: the first take's
}

// mxfp8_convert (num_experts == 0: one tensor of `shape`) or mxfp8_grouped_convert (num_experts E
// experts of equal rows, `grouped_scales` an mxfp8_grouped_scales) into the caller's outputs.
void convert(py::handle data, py::handle scale_inv, const std::vector<int64_t> &shape, int32_t format, bool swizzled,
             int32_t direction, int32_t num_experts, int32_t grouped_scales, int32_t target, int32_t scale_fixup,
             py::object values_out, py::handle scales_out, py::object stream, py::object dlpack_stream) {
  Exchange ex = exchange_for_objects(data, stream, std::move(dlpack_stream));  // stream None: as for the imports
  auto d = take(data, "data", ex, Access::Read);
  auto s = take(scale_inv, "scale_inv", ex, Access::Read);
  std::unique_ptr<TakenTensor> v = values_out.is_none() ? nullptr : take(values_out, "values", ex, Access::Write);
  auto out = take(scales_out, "out", ex, Access::Write);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = target;
  o.direction = direction;
  o.scale_fixup = scale_fixup;
  o.stream = reinterpret_cast<void *>(ex.stream);
  DLTensor *values = v ? v->tensor() : nullptr;
  mxfp8_status st;
  if (num_experts > 0) {
    if (shape.size() < 2) throw py::value_error("grouped experts need a shape (*, K)");
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    if (rows % num_experts != 0)
      throw py::value_error("the experts' " + std::to_string(rows) + " rows do not split into " +
                            std::to_string(num_experts) + " experts of equal size");
    mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
    desc.format = format;
    desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    desc.scales = grouped_scales;
    desc.num_experts = num_experts;
    desc.cols = shape.back();
    desc.uniform_rows = rows / num_experts;
    desc.data = d->managed;
    desc.scale_inv = s->managed;
    mxfp8_grouped_tensor *g = nullptr;
    check(mxfp8_grouped_tensor_create(&desc, &g));
    d->release();  // owned by the group now
    s->release();
    {
      py::gil_scoped_release unlocked;
      st = mxfp8_grouped_convert(g, &o, values, out->tensor());
    }
    mxfp8_grouped_tensor_release(g);
  } else {
    mxfp8_tensor *t = make_tensor(*d, *s, shape, format, swizzled, direction, [] { return std::string(); });
    {
      py::gil_scoped_release unlocked;
      st = mxfp8_convert(t, &o, values, out->tensor());
    }
    mxfp8_tensor_release(t);
  }
  check(st);
}

int64_t layout_bytes(int32_t layout, int32_t direction, int64_t rows, int64_t cols) {
  int64_t bytes = 0;
  check(mxfp8_layout_bytes(layout, direction, rows, cols, &bytes));
  return bytes;
}

}  // namespace

void register_import(py::module_ &m) {
  py::class_<ImportPlan>(m, "ImportPlan", "A prepared import: checked once, one launch per run.")
      .def("run", &ImportPlan::run, py::arg("stream") = 0,
           "Runs the import on `stream` (a cudaStream_t as an int; 0: the legacy default stream).");
  m.def("import_bucket", &import_bucket, py::arg("bucket"), py::arg("entries"), py::arg("shapes"), py::arg("formats"),
        py::arg("directions"), py::arg("scales_layouts"), py::arg("values"), py::arg("scales"), py::arg("targets"),
        py::arg("scale_fixup"), py::arg("stream"), py::arg("dlpack_stream"), py::arg("prepare"),
        py::arg("shards") = py::none(), py::arg("nvfp4_entries") = py::none(), py::arg("global_scales") = py::none(),
        py::arg("global_scale") = 0, py::arg("names") = std::vector<std::string>(), py::arg("scales_shapes") = py::none(),
        "mxfp8_transfer from a bucket to buffers (or mxfp8_transfer_prepare with prepare=True, returning an ImportPlan); "
        "nvfp4_entries [(amax_offset, amax_bytes, e4m3_max)] and global_scales (None at MXFP8 entries) for NVFP4 "
        "entries (formats 3); names (each entry's repr) label refusals params[name][part].");
  m.def("bucket_manifest_check", &bucket_manifest_check, py::arg("bucket"), py::arg("entries"), py::arg("shapes"),
        py::arg("formats"), py::arg("directions"), py::arg("scales_layouts"), py::arg("nvfp4_entries") = py::none(),
        py::arg("scales_shapes") = py::none(), "mxfp8_transfer_check of a bucket alone (MXFP8_TRANSFER_TO_NOTHING).");
  m.def("import_tensors", &import_tensors, py::arg("data"), py::arg("scale_inv"), py::arg("shapes"), py::arg("formats"),
        py::arg("swizzled"), py::arg("direction"), py::arg("values"), py::arg("scales"), py::arg("targets"),
        py::arg("scale_fixup"), py::arg("stream"), py::arg("dlpack_stream"), py::arg("prepare"),
        py::arg("shards") = py::none(), py::arg("amax") = py::none(), py::arg("e4m3_max") = py::none(),
        py::arg("global_scales") = py::none(), py::arg("global_scale") = 0,
        py::arg("names") = std::vector<std::string>(),
        "mxfp8_transfer from tensors to buffers (or mxfp8_transfer_prepare with prepare=True, returning an "
        "ImportPlan); amax (None at MXFP8 entries), e4m3_max and global_scales for NVFP4 entries. stream None: the "
        "first source's framework's current stream (its DLPack exchange API) or the legacy default stream.");
  m.def("convert", &convert, py::arg("data"), py::arg("scale_inv"), py::arg("shape"), py::arg("format"),
        py::arg("swizzled"), py::arg("direction"), py::arg("num_experts"), py::arg("grouped_scales"), py::arg("target"),
        py::arg("scale_fixup"), py::arg("values"), py::arg("scales"), py::arg("stream"), py::arg("dlpack_stream"),
        "mxfp8_convert (num_experts 0) or mxfp8_grouped_convert into the given outputs (values may be None).");
  m.def("layout_bytes", &layout_bytes, py::arg("layout"), py::arg("direction"), py::arg("rows"), py::arg("cols"),
        "mxfp8_layout_bytes.");
}
