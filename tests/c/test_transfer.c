/* The transfer (mxfp8_transfer_desc) as a matrix: source {tensors, bucket} x destination {buffers, bucket,
 * nothing} x format {E4M3, E5M2, NVFP4 with a per-tensor and a per-row amax} x direction {row, column} x
 * stored scale layout {compact, TE-padded, 128x4} x shard {whole, rows, columns, row pieces} x target
 * layout {compact, 128x4} x {immediate, prepared}, where the shard is taken by the sender (a bucket of
 * shards) or by the receiver (a shard of a bucket of whole tensors, or of the trainer's tensor).
 *
 * Each cell's verdict is written here from the header's rules (expected_status), not asked of the
 * library: an accepted cell is compared byte for byte with references built in this file from the
 * formats' definitions (the shard cut from the logical matrix, the 128x4 swizzle from its permute form in
 * test_support.c, the global scale from its formula); a refused cell must return its status and leave
 * every destination byte poisoned. Then every accepted entry of a (shard, target, route) runs again in
 * ONE desc, so MXFP8 and NVFP4, rows and columns mix in one call. The refusals that are not about a cell
 * (fields a transfer does not read, a bucket to a bucket, TO_NOTHING outside the check) close the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"

/* Set by the GPU case: every source, bucket and destination lives in CUDA memory (device 0), the host
 * arrays below are the references and the mirrors a destination is read back into. */
static int g_cuda = 0;

#ifdef MXFP8_TEST_WITH_CUDA
/* Moves a test tensor's bytes to the device; the host buffer stays as the reference. */
static void *to_cuda(test_tensor *t) {
  if (!g_cuda || !t) return NULL;
  void *d = to_device(t->buffer, t->bytes);
  t->managed.dl_tensor.data = d;
  t->managed.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  return d;
}
static void *device_buffer(size_t n, uint8_t fill) {
  uint8_t *d = poisoned_device(n);
  CUDA_OK(cudaMemset(d, fill, n + 1));
  return d;
}
static void fetch(void *host, const void *device, size_t n) { CUDA_OK(cudaMemcpy(host, device, n, cudaMemcpyDeviceToHost)); }
static void device_free(void *p) { cudaFree(p); }
#else
static void *to_cuda(test_tensor *t) { (void)t; return NULL; }
static void *device_buffer(size_t n, uint8_t fill) { (void)n; (void)fill; return NULL; }
static void fetch(void *host, const void *device, size_t n) { (void)host; (void)device; (void)n; }
static void device_free(void *p) { (void)p; }
#endif

enum { COMPACT = 0, PADDED = 1, SWIZZLED = 2 };
enum { WHOLE = 0, ROWS = 1, COLS = 2, PIECES = 3, SHARD_KINDS = 4 };
/* A: the trainer's tensors straight into buffers. B: the sender cuts the shard into a bucket, the
 * receiver imports it whole. C: a bucket of whole tensors, the receiver takes its shard. */
enum { ROUTE_A = 0, ROUTE_B = 1, ROUTE_C = 2, ROUTES = 3 };

#define M_ROWS 130 /* not a multiple of 32 or 128 */

typedef struct {
  int format;    /* MXFP8_FORMAT_E4M3, _E5M2 or _NVFP4 */
  int direction; /* mxfp8_direction */
  int storage;   /* how the trainer stores the scales */
  int per_row;   /* NVFP4: one amax per row */
  int64_t K;
} spec;

/* Six tensors: every format, both directions, every stored layout, both amax kinds. K is not a multiple
 * of 32 for MXFP8 (a partial block) nor of 16 for NVFP4's rowwise blocks. */
static const spec kSpecs[] = {
    {MXFP8_FORMAT_E4M3, MXFP8_DIRECTION_ROWWISE, PADDED, 0, 100},
    {MXFP8_FORMAT_E5M2, MXFP8_DIRECTION_COLUMNWISE, SWIZZLED, 0, 100},
    {MXFP8_FORMAT_E4M3, MXFP8_DIRECTION_COLUMNWISE, COMPACT, 0, 70},
    {MXFP8_FORMAT_NVFP4, MXFP8_DIRECTION_ROWWISE, COMPACT, 0, 88},
    {MXFP8_FORMAT_NVFP4, MXFP8_DIRECTION_ROWWISE, SWIZZLED, 1, 88},
    {MXFP8_FORMAT_NVFP4, MXFP8_DIRECTION_COLUMNWISE, PADDED, 0, 88},
};
#define NSPECS ((int)(sizeof kSpecs / sizeof kSpecs[0]))

/* A tensor as the trainer stores it, and the reference of its stored matrix: MXFP8 values (M, K) and S
 * ((M, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise); NVFP4 the stored matrix (R, C) packed two a byte
 * (rowwise (M, K), columnwise (K, M)) and S (R, ceil(C/16)). */
typedef struct {
  spec s;
  int nvfp4;
  int64_t M, K, R, C, SR, SC, row_bytes;
  uint8_t *values, *S;
  float amax[M_ROWS + 100];
  int64_t amax_count;
  int e4m3_max;
  test_tensor *data, *scale_buf, *amax_t;
  const mxfp8_tensor *handle;
  mxfp8_tensor *mx;
  mxfp8_tensor *nv;
  void *device[3]; /* the GPU case's copies of data, scales and amax */
} source;

static void build_source(source *f, const spec *s, uint64_t *rng) {
  memset(f, 0, sizeof *f);
  f->s = *s;
  f->nvfp4 = s->format == MXFP8_FORMAT_NVFP4;
  f->M = M_ROWS;
  f->K = s->K;
  const int row = s->direction == MXFP8_DIRECTION_ROWWISE;
  if (f->nvfp4) {
    f->R = row ? f->M : f->K;
    f->C = row ? f->K : f->M;
    f->SR = f->R;
    f->SC = ref_ceil_div(f->C, 16);
    f->row_bytes = f->C / 2;
  } else {
    f->R = f->M;
    f->C = f->K;
    f->SR = row ? f->M : ref_ceil_div(f->M, 32);
    f->SC = row ? ref_ceil_div(f->K, 32) : f->K;
    f->row_bytes = f->K;
  }
  const int64_t vbytes = f->R * f->row_bytes;
  f->values = malloc((size_t)vbytes);
  fill_random(f->values, (size_t)vbytes, rng);
  f->S = malloc((size_t)(f->SR * f->SC));
  fill_random_scales(f->S, (size_t)(f->SR * f->SC), rng);
  const int64_t dshape[2] = {f->R, f->row_bytes};
  f->data = test_tensor_new(2, dshape, kDLUInt, 1);
  memcpy(f->data->buffer, f->values, (size_t)vbytes);
  /* The stored scales. MXFP8 columnwise 128x4 storage swizzles S^T; NVFP4 swizzles S itself. */
  const int transposed = !f->nvfp4 && !row;
  const int64_t TR = transposed ? f->SC : f->SR, TC = transposed ? f->SR : f->SC;
  if (s->storage == SWIZZLED) {
    const int64_t Cp = ref_round_up(TC, 4), n = ref_round_up(TR, 128) * Cp;
    f->scale_buf = test_tensor_new(1, &n, kDLUInt, 1); /* poisoned padding */
    for (int64_t r = 0; r < TR; ++r)
      for (int64_t c = 0; c < TC; ++c)
        f->scale_buf->buffer[ref_swizzled_index(r, c, Cp)] = transposed ? f->S[c * f->SC + r] : f->S[r * f->SC + c];
  } else {
    int64_t shape[2] = {f->SR, f->SC};
    if (s->storage == PADDED) { /* TE's allocation: rowwise (128, 4), columnwise (4, 128) multiples */
      const int col_padded = !f->nvfp4 && !row;
      shape[0] = ref_round_up(f->SR, col_padded ? 4 : 128);
      shape[1] = ref_round_up(f->SC, col_padded ? 128 : 4);
    }
    f->scale_buf = test_tensor_new(2, shape, kDLUInt, 1);
    for (int64_t r = 0; r < f->SR; ++r) memcpy(f->scale_buf->buffer + r * shape[1], f->S + r * f->SC, (size_t)f->SC);
  }
  f->device[0] = to_cuda(f->data);
  f->device[1] = to_cuda(f->scale_buf);
  const int64_t logical[2] = {f->M, f->K};
  if (f->nvfp4) {
    static const float kAmax[] = {3.5f, 0.0f, 2688.0f, 1e-30f, 65504.0f, 0.125f, 7.0e6f, 1.0f / 3.0f};
    f->amax_count = s->per_row ? f->R : 1;
    for (int64_t i = 0; i < f->amax_count; ++i) f->amax[i] = kAmax[(i * 5 + (uint64_t)s->K) % 8];
    f->amax_t = test_float_tensor(f->amax_count, f->amax);
    f->amax_t->bytes = (size_t)(4 * f->amax_count);
    f->device[2] = to_cuda(f->amax_t);
    f->e4m3_max = s->per_row ? 256 : 448;
    mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
    d.scale_layout = s->storage == SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    d.e4m3_max = f->e4m3_max;
    d.ndim = 2;
    d.shape = logical;
    if (row) {
      d.rowwise_data = &f->data->managed;
      d.rowwise_scale_inv = &f->scale_buf->managed;
      d.rowwise_amax = &f->amax_t->managed;
    } else {
      d.columnwise_data = &f->data->managed;
      d.columnwise_scale_inv = &f->scale_buf->managed;
      d.columnwise_amax = &f->amax_t->managed;
    }
    EXPECT(mxfp8_tensor_create(&d, &f->nv) == MXFP8_OK, "create: %s", mxfp8_last_error());
    /* One handle type in a transfer: the NVFP4 handle is an mxfp8_tensor of format NVFP4 (transfer.h). */
    f->handle = (const mxfp8_tensor *)f->nv;
    return;
  }
  mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
  d.format = s->format;
  d.scale_layout = s->storage == SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  d.ndim = 2;
  d.shape = logical;
  if (row) {
    d.rowwise_data = &f->data->managed;
    d.rowwise_scale_inv = &f->scale_buf->managed;
  } else {
    d.columnwise_data = &f->data->managed;
    d.columnwise_scale_inv = &f->scale_buf->managed;
  }
  EXPECT(mxfp8_tensor_create(&d, &f->mx) == MXFP8_OK, "create: %s", mxfp8_last_error());
  f->handle = f->mx;
}

static void free_source(source *f) {
  for (int i = 0; i < 3; ++i) device_free(f->device[i]);
  mxfp8_tensor_release(f->mx);
  mxfp8_tensor_release(f->nv);
  test_tensor_free(f->data);
  test_tensor_free(f->scale_buf);
  test_tensor_free(f->amax_t);
  free(f->values);
  free(f->S);
}

/* The shard of each kind for a tensor, legal for its format and direction (transfer.h, "Resharding"):
 * its row pieces of M and its columns of K. */
typedef struct {
  int kind;
  int64_t pieces[3][2];
  int npieces;
  int64_t c0, c1;
  mxfp8_shard shard;
  int64_t flat[6];
} shard_of;

static void make_shard(shard_of *sh, const source *f, int kind) {
  memset(sh, 0, sizeof *sh);
  sh->kind = kind;
  const int col = f->s.direction == MXFP8_DIRECTION_COLUMNWISE;
  sh->npieces = 1;
  sh->pieces[0][0] = 0;
  sh->pieces[0][1] = f->M;
  sh->c0 = 0;
  sh->c1 = f->K;
  const mxfp8_shard init = MXFP8_SHARD_INIT;
  sh->shard = init;
  if (kind == ROWS) { /* columnwise: block boundaries (32 for MXFP8, 16 for NVFP4's stored columns) or M */
    sh->pieces[0][0] = col ? (f->nvfp4 ? 16 : 32) : 5;
    sh->pieces[0][1] = col ? (f->nvfp4 ? M_ROWS : 96) : 77;
    sh->shard.row_begin = sh->pieces[0][0];
    sh->shard.row_end = sh->pieces[0][1];
  } else if (kind == COLS) { /* rowwise: block boundaries or K */
    sh->c0 = col ? 7 : (f->nvfp4 ? 16 : 32);
    sh->c1 = col ? 61 : f->K;
    sh->shard.col_begin = sh->c0;
    sh->shard.col_end = sh->c1;
  } else if (kind == PIECES) { /* columnwise MXFP8: every piece but the last ends on a block */
    static const int64_t row_pieces[3][2] = {{100, 130}, {3, 40}, {0, 0}};
    static const int64_t col_pieces[3][2] = {{64, 96}, {0, 32}, {96, 130}};
    sh->npieces = col ? 3 : 2;
    memcpy(sh->pieces, col ? col_pieces : row_pieces, sizeof sh->pieces);
    for (int p = 0; p < sh->npieces; ++p) {
      sh->flat[2 * p] = sh->pieces[p][0];
      sh->flat[2 * p + 1] = sh->pieces[p][1];
    }
    sh->shard.num_row_pieces = (size_t)sh->npieces;
    sh->shard.row_pieces = sh->flat;
  }
}

static int64_t shard_rows(const shard_of *sh) {
  int64_t n = 0;
  for (int p = 0; p < sh->npieces; ++p) n += sh->pieces[p][1] - sh->pieces[p][0];
  return n;
}

/* What lands for one entry: its values, its compact S, and (NVFP4) the amaxes it carries. */
typedef struct {
  uint8_t *values, *S;
  int64_t values_bytes, SR, SC;
  float amax[M_ROWS + 100];
  int64_t amax_count;
  int transposed; /* the 128x4 target swizzles S^T (MXFP8 columnwise) */
} landing;

static void cut(landing *out, const source *f, const shard_of *sh) {
  memset(out, 0, sizeof *out);
  const int col = f->s.direction == MXFP8_DIRECTION_COLUMNWISE;
  const int64_t rows = shard_rows(sh), cols = sh->c1 - sh->c0;
  if (f->nvfp4) {
    /* Cut from the stored matrix: rowwise rows are M's rows; columnwise the stored rows are K's columns
     * and the stored columns M's rows (one piece). */
    const int64_t r0 = col ? sh->c0 : 0, nr = col ? cols : rows;
    const int64_t k0 = col ? sh->pieces[0][0] : sh->c0, k1 = col ? sh->pieces[0][1] : sh->c1;
    out->SR = nr;
    out->SC = ref_ceil_div(k1 - k0, 16);
    out->values_bytes = nr * ((k1 - k0) / 2);
    out->values = malloc((size_t)out->values_bytes + 1);
    out->S = malloc((size_t)(out->SR * out->SC) + 1);
    int64_t at = 0;
    for (int p = 0; p < (col ? 1 : sh->npieces); ++p) {
      const int64_t b = col ? r0 : sh->pieces[p][0], e = col ? r0 + nr : sh->pieces[p][1];
      for (int64_t r = b; r < e; ++r, ++at) {
        memcpy(out->values + at * ((k1 - k0) / 2), f->values + r * f->row_bytes + k0 / 2, (size_t)((k1 - k0) / 2));
        memcpy(out->S + at * out->SC, f->S + r * f->SC + k0 / 16, (size_t)out->SC);
        if (f->amax_count > 1) out->amax[at] = f->amax[r];
      }
    }
    out->amax_count = f->amax_count > 1 ? nr : 1;
    if (f->amax_count == 1) out->amax[0] = f->amax[0];
    return;
  }
  out->values_bytes = rows * cols;
  out->values = malloc((size_t)out->values_bytes + 1);
  int64_t at = 0;
  for (int p = 0; p < sh->npieces; ++p)
    for (int64_t r = sh->pieces[p][0]; r < sh->pieces[p][1]; ++r, ++at)
      memcpy(out->values + at * cols, f->values + r * f->K + sh->c0, (size_t)cols);
  out->transposed = col;
  if (!col) { /* rows of S are the value rows; blocks of 32 along K */
    const int64_t b0 = sh->c0 / 32, b1 = ref_ceil_div(sh->c1, 32);
    out->SR = rows;
    out->SC = b1 - b0;
    out->S = malloc((size_t)(out->SR * out->SC) + 1);
    at = 0;
    for (int p = 0; p < sh->npieces; ++p)
      for (int64_t r = sh->pieces[p][0]; r < sh->pieces[p][1]; ++r, ++at)
        memcpy(out->S + at * out->SC, f->S + r * f->SC + b0, (size_t)out->SC);
    return;
  }
  /* Columnwise: blocks of 32 along M, so each piece brings its blocks' rows of S. */
  out->SC = cols;
  out->SR = 0;
  for (int p = 0; p < sh->npieces; ++p) out->SR += ref_ceil_div(sh->pieces[p][1], 32) - sh->pieces[p][0] / 32;
  out->S = malloc((size_t)(out->SR * out->SC) + 1);
  at = 0;
  for (int p = 0; p < sh->npieces; ++p)
    for (int64_t b = sh->pieces[p][0] / 32; b < ref_ceil_div(sh->pieces[p][1], 32); ++b, ++at)
      memcpy(out->S + at * out->SC, f->S + b * f->SC + sh->c0, (size_t)out->SC);
}

static void free_landing(landing *l) {
  free(l->values);
  free(l->S);
}

/* S in a target layout: compact, or 128x4 (S^T for MXFP8 columnwise) with zero padding. */
static uint8_t *in_layout(const landing *l, int layout, int64_t *bytes) {
  if (layout == MXFP8_SCALE_LAYOUT_COMPACT) {
    *bytes = l->SR * l->SC;
    uint8_t *out = malloc((size_t)*bytes + 1);
    memcpy(out, l->S, (size_t)*bytes);
    return out;
  }
  const int64_t TR = l->transposed ? l->SC : l->SR, TC = l->transposed ? l->SR : l->SC;
  const int64_t Cp = ref_round_up(TC, 4);
  *bytes = (TR == 0 || TC == 0) ? 0 : ref_round_up(TR, 128) * Cp;
  uint8_t *out = calloc((size_t)*bytes + 1, 1);
  for (int64_t r = 0; r < TR; ++r)
    for (int64_t c = 0; c < TC; ++c)
      out[ref_swizzled_index(r, c, Cp)] = l->transposed ? l->S[c * l->SC + r] : l->S[r * l->SC + c];
  return out;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The decode convention, amax / (6 * E4M3_MAX), one float division (ModelOpt's weight_scale_2). */
static uint32_t ref_decode_scale(float amax, int e4m3_max) {
  const float s = amax / (6.0f * (float)e4m3_max);
  return isnan(s) ? 0x7FFFFFFFu : bits_of(s);
}

/* The verdict of a cell, from the header's rules. */
static mxfp8_status expected_status(const source *f, int kind, int target, int route) {
  const int col = f->s.direction == MXFP8_DIRECTION_COLUMNWISE;
  if (f->nvfp4 && col && kind == PIECES) return MXFP8_ERROR_UNSUPPORTED; /* several stored column windows */
  if (kind == WHOLE || target != MXFP8_SCALE_LAYOUT_128X4) return MXFP8_OK;
  if (route == ROUTE_B) return MXFP8_OK; /* the shard travels compact and lands whole */
  /* A shard written 128x4: row pieces must fill whole tiles (rowwise, 128 rows each but the last), and
   * a window of 128x4-stored scales is not read into 128x4 in one pass. */
  if (kind == PIECES) return MXFP8_ERROR_UNSUPPORTED;
  if (route == ROUTE_A && f->s.storage == SWIZZLED) return MXFP8_ERROR_UNSUPPORTED;
  return MXFP8_OK;
}

/* One entry's buffers, poisoned, and the DLPack views of them. */
typedef struct {
  uint8_t *values, *scales;
  float *global;
  int64_t values_bytes, scales_bytes, global_count;
  int64_t vshape[1], sshape[1], gshape[1];
  DLTensor v, s, g;
  void *device[3]; /* the GPU case's destinations; values, scales and global are their mirrors */
} buffers;

static void make_buffers(buffers *b, const landing *l, int target) {
  memset(b, 0, sizeof *b);
  int64_t sb;
  free(in_layout(l, target, &sb));
  b->values_bytes = l->values_bytes;
  b->scales_bytes = sb;
  b->global_count = l->amax_count;
  b->values = malloc((size_t)b->values_bytes + 1);
  b->scales = malloc((size_t)sb + 1);
  b->global = malloc((size_t)(4 * b->global_count + 4));
  memset(b->values, POISON, (size_t)b->values_bytes + 1);
  memset(b->scales, POISON, (size_t)sb + 1);
  memset(b->global, POISON, (size_t)(4 * b->global_count + 4));
  b->vshape[0] = b->values_bytes;
  b->sshape[0] = sb;
  b->gshape[0] = b->global_count;
  b->v = (DLTensor){b->values, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, b->vshape, NULL, 0};
  b->s = (DLTensor){b->scales, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, b->sshape, NULL, 0};
  b->g = (DLTensor){b->global, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, b->gshape, NULL, 0};
  if (!g_cuda) return;
  const size_t sizes[3] = {(size_t)b->values_bytes, (size_t)sb, (size_t)(4 * b->global_count)};
  DLTensor *views[3] = {&b->v, &b->s, &b->g};
  for (int i = 0; i < 3; ++i) {
    b->device[i] = device_buffer(sizes[i], POISON);
    views[i]->data = b->device[i];
    views[i]->device = (DLDevice){kDLCUDA, 0};
  }
}

/* The GPU case: the destinations read back into their host mirrors (a synchronizing copy). */
static void read_back(const buffers *b) {
  if (!g_cuda) return;
  fetch(b->values, b->device[0], (size_t)b->values_bytes + 1);
  fetch(b->scales, b->device[1], (size_t)b->scales_bytes + 1);
  fetch(b->global, b->device[2], (size_t)(4 * b->global_count));
}

static void free_buffers(buffers *b) {
  for (int i = 0; i < 3; ++i) device_free(b->device[i]);
  free(b->values);
  free(b->scales);
  free(b->global);
}

static int untouched(const buffers *b) {
  read_back(b);
  for (int64_t i = 0; i <= b->values_bytes; ++i)
    if (b->values[i] != POISON) return 0;
  for (int64_t i = 0; i <= b->scales_bytes; ++i)
    if (b->scales[i] != POISON) return 0;
  const uint8_t *g = (const uint8_t *)b->global;
  for (int64_t i = 0; i < 4 * b->global_count; ++i)
    if (g[i] != POISON) return 0;
  return 1;
}

static void check_buffers(const buffers *b, const landing *l, const source *f, int target, const char *what) {
  read_back(b);
  EXPECT(memcmp(b->values, l->values, (size_t)l->values_bytes) == 0, "%s: values differ", what);
  EXPECT(b->values[b->values_bytes] == POISON, "%s: a byte past the values was written", what);
  int64_t sb;
  uint8_t *want = in_layout(l, target, &sb);
  for (int64_t i = 0; i < sb; ++i)
    EXPECT(b->scales[i] == want[i], "%s: scale byte %lld is 0x%02x, want 0x%02x", what, (long long)i, b->scales[i], want[i]);
  EXPECT(b->scales[sb] == POISON, "%s: a byte past the scales was written", what);
  free(want);
  if (!f->nvfp4) return;
  for (int64_t i = 0; i < l->amax_count; ++i) {
    const uint32_t got = bits_of(b->global[i]), exp = ref_decode_scale(l->amax[i], f->e4m3_max);
    EXPECT(got == exp, "%s: global scale %lld is 0x%08x, want 0x%08x", what, (long long)i, got, exp);
  }
}

/* A group of entries moved by one desc along one route; each entry i is sources[idx[i]]. */
typedef struct {
  int n;
  const source *src[NSPECS];
  shard_of shards[NSPECS];
  landing land[NSPECS];
  buffers buf[NSPECS];
  const mxfp8_tensor *tensors[NSPECS];
  const mxfp8_shard *shard_ptrs[NSPECS];
  int32_t directions[NSPECS], targets[NSPECS], formats[NSPECS], source_layouts[NSPECS], e4m3[NSPECS], ndims[NSPECS];
  int64_t shapes_store[NSPECS][2];
  const int64_t *shapes[NSPECS];
  DLTensor *values[NSPECS], *scales[NSPECS], *globals[NSPECS];
} group;

static void group_init(group *g, source *const *srcs, int n, int kind, int target) {
  memset(g, 0, sizeof *g);
  g->n = n;
  for (int i = 0; i < n; ++i) {
    g->src[i] = srcs[i];
    make_shard(&g->shards[i], srcs[i], kind);
    cut(&g->land[i], srcs[i], &g->shards[i]);
    make_buffers(&g->buf[i], &g->land[i], target);
    g->tensors[i] = srcs[i]->handle;
    g->shard_ptrs[i] = kind == WHOLE ? NULL : &g->shards[i].shard;
    g->directions[i] = srcs[i]->s.direction;
    g->targets[i] = target;
    g->values[i] = &g->buf[i].v;
    g->scales[i] = &g->buf[i].s;
    g->globals[i] = srcs[i]->nvfp4 ? &g->buf[i].g : NULL;
  }
}

static void group_free(group *g) {
  for (int i = 0; i < g->n; ++i) {
    free_landing(&g->land[i]);
    free_buffers(&g->buf[i]);
  }
}

/* Runs desc immediately or through a plan; a refusal must come from both with the same status. */
static mxfp8_status run_desc(const mxfp8_transfer_desc *d, int prepared) {
  const mxfp8_status checked = mxfp8_transfer_check(d);
  if (!prepared) {
    const mxfp8_status st = mxfp8_transfer(d, NULL);
    EXPECT(st == checked, "mxfp8_transfer_check said %d, mxfp8_transfer %d (%s)", checked, st, mxfp8_last_error());
    return st;
  }
  mxfp8_plan *plan = NULL;
  const mxfp8_status st = mxfp8_transfer_prepare(d, &plan);
  EXPECT(st == checked, "mxfp8_transfer_check said %d, mxfp8_transfer_prepare %d (%s)", checked, st, mxfp8_last_error());
  if (st != MXFP8_OK) {
    EXPECT(plan == NULL, "a refused preparation handed out a plan");
    return st;
  }
  EXPECT(mxfp8_plan_run(plan, NULL) == MXFP8_OK, "run: %s", mxfp8_last_error());
  mxfp8_plan_release(plan);
  return MXFP8_OK;
}

/* The receiver's side: the bucket described by its parts and per-entry arrays, into the group's
 * buffers. `sent_shard`: the bucket holds the shards (route B), so each part's shape is the shard's. */
static mxfp8_status import_bucket(group *g, DLTensor *bucket, const mxfp8_bucket_part *parts, int part_layout,
                                  int sent_shard, int prepared) {
  for (int i = 0; i < g->n; ++i) {
    const source *f = g->src[i];
    g->ndims[i] = 2;
    g->shapes_store[i][0] = sent_shard ? shard_rows(&g->shards[i]) : f->M;
    g->shapes_store[i][1] = sent_shard ? g->shards[i].c1 - g->shards[i].c0 : f->K;
    g->shapes[i] = g->shapes_store[i];
    g->formats[i] = f->s.format;
    g->source_layouts[i] = part_layout;
    g->e4m3[i] = f->e4m3_max;
  }
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_BUCKET;
  d.destination = MXFP8_TRANSFER_TO_NOTHING;
  d.count = (size_t)g->n;
  d.directions = g->directions;
  d.shards = sent_shard ? NULL : g->shard_ptrs;
  d.bucket_in = bucket;
  d.parts_in = parts;
  d.ndims = g->ndims;
  d.shapes = g->shapes;
  d.formats = g->formats;
  d.source_layouts = g->source_layouts;
  d.e4m3_maxes = g->e4m3;
  const mxfp8_status source_side = mxfp8_transfer_check(&d);
  d.destination = MXFP8_TRANSFER_TO_BUFFERS;
  d.target_layouts = g->targets;
  d.values = g->values;
  d.scales = g->scales;
  d.global_scales = g->globals;
  const mxfp8_status st = run_desc(&d, prepared);
  /* The source side alone accepts what the whole transfer accepts, and refuses only what is the
   * source's (a shard): a refusal of the target alone passes the source-side check. */
  if (st == MXFP8_OK) EXPECT(source_side == MXFP8_OK, "the bucket alone was refused: %d", source_side);
  return st;
}

/* Moves the group along `route`; returns the first refusal, or MXFP8_OK with every buffer written. */
static mxfp8_status move(group *g, int route, int prepared, int kind, int target) {
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  d.count = (size_t)g->n;
  d.tensors = g->tensors;
  d.directions = g->directions;
  if (route == ROUTE_A) {
    d.destination = MXFP8_TRANSFER_TO_BUFFERS;
    d.shards = kind == WHOLE ? NULL : g->shard_ptrs;
    d.target_layouts = g->targets;
    d.values = g->values;
    d.scales = g->scales;
    d.global_scales = g->globals;
    return run_desc(&d, prepared);
  }
  /* Into a bucket: the sender's shard (B) or the whole tensor (C), scales compact, or 128x4 when the
   * whole tensor goes to a compact target (so the receiver unswizzles). */
  const int part_layout = kind == WHOLE && target == MXFP8_SCALE_LAYOUT_COMPACT ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT;
  int32_t part_layouts[NSPECS];
  for (int i = 0; i < g->n; ++i) part_layouts[i] = part_layout;
  d.destination = MXFP8_TRANSFER_TO_BUCKET;
  d.shards = route == ROUTE_B && kind != WHOLE ? g->shard_ptrs : NULL;
  d.target_layouts = part_layouts;
  mxfp8_bucket_part parts[NSPECS];
  memset(parts, 0xEE, sizeof parts);
  uint64_t total = 0;
  const mxfp8_status planned = mxfp8_bucket_parts(&d, 256, parts, &total);
  if (planned != MXFP8_OK) return planned;
  for (int i = 0; i < g->n; ++i)
    EXPECT(parts[i].values_offset % 256 == 0 && parts[i].scales_offset % 256 == 0 && parts[i].amax_offset % 256 == 0 &&
               (g->src[i]->nvfp4 || (parts[i].amax_offset == 0 && parts[i].amax_bytes == 0)),
           "part %d not aligned, or an MXFP8 entry with an amax part", i);
  uint8_t *bytes = malloc((size_t)total + 1);
  memset(bytes, 0xA5, (size_t)total + 1);
  int64_t bshape[1] = {(int64_t)total};
  void *on_device = g_cuda ? device_buffer((size_t)total, 0xA5) : NULL;
  DLTensor bucket = {g_cuda ? on_device : bytes, {g_cuda ? kDLCUDA : kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  d.bucket_out = &bucket;
  d.parts_out = parts;
  mxfp8_status st = run_desc(&d, prepared);
  EXPECT(st == MXFP8_OK, "a planned bucket was not filled: %s", mxfp8_last_error());
  if (g_cuda) fetch(bytes, on_device, (size_t)total + 1);
  EXPECT(bytes[total] == 0xA5, "a byte past the bucket was written");
  /* The amax travels as TE keeps it. */
  for (int i = 0; i < g->n; ++i)
    if (g->src[i]->nvfp4 && route == ROUTE_B)
      EXPECT(memcmp(bytes + parts[i].amax_offset, g->land[i].amax, (size_t)parts[i].amax_bytes) == 0, "bucket amax %d", i);
  st = import_bucket(g, &bucket, parts, part_layout, route == ROUTE_B, prepared);
  device_free(on_device);
  free(bytes);
  return st;
}

static const char *kKindNames[] = {"whole", "rows", "cols", "pieces"};

static void run_matrix(void) {
  uint64_t rng = 0x7A5F;
  source src[NSPECS];
  source *all[NSPECS];
  for (int i = 0; i < NSPECS; ++i) {
    build_source(&src[i], &kSpecs[i], &rng);
    all[i] = &src[i];
  }
  int cells = 0, refused = 0;
  for (int kind = 0; kind < SHARD_KINDS; ++kind)
    for (int t = 0; t < 2; ++t)
      for (int route = 0; route < ROUTES; ++route)
        for (int prepared = 0; prepared < 2; ++prepared) {
          const int target = t ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT;
          if (route == ROUTE_C && kind == WHOLE) continue; /* route B's whole tensors are the same cell */
          source *accepted[NSPECS];
          int n = 0;
          for (int i = 0; i < NSPECS; ++i) {
            char what[160];
            snprintf(what, sizeof what, "tensor %d (format %d, dir %d, storage %d), %s shard, target %d, route %c, %s", i,
                     kSpecs[i].format, kSpecs[i].direction, kSpecs[i].storage, kKindNames[kind], target, 'A' + route,
                     prepared ? "prepared" : "immediate");
            group g;
            group_init(&g, &all[i], 1, kind, target);
            const mxfp8_status want = expected_status(&src[i], kind, target, route);
            const mxfp8_status got = move(&g, route, prepared, kind, target);
            EXPECT(got == want, "%s: status %d, want %d (%s)", what, got, want, got ? mxfp8_last_error() : "");
            if (got == MXFP8_OK) check_buffers(&g.buf[0], &g.land[0], &src[i], target, what);
            else EXPECT(untouched(&g.buf[0]), "%s: a refused transfer wrote a destination", what);
            ++cells;
            refused += got != MXFP8_OK;
            group_free(&g);
            if (want == MXFP8_OK) accepted[n++] = &src[i];
          }
          /* Every accepted entry of the cell in one desc: formats, directions and layouts mixed. */
          group g;
          group_init(&g, accepted, n, kind, target);
          const mxfp8_status got = move(&g, route, prepared, kind, target);
          EXPECT(got == MXFP8_OK, "%d entries together (%s shard, target %d, route %c): %s", n, kKindNames[kind], target,
                 'A' + route, mxfp8_last_error());
          for (int i = 0; i < n; ++i) check_buffers(&g.buf[i], &g.land[i], g.src[i], target, "together");
          group_free(&g);
        }
  print_message("%s: %d cells, %d refused as the rules say\n", g_cuda ? "CUDA memory" : "host memory", cells, refused);
  for (int i = 0; i < NSPECS; ++i) free_source(&src[i]);
}

static void test_matrix(void **state) {
  (void)state;
  g_cuda = 0;
  run_matrix();
}

/* The same matrix with every buffer in CUDA memory: the one launch per transfer, the bulk copies and the
 * global-scale kernels instead of the host loops. */
static void test_matrix_gpu(void **state) {
  (void)state;
  REQUIRE_GPU();
  g_cuda = 1;
  run_matrix();
  g_cuda = 0;
}

/* What a desc must not be: each refused before anything is read or written, naming the field. */
static void test_refusals(void **state) {
  (void)state;
  uint64_t rng = 0xBAD;
  source f;
  build_source(&f, &kSpecs[0], &rng);
  shard_of sh;
  make_shard(&sh, &f, ROWS);
  landing l;
  cut(&l, &f, &sh);
  buffers b;
  make_buffers(&b, &l, MXFP8_SCALE_LAYOUT_COMPACT);
  const mxfp8_tensor *tensors[1] = {f.handle};
  DLTensor *values[1] = {&b.v}, *scales[1] = {&b.s};
  const mxfp8_shard *shards[1] = {&sh.shard};

  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "an UNSET source was taken");
  assert_last_error_contains("desc.source");
  EXPECT(mxfp8_transfer(NULL, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "a NULL desc was taken");
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "an UNSET destination was taken");
  assert_last_error_contains("desc.destination");
  d.destination = MXFP8_TRANSFER_TO_BUFFERS;
  d.count = 1;
  d.tensors = tensors;
  d.values = values;
  d.scales = scales;
  d.shards = shards;

  /* A direction that is none, read with the desc whatever the source. */
  int32_t bad_direction[1] = {7};
  d.directions = bad_direction;
  EXPECT(mxfp8_transfer_check(&d) == MXFP8_ERROR_INVALID_ARGUMENT, "direction 7 was taken");
  assert_last_error_contains("desc.directions[0] is 7");
  d.directions = NULL;

  /* A field of another source or destination. */
  int32_t formats[1] = {MXFP8_FORMAT_E4M3};
  d.formats = formats;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "formats taken from tensors");
  assert_last_error_contains("desc.formats is set");
  d.formats = NULL;
  mxfp8_bucket_part part = {0, 0, 0, 0, 0, 0};
  d.parts_out = &part;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "parts_out taken by a TO_BUFFERS transfer");
  assert_last_error_contains("desc.parts_out is set");
  d.parts_out = NULL;

  /* TO_NOTHING only for the check; a bucket to a bucket nowhere; bucket_parts only for tensors to a bucket. */
  d.destination = MXFP8_TRANSFER_TO_NOTHING;
  d.values = d.scales = NULL;
  EXPECT(mxfp8_transfer_check(&d) == MXFP8_OK, "the source side alone: %s", mxfp8_last_error());
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "TO_NOTHING ran");
  mxfp8_plan *plan = NULL;
  EXPECT(mxfp8_transfer_prepare(&d, &plan) == MXFP8_ERROR_INVALID_ARGUMENT && !plan, "TO_NOTHING prepared");
  uint64_t total = 0;
  EXPECT(mxfp8_bucket_parts(&d, 256, &part, &total) == MXFP8_ERROR_INVALID_ARGUMENT, "bucket_parts of TO_NOTHING");
  mxfp8_transfer_desc bb = MXFP8_TRANSFER_DESC_INIT;
  bb.source = MXFP8_TRANSFER_FROM_BUCKET;
  bb.destination = MXFP8_TRANSFER_TO_BUCKET;
  EXPECT(mxfp8_transfer(&bb, NULL) == MXFP8_ERROR_UNSUPPORTED, "a bucket to a bucket");
  assert_last_error_contains("from a bucket to a bucket");

  /* Rules of a cell: a shard with the fix-up (UNSUPPORTED), a layout that permutes value rows, an
   * engine layout for a shard. */
  d.destination = MXFP8_TRANSFER_TO_BUFFERS;
  d.values = values;
  d.scales = scales;
  d.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_UNSUPPORTED, "a shard with the fix-up");
  d.scale_fixup = MXFP8_SCALE_FIXUP_NONE;
  int32_t trtllm[1] = {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED};
  d.target_layouts = trtllm;
  d.shards = NULL;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "a TRT-LLM target");
  assert_last_error_contains("desc.target_layouts[0]");
  d.destination = MXFP8_TRANSFER_TO_BUCKET;
  d.values = d.scales = NULL;
  EXPECT(mxfp8_bucket_parts(&d, 256, &part, &total) == MXFP8_ERROR_INVALID_ARGUMENT, "a TRT-LLM bucket part");
  /* An MXFP8 entry's part with an amax (what a receiver's desc refuses) is refused by the sender too. */
  d.target_layouts = NULL;
  d.shards = NULL;
  mxfp8_bucket_part planned;
  EXPECT(mxfp8_bucket_parts(&d, 256, &planned, &total) == MXFP8_OK, "plan: %s", mxfp8_last_error());
  uint8_t *bytes = malloc((size_t)total + 64);
  int64_t bshape[1] = {(int64_t)total + 64};
  DLTensor out = {bytes, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  planned.amax_offset = total;
  planned.amax_bytes = 4;
  d.bucket_out = &out;
  d.parts_out = &planned;
  EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "an MXFP8 part with an amax");
  assert_last_error_contains("desc.parts_out[0] gives an amax part");
  d.bucket_out = NULL;
  d.parts_out = NULL;
  free(bytes);
  int32_t deepgemm[1] = {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED};
  d.target_layouts = deepgemm;
  d.shards = shards;
  EXPECT(mxfp8_bucket_parts(&d, 256, &part, &total) == MXFP8_ERROR_UNSUPPORTED, "a shard in DeepGEMM's layout");
  assert_last_error_contains("desc.shards[0]");
  EXPECT(untouched(&b), "a refusal wrote a destination");

  /* A bucket source must say each entry's format and scales layout. */
  mxfp8_transfer_desc r = MXFP8_TRANSFER_DESC_INIT;
  r.source = MXFP8_TRANSFER_FROM_BUCKET;
  r.destination = MXFP8_TRANSFER_TO_NOTHING;
  r.count = 1;
  uint8_t byte = 0;
  int64_t one = 1;
  DLTensor bucket = {&byte, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &one, NULL, 0};
  r.bucket_in = &bucket;
  r.parts_in = &part;
  EXPECT(mxfp8_transfer_check(&r) == MXFP8_ERROR_INVALID_ARGUMENT, "a bucket without formats");
  assert_last_error_contains("desc.formats is NULL");

  free_buffers(&b);
  free_landing(&l);
  free_source(&f);
}

/* "When an entry breaks two rules, the first of the list above that applies is the one reported": a
 * columnwise entry with a DeepGEMM layout (INVALID_ARGUMENT) before a shard with an engine layout
 * (UNSUPPORTED), and an NVFP4 entry with an engine layout (INVALID_ARGUMENT) before row pieces of a
 * columnwise NVFP4 entry (UNSUPPORTED), on every path. The bucket path and the NVFP4 paths resolved the
 * shard first (the C probe, 2026-12-08). */
static void test_the_first_broken_rule_is_reported(void **state) {
  (void)state;
  /* MXFP8 (64, 64), columnwise only; its shard rows [0, 32) into DeepGEMM's packed layout. */
  const int64_t mx_data_shape[2] = {64, 64}, mx_scales_shape[2] = {2, 64};
  test_tensor *md = test_tensor_new(2, mx_data_shape, kDLUInt, 1), *ms = test_tensor_new(2, mx_scales_shape, kDLUInt, 1);
  mxfp8_tensor_desc td = MXFP8_TENSOR_DESC_INIT;
  td.columnwise_data = &md->managed;
  td.columnwise_scale_inv = &ms->managed;
  mxfp8_tensor *mx = NULL;
  assert_int_equal(mxfp8_tensor_create(&td, &mx), MXFP8_OK);
  const mxfp8_tensor *mx_list[1] = {mx};
  const int32_t columnwise[1] = {MXFP8_DIRECTION_COLUMNWISE};
  mxfp8_shard rows = MXFP8_SHARD_INIT;
  rows.row_end = 32;
  const mxfp8_shard *mx_shards[1] = {&rows};
  const int32_t deepgemm[1] = {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED};
  mxfp8_transfer_desc b = MXFP8_TRANSFER_DESC_INIT;
  b.source = MXFP8_TRANSFER_FROM_TENSORS;
  b.destination = MXFP8_TRANSFER_TO_BUCKET;
  b.count = 1;
  b.tensors = mx_list;
  b.directions = columnwise;
  b.shards = mx_shards;
  b.target_layouts = deepgemm;
  mxfp8_bucket_part part;
  uint64_t total = 0;
  assert_int_equal(mxfp8_bucket_parts(&b, 256, &part, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.target_layouts[0] is MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, which lays out rowwise "
                             "scales only");

  /* NVFP4 (M 64, K 32) columnwise only, stored (32, 64): two row pieces of M, into DeepGEMM's layout. */
  const int64_t nv_data_shape[2] = {32, 32}, nv_scales_shape[2] = {32, 4}, logical[2] = {64, 32};
  test_tensor *nd = test_tensor_new(2, nv_data_shape, kDLUInt, 1), *ns = test_tensor_new(2, nv_scales_shape, kDLUInt, 1);
  const float one = 3.0f;
  test_tensor *na = test_float_tensor(1, &one);
  mxfp8_tensor_desc nvd = MXFP8_TENSOR_DESC_INIT;
  nvd.format = MXFP8_FORMAT_NVFP4;
  nvd.block = MXFP8_BLOCK_1X16;
  nvd.e4m3_max = 448;
  nvd.ndim = 2;
  nvd.shape = logical;
  nvd.columnwise_data = &nd->managed;
  nvd.columnwise_scale_inv = &ns->managed;
  nvd.columnwise_amax = &na->managed;
  mxfp8_tensor *nv = NULL;
  assert_int_equal(mxfp8_tensor_create(&nvd, &nv), MXFP8_OK);
  const mxfp8_tensor *nv_list[1] = {nv};
  mxfp8_shard pieces = MXFP8_SHARD_INIT;
  const int64_t row_pieces[4] = {0, 16, 32, 48};
  pieces.num_row_pieces = 2;
  pieces.row_pieces = row_pieces;
  const mxfp8_shard *nv_shards[1] = {&pieces};
  uint8_t out[4096];
  memset(out, POISON, sizeof out);
  const int64_t values_shape[1] = {512}, scales_shape[1] = {512}, global_shape[1] = {1};
  DLTensor values = {out, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, (int64_t *)values_shape, NULL, 0};
  DLTensor scales = {out + 1024, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, (int64_t *)scales_shape, NULL, 0};
  DLTensor global = {out + 2048, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, (int64_t *)global_shape, NULL, 0};
  DLTensor *vs[1] = {&values}, *ss[1] = {&scales}, *gs[1] = {&global};
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  d.destination = MXFP8_TRANSFER_TO_BUFFERS;
  d.count = 1;
  d.tensors = nv_list;
  d.directions = columnwise;
  d.shards = nv_shards;
  d.target_layouts = deepgemm;
  d.values = vs;
  d.scales = ss;
  d.global_scales = gs;
  const char *nvfp4_rule = "desc.target_layouts[0] is MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED for an NVFP4 entry";
  assert_int_equal(mxfp8_transfer_check(&d), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains(nvfp4_rule);
  /* A TRT-LLM target breaks the list's first rule (rows in order) before the NVFP4 one, as into a bucket. */
  const int32_t trtllm[1] = {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED};
  d.target_layouts = trtllm;
  assert_int_equal(mxfp8_transfer_check(&d), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.target_layouts[0] is MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED (2), which permutes value rows");
  d.target_layouts = deepgemm;
  /* The same entry from a bucket of the whole tensor, the receiver asking for the pieces. */
  b.tensors = nv_list;
  b.shards = NULL;
  b.target_layouts = NULL;
  assert_int_equal(mxfp8_bucket_parts(&b, 256, &part, &total), MXFP8_OK);
  uint8_t *bucket_bytes = malloc(total);
  memset(bucket_bytes, 0x11, total);
  const int64_t bucket_shape[1] = {(int64_t)total};
  DLTensor bucket = {bucket_bytes, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, (int64_t *)bucket_shape, NULL, 0};
  const int32_t ndims[1] = {2}, formats[1] = {MXFP8_FORMAT_NVFP4}, compact[1] = {MXFP8_SCALE_LAYOUT_COMPACT},
                e4m3_maxes[1] = {448};
  const int64_t *shapes[1] = {logical};
  mxfp8_transfer_desc r = d;
  r.source = MXFP8_TRANSFER_FROM_BUCKET;
  r.tensors = NULL;
  r.bucket_in = &bucket;
  r.parts_in = &part;
  r.ndims = ndims;
  r.shapes = shapes;
  r.formats = formats;
  r.source_layouts = compact;
  r.e4m3_maxes = e4m3_maxes;
  assert_int_equal(mxfp8_transfer_check(&r), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains(nvfp4_rule);
  for (size_t i = 0; i < sizeof out; ++i) assert_int_equal(out[i], POISON);
  free(bucket_bytes);
  mxfp8_tensor_release(nv);
  mxfp8_tensor_release(mx);
  test_tensor_free(na);
  test_tensor_free(nd);
  test_tensor_free(ns);
  test_tensor_free(md);
  test_tensor_free(ms);
}

/* A receiver's scale shape names S when its last dimension is S's columns and the others multiply to S's
 * rows, a zero among them too: the sender's own manifest of empty experts (E, 0, K), scales (E, 0, ceil(K/32)),
 * was refused (a guard against overflow read 1 > 0 / E as a product past S's rows). */
static void test_scale_shapes_of_empty_tensors(void **state) {
  (void)state;
  static const struct {
    int64_t shape[3], scales[3];
    int32_t format;
    mxfp8_status want;
  } cases[] = {
      {{2, 0, 32}, {2, 0, 1}, MXFP8_FORMAT_E4M3, MXFP8_OK},
      {{2, 0, 32}, {0, 2, 1}, MXFP8_FORMAT_E4M3, MXFP8_OK},        /* another split of 0 rows */
      {{0, 3, 64}, {0, 3, 2}, MXFP8_FORMAT_E4M3, MXFP8_OK},
      {{2, 0, 32}, {2, 0, 2}, MXFP8_FORMAT_NVFP4, MXFP8_OK},       /* NVFP4: ceil(32/16) columns */
      {{2, 3, 32}, {2, 0, 1}, MXFP8_FORMAT_E4M3, MXFP8_ERROR_INVALID_ARGUMENT}, /* 6 rows, not 0 */
      {{2, 0, 32}, {2, 1, 1}, MXFP8_FORMAT_E4M3, MXFP8_ERROR_INVALID_ARGUMENT}, /* 2 rows, not 0 */
      {{2, 0, 32}, {2, 0, 3}, MXFP8_FORMAT_E4M3, MXFP8_ERROR_INVALID_ARGUMENT}, /* not S's columns */
      {{2, 0, 32}, {-1, 0, 1}, MXFP8_FORMAT_E4M3, MXFP8_ERROR_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int nvfp4 = cases[i].format == MXFP8_FORMAT_NVFP4;
    const int64_t *shape = cases[i].shape, *scales = cases[i].scales;
    /* The parts of the entry's true size, so that only the scale shape is wrong where one is. */
    const uint64_t rows = (uint64_t)(shape[0] * shape[1]), k = (uint64_t)shape[2];
    const uint64_t values = nvfp4 ? rows * k / 2 : rows * k, scale_bytes = rows * ((k + (nvfp4 ? 15 : 31)) / (nvfp4 ? 16 : 32));
    uint8_t bytes[512];
    int64_t size = sizeof bytes;
    DLTensor bucket = {bytes, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &size, NULL, 0};
    mxfp8_bucket_part part = {0, values, 256, scale_bytes, nvfp4 ? 384 : 0, nvfp4 ? 4 : 0};
    const int32_t ndims = 3, format = cases[i].format, layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR, e4m3_max = 448;
    mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_NOTHING, 1);
    d.bucket_in = &bucket;
    d.parts_in = &part;
    d.ndims = &ndims;
    d.shapes = &shape;
    d.formats = &format;
    d.source_layouts = &layout;
    d.e4m3_maxes = &e4m3_max;
    d.scales_ndims = &ndims;
    d.scales_shapes = &scales;
    const mxfp8_status got = mxfp8_transfer_check(&d);
    EXPECT(got == cases[i].want, "case %zu: status %d, want %d: %s", i, (int)got, (int)cases[i].want, mxfp8_last_error());
    if (cases[i].want != MXFP8_OK) assert_last_error_contains("desc.scales_shapes[0] is");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix),
      cmocka_unit_test(test_matrix_gpu),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_scale_shapes_of_empty_tensors),
      cmocka_unit_test(test_the_first_broken_rule_is_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
