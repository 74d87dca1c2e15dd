// Stand-ins for the CUDA operations in a build made without a CUDA compiler, so that CUDA tensors still
// export as views and every copy of CUDA memory fails with a clear status.
#include "core/error.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/quantize.hpp"
#include "core/nvfp4_quantize.hpp"
#include "cuda/cuda_runtime.hpp"
#include "core/scale_job.hpp"
#include "core/scale_source.hpp"

namespace mxfp8::cuda {
namespace {
[[noreturn]] void no_cuda() {
  fail(MXFP8_ERROR_UNSUPPORTED,
       "this copy of libmxfp8 was built without CUDA, so it cannot run kernels on CUDA memory "
       "(scale copies, quantize, dequantize; views still work): rebuild with a CUDA compiler on the PATH");
}
}  // namespace

bool compiled_in() { return false; }
void require_compiled_in() { no_cuda(); }
DeviceScope::DeviceScope(int) {}  // nothing to select; the operation that follows fails
DeviceScope::~DeviceScope() = default;
void run_jobs(const ScaleJob *, size_t, void *) { no_cuda(); }
void unswizzle(const uint8_t *, ByteMatrix, void *) { no_cuda(); }
void swizzle(ByteMatrix, uint8_t *, void *) { no_cuda(); }
BlockMismatch block_scales(const ScaleSource &, int, ByteMatrix, void *) { no_cuda(); }
void copy_matrix(ByteMatrix, ByteMatrix, void *) { no_cuda(); }
void quantize(const QuantizeJob &, void *) { no_cuda(); }
void dequantize(const DequantizeJob &, void *) { no_cuda(); }
void nvfp4_dequantize(const Nvfp4DequantizeJob &, void *) { no_cuda(); }
void nvfp4_global_scales(const Nvfp4GlobalScaleJob *, size_t, void *) { no_cuda(); }
void nvfp4_quantize(const Nvfp4QuantizeJob &, void *) { no_cuda(); }
void *allocate(int64_t, void *) { no_cuda(); }
void free_async(void *, void *) noexcept {}

}  // namespace mxfp8::cuda
