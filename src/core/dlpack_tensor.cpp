#include "core/dlpack_tensor.hpp"

#include <string>
#include <utility>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"

namespace mxfp8 {
namespace {

// manager_ctx of every tensor the library makes. `managed` is the first member, so the deleter finds
// the whole block from the pointer it is given.
struct LibraryTensor {
  DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  KeepAlive owner{};                         // views: the source
  BufferRelease buffer{};                    // copies: the memory they own, and how it is freed
};

void delete_library_tensor(DLManagedTensorVersioned *self) {
  auto *t = static_cast<LibraryTensor *>(self->manager_ctx);
  if (t->owner.release) t->owner.release(t->owner.object);
  if (t->buffer.release) t->buffer.release(t->buffer.memory, t->buffer.stream);
  delete t;
}

std::unique_ptr<LibraryTensor> new_library_tensor(DLDevice device, DLDataType dtype, std::vector<int64_t> shape,
                                                  std::vector<int64_t> strides, uint64_t flags) {
  auto t = std::make_unique<LibraryTensor>();
  t->shape = std::move(shape);
  t->strides = std::move(strides);
  DLManagedTensorVersioned &m = t->managed;
  m.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m.manager_ctx = t.get();
  m.deleter = delete_library_tensor;
  m.flags = flags;
  m.dl_tensor.device = device;
  m.dl_tensor.dtype = dtype;
  m.dl_tensor.ndim = static_cast<int32_t>(t->shape.size());
  m.dl_tensor.shape = t->shape.empty() ? nullptr : t->shape.data();
  m.dl_tensor.strides = t->strides.empty() ? nullptr : t->strides.data();
  return t;
}

void record_allocator_error(void *ctx, const char *kind, const char *message) {
  auto *text = static_cast<std::string *>(ctx);
  try {
    *text = cat(kind ? kind : "error", ": ", message ? message : "(no message)");
  } catch (...) {
  }
}

// Everything a caller's allocator returned, checked field by field before any is trusted: a field is read
// only once the fields it depends on are known good (DLPack: nothing but the deleter of another major
// version; the shape only for the requested ndim).
void check_allocated(const DLManagedTensorVersioned &m, const DLTensor &prototype) {
  const auto bad = [&](const auto &...what) {
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the caller's allocator, asked for a contiguous ",
         format_shape(prototype.shape, prototype.ndim), " ", format_dtype(prototype.dtype), " on ",
         format_device(prototype.device), ", returned ", what...);
  };
  if (m.version.major != DLPACK_MAJOR_VERSION)
    bad("a DLPack ", m.version.major, ".", m.version.minor, " tensor (this library reads ", DLPACK_MAJOR_VERSION, ".x)");
  const DLTensor &t = m.dl_tensor;
  if (t.ndim != prototype.ndim) bad("a tensor of ndim ", t.ndim);
  if (t.ndim > 0 && !t.shape) bad("a NULL shape");
  // The prototype's arrays are ours and live only for this call: an output pointing at them would dangle.
  if (t.ndim > 0 && t.shape == prototype.shape) bad("the prototype's shape array as its own (it must own its shape)");
  if (t.ndim > 0 && t.strides && t.strides == prototype.strides) bad("the prototype's strides as its own");
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] != prototype.shape[i]) bad("shape ", format_shape(t.shape, t.ndim));
  // A byte prototype (scales, values) may come back as uint8, the same bytes; a wider one (NVFP4's float32
  // global scales) only as itself.
  const DLDataType want = prototype.dtype;
  const bool byte_prototype = want.bits == 8 && want.lanes == 1;
  if (byte_prototype ? (t.dtype.bits != 8 || t.dtype.lanes != 1 || (t.dtype.code != kDLUInt && t.dtype.code != want.code))
                     : (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes))
    bad("dtype ", format_dtype(t.dtype));
  if (!same_device(t.device, prototype.device)) bad("memory on ", format_device(t.device));
  if (!is_compact(t)) bad("strides ", format_shape(t.strides, t.ndim));
  if (!t.data) bad("a NULL data pointer");
  if (t.byte_offset > UINTPTR_MAX - reinterpret_cast<uintptr_t>(t.data))
    bad("byte_offset ", t.byte_offset, ", past the end of the address space");
  if (t.byte_offset > static_cast<uint64_t>(INT64_MAX))  // as for every caller tensor (checked_numel)
    bad("byte_offset ", t.byte_offset, ", which does not fit in int64");
  if (m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) bad("a tensor flagged read-only");
}

}  // namespace

ManagedPtr from_caller_allocator(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape,
                                 Allocator allocator) {
  std::vector<int64_t> prototype_shape = shape;
  DLTensor prototype{};
  prototype.device = device;
  prototype.dtype = dtype;
  prototype.ndim = static_cast<int32_t>(shape.size());
  prototype.shape = prototype_shape.empty() ? nullptr : prototype_shape.data();
  DLManagedTensorVersioned *raw = nullptr;
  std::string error;
  const int rc = allocator(&prototype, &raw, &error, record_allocator_error);
  // On failure `*out` is not the allocator's to have set: never touch it.
  if (rc != 0 || !raw)
    fail(MXFP8_ERROR_OUT_OF_MEMORY, "the caller's allocator failed for shape ", format_shape(shape), " on ",
         format_device(device), error.empty() ? std::string() : ": " + error);
  CallAllocations::Taken taken;
  try {
    taken = CallAllocations::take(raw);
  } catch (...) {  // could not record it: released, as any result the library cannot use
    ManagedDeleter{}(raw);
    throw;
  }
  // Owned already (by this call or by an input handle): neither checked nor deleted here.
  if (taken == CallAllocations::Taken::kRepeated)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the caller's allocator returned, for shape ", format_shape(shape),
         ", the same DLManagedTensorVersioned it returned for an earlier output of this call");
  if (taken == CallAllocations::Taken::kHeldByInput)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the caller's allocator returned, for shape ", format_shape(shape),
         ", a DLManagedTensorVersioned the call's input holds (given to the library when the tensor was created)");
  ManagedPtr result(raw);  // deleted if any check below fails
  check_allocated(*raw, prototype);
  raw->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  raw->dl_tensor.dtype = dtype;  // e8m0 vs uint8 is ours to say; the bytes are the same
  return result;
}


std::vector<int64_t> compact_strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    // Only an empty shape (a 0 further out) can overflow here, and any stride describes an empty tensor.
    if (__builtin_mul_overflow(s, shape[i], &s)) s = 0;
  }
  return strides;
}

ManagedPtr make_view(KeepAlive owner, const DLTensor &base, DLDataType dtype, std::vector<int64_t> shape,
                     std::vector<int64_t> strides, uint64_t flags) {
  std::unique_ptr<LibraryTensor> t;
  try {
    t = new_library_tensor(base.device, dtype, std::move(shape), std::move(strides), flags);
  } catch (...) {
    owner.release(owner.object);
    throw;
  }
  t->managed.dl_tensor.data = base.data;
  t->managed.dl_tensor.byte_offset = base.byte_offset;
  t->owner = owner;
  return ManagedPtr(&t.release()->managed);
}

ManagedPtr new_copy(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape) {
  auto t = new_library_tensor(device, dtype, shape, compact_strides(shape), DLPACK_FLAG_BITMASK_IS_COPIED);
  return ManagedPtr(&t.release()->managed);
}

void attach_buffer(DLManagedTensorVersioned &copy, BufferRelease buffer) noexcept {
  static_cast<LibraryTensor *>(copy.manager_ctx)->buffer = buffer;
  copy.dl_tensor.data = buffer.memory;
}

}  // namespace mxfp8
