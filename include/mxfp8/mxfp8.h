/*
 * mxfp8 — hand MXFP8 weights from a trainer to whoever consumes them next.
 *
 * Copyright 2026 the mxfp8 authors. SPDX-License-Identifier: Apache-2.0
 *
 * An MXFP8 tensor of logical shape (*lead, K) is FP8 values plus one E8M0 scale (a biased power-of-two
 * exponent) per block of 32 values. Producers such as Transformer Engine store the scales padded, and
 * sometimes swizzled into the cuBLAS "128x4" GEMM layout. Consumers (vLLM, SGLang, JAX) want the values
 * plus compact row-major uint8 scales of shape (*lead, ceil(K/32)). This library turns the first into
 * the second with no dequantize and no requantize: a view where the bytes already sit right, otherwise a
 * copy made by one pass of an unswizzle loop (CPU) or kernel (CUDA). For trainers that keep BF16 weights
 * it also quantizes, bit-exact with Transformer Engine, straight into either layout (mxfp8_quantize).
 *
 * This header is the one to include. It holds the conventions, the version and the status codes, and
 * includes the API by domain from its folder: mxfp8/tensor.h (describing MXFP8, grouped and NVFP4
 * tensors; exporting them), mxfp8/layout.h (engine layouts, convert, the 128x4 swizzle),
 * mxfp8/quantize.h (quantize and dequantize) and mxfp8/transfer.h (the batched export, shards, and the
 * transfer: buckets, imports into an engine's parameters, plans).
 *
 * Conventions that hold for every function of these headers:
 *   - Every function returns an mxfp8_status, except the few that cannot fail (they say so).
 *   - On failure nothing is allocated, nothing passed in is taken or modified, every output pointer is
 *     left as it was, and mxfp8_last_error() describes what was wrong.
 *   - No C++ exception and no signal ever leaves the library for bad input.
 *   - Structs that may grow open with `struct_size`; fill them with their *_INIT macro and then set the
 *     fields you need. A struct from a newer caller is accepted when the fields this library does not know
 *     are zero. Enum values and status values never change once published.
 *   - All memory is described with DLPack (https://dmlc.github.io/dlpack/), header >= 1.1. A
 *     DLManagedTensorVersioned whose version.major is not this header's DLPACK_MAJOR_VERSION is refused
 *     before any other field of it is read (DLPack forbids reading them). Tensors have at most 64
 *     dimensions. Every size, offset and stride is checked arithmetic: one that does not fit in int64 is
 *     MXFP8_ERROR_INVALID_ARGUMENT, never a wrapped number.
 *   - What a call writes must not share a byte with what it reads or with another of its outputs
 *     (in-place swizzles, a destination over a source's buffers, two overlapping destinations): such a
 *     call fails with MXFP8_ERROR_INVALID_ARGUMENT before anything is written. Inputs may share bytes.
 *     Two output pointers of one call must differ.
 *   - Work is proportional to the bytes moved: an empty tensor costs nothing, however large its other
 *     dimensions. Empty buffers may have a NULL data pointer.
 *   - Stability. Every section below is marked. STABLE: frozen in 0.x; a release may add functions,
 *     enum values and fields appended to size-prefixed structs, never change or remove one (the ABI gate
 *     in abi/ fails a build that does). EXPERIMENTAL (the transfer, grouped experts, and what lands
 *     next: engine layouts, NVFP4): young, used and tested, but may still change in a minor release;
 *     every such change is called out in CHANGELOG.md. Status values are stable whatever their section.
 *   - CUDA work runs on the stream you pass (NULL is the legacy default stream); the library never
 *     synchronizes the device behind your back. Errors from kernels that run asynchronously show up at a
 *     later CUDA call of yours or ours, as they do everywhere in CUDA. MXFP8_UNSWIZZLE_PATH (read once)
 *     picks how a GPU unswizzle of 128x4 scales (an export, mxfp8_unswizzle_scales, a transfer) moves
 *     its tiles: unset or "registers", launches of aligned unswizzles alone in registers (the others go
 *     through shared memory whatever the value); "smem", those launches through shared memory too (for
 *     timing one against the other). The bytes written are the same either way; any other value is an
 *     INVALID_ARGUMENT error of the call.
 *   - Host work (quantize, dequantize, the unswizzle of host scales by an export or
 *     mxfp8_unswizzle_scales, and the scale work of a transfer or plan run on host memory) runs on the
 *     calling thread. A call that moves at least 4 MiB (reads plus
 *     writes) is split by rows over one thread per 2 MiB, at most one per core the calling thread may run
 *     on (sched_getaffinity); the calling thread takes one share, the others run on threads started for
 *     the call and joined before it returns. The bytes written never depend on the split. Environment
 *     variables, read by every such call of two or more rows (do not change them while another thread may
 *     be inside the library):
 *       MXFP8_HOST_THREADS=N              at most N threads; 1 keeps everything on the calling thread
 *                                         (for callers that run their own pool);
 *       MXFP8_HOST_MIN_BYTES_PER_THREAD=B B bytes per thread instead of 2 MiB (0: split every call);
 *       MXFP8_HOST_ISA=avx2|baseline      use no wider vector instructions than these (x86-64; by
 *                                         default the widest the CPU has: AVX-512, AVX2 or SSE2).
 *     Anything else in these variables (or nothing) means the defaults.
 */
#ifndef MXFP8_MXFP8_H_
#define MXFP8_MXFP8_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1 || \
    (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
#error "mxfp8.h needs dlpack.h 1.1 or newer (it defines the float8 type codes)"
#endif

#if defined(_WIN32)
#define MXFP8_API_EXPORT __declspec(dllexport)
#define MXFP8_API_IMPORT __declspec(dllimport)
#else
#define MXFP8_API_EXPORT __attribute__((visibility("default")))
#define MXFP8_API_IMPORT
#endif
/* MXFP8_BUILDING_LIBRARY is defined only while the library itself is compiled. */
#if defined(MXFP8_BUILDING_LIBRARY)
#define MXFP8_API MXFP8_API_EXPORT
#else
#define MXFP8_API MXFP8_API_IMPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ====================================================================================================
 * Version                                                                              [STABLE]
 * ==================================================================================================== */

#define MXFP8_VERSION_MAJOR 0
#define MXFP8_VERSION_MINOR 1
#define MXFP8_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, the same encoding mxfp8_version() returns. */
#define MXFP8_VERSION (MXFP8_VERSION_MAJOR * 10000 + MXFP8_VERSION_MINOR * 100 + MXFP8_VERSION_PATCH)

/* The version of the library actually loaded, encoded as MXFP8_VERSION. Compare it with the macro to
 * detect a header/library mismatch. Cannot fail. */
MXFP8_API uint32_t mxfp8_version(void);

/* ====================================================================================================
 * Status and errors                                                                    [STABLE]
 * ==================================================================================================== */

/* The values are pinned: a published value never changes meaning. New values may be added. */
typedef enum mxfp8_status {
  MXFP8_OK = 0,
  /* A pointer, enum, struct size, shape, dtype, stride or buffer size is wrong. Fix the call. */
  MXFP8_ERROR_INVALID_ARGUMENT = 1,
  /* The tensor has no data for the requested direction (e.g. rowwise export of a columnwise-only
   * tensor). */
  MXFP8_ERROR_MISSING_DATA = 2,
  /* Valid, but not something this build can do (a device type it does not know, a CUDA copy from a
   * build without CUDA). */
  MXFP8_ERROR_UNSUPPORTED = 3,
  /* Host or device memory could not be allocated (also: the caller's allocator failed). */
  MXFP8_ERROR_OUT_OF_MEMORY = 4,
  /* A CUDA runtime call or kernel launch failed; the message carries CUDA's error text. */
  MXFP8_ERROR_CUDA = 5,
  /* A bug in this library. Please report it with the message. */
  MXFP8_ERROR_INTERNAL = 6,
  /* Not a status: one past the largest value this header knows. */
  MXFP8_NUM_STATUS = 7
} mxfp8_status;

/* A short, static, English name for a status ("invalid argument"). Never NULL; unknown values give
 * "unknown status". Cannot fail. */
MXFP8_API const char *mxfp8_status_string(mxfp8_status status);

/* The detailed message of the last failed call made by *this thread* (for example
 * "rowwise_scale_inv: GEMM-swizzled scales of a 100 x 2 scale matrix need 128 x 4 = 512 bytes, got 200
 * (shape (100, 2)); are these scales really swizzled, and for this tensor?").
 * Never NULL (empty when nothing failed yet). Only meaningful right after a call returned something
 * other than MXFP8_OK; successful calls do not clear it. The pointer stays valid until this thread's
 * next call into the library. Cannot fail. */
MXFP8_API const char *mxfp8_last_error(void);

/* A bit of the `flags` field of an options struct (mxfp8_convert_options, mxfp8_quantize_options,
 * mxfp8_nvfp4_quantize_options): run every check of the call, in the same order with the same status and
 * message, and return without writing, allocating or launching anything. Buffers' addresses and sizes are
 * read, never their bytes, so a caller can ask whether a call would be taken before it owns the memory (a
 * tracer such as jax.jit, which knows only shapes and dtypes, describes the buffers at addresses of its
 * own). */
#define MXFP8_CHECK_ONLY 1u

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The API by domain, one header each (in this order: each may use the types of those before it). */
#include "tensor.h"   /* describing MXFP8, grouped and NVFP4 tensors; exporting values and scales */
#include "layout.h"   /* engine layouts, convert, the 128x4 swizzle */
#include "quantize.h" /* quantize and dequantize, MXFP8 and NVFP4 */
#include "transfer.h" /* the batched export, shards, the transfer (buckets, imports, plans) */

#endif /* MXFP8_MXFP8_H_ */
