"""mxfp8.jax: the library's operations as XLA FFI targets, inside and outside jax.jit, under jax.vmap, on
JAX's CPU platform (the host handlers) and, where jaxlib has CUDA, on the GPU. Every result is compared
bit for bit with the library's own Python API on the same bytes (which the rest of the suite checks
against the layouts' formulas and Transformer Engine's rules); inputs are random with partial blocks and
rows that are not multiples of 128.

Skips when jax is not installed or the package was built without the handlers, unless MXFP8_REQUIRE_JAX=1
(scripts/test.sh sets it), which turns the skip into a failure.
"""
import os
import re

import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8


def _load():
    try:
        import jax  # noqa: F401

        import mxfp8.jax as mj

        mj.xla_library_path()
        return mj
    except (ImportError, FileNotFoundError) as e:
        if os.environ.get("MXFP8_REQUIRE_JAX") == "1":
            raise
        pytest.skip(f"the XLA FFI handlers are not available: {e}", allow_module_level=True)


mj = _load()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def _platforms():
    found = ["cpu"]
    try:
        if jax.devices("cuda"):
            found.append("cuda")
    except RuntimeError:
        pass
    return found


PLATFORMS = _platforms()


@pytest.fixture(params=["cpu", "cuda"])
def put(request):
    """Puts NumPy arrays on the platform's first device."""
    if request.param not in PLATFORMS:
        pytest.skip("jaxlib has no CUDA device here")
    device = jax.devices(request.param)[0]
    return lambda *arrays: [jax.device_put(jnp.asarray(a), device) for a in arrays]


def weights(shape, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * np.exp2(rng.integers(-6, 6, shape[:-1] + (1,)))
    return x.astype(dtype)


def bytes_of(a):
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape", [(200, 100), (3, 40, 33), (1, 1)])
def test_scale_swizzle_both_ways(put, shape, jit):
    data, buf, s = make_mxfp8(shape, "swizzled", seed=sum(shape))
    (sw,) = put(buf)
    r, c = s.shape
    unswizzle = jax.jit(mj.unswizzle_scales, static_argnums=(1, 2)) if jit else mj.unswizzle_scales
    compact = unswizzle(sw, r, c)
    assert compact.shape == (r, c) and compact.dtype == jnp.uint8
    np.testing.assert_array_equal(np.asarray(compact), s)
    back = (jax.jit(mj.swizzle_scales) if jit else mj.swizzle_scales)(compact)
    np.testing.assert_array_equal(np.asarray(back), np.from_dlpack(mxfp8.swizzle_scales(s)).reshape(-1))


@pytest.mark.parametrize("target", ["compact", "cutlass_128x4", "deepgemm", "deepgemm_float32"])
@pytest.mark.parametrize("storage", ["padded", "swizzled", "compact"])
def test_convert_equals_the_library(put, storage, target):
    data, buf, s = make_mxfp8((257, 200), storage, seed=len(target))
    want = mxfp8.convert(data, buf, target, swizzled=storage == "swizzled", values=True)
    d, b = put(data.view(np.uint8), buf)
    got = jax.jit(lambda d, b: mj.convert(d, b, target, swizzled=storage == "swizzled", fp8_dtype="e4m3",
                                          values=True))(d, b)
    want_scales = want.scales
    if target == "deepgemm":  # mxfp8.convert views DeepGEMM's storage with its strides; JAX returns the storage
        want_scales = np.lib.stride_tricks.as_strided(want.scales, (mxfp8.layout_bytes(target, *s.shape) // 4,), (4,))
    np.testing.assert_array_equal(bytes_of(got.scales), bytes_of(want_scales))
    np.testing.assert_array_equal(np.asarray(got.values), data)
    if target in ("compact", "deepgemm_float32"):
        assert got.scales.shape == s.shape
    assert got.scales.dtype == {"deepgemm": jnp.int32, "deepgemm_float32": jnp.float32}.get(target, jnp.uint8)


@pytest.mark.parametrize("target", ["cutlass_128x4", "deepgemm_float32", "trtllm_gated"])
def test_grouped_experts_in_one_call(put, target):
    experts, n, k = 4, 128, 200
    c = -(-k // 32)
    rng = np.random.default_rng(9)
    data = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
    s = rng.integers(1, 255, (experts, n, c), dtype=np.uint8)
    want = mxfp8.convert(data, s.reshape(-1), target, num_experts=experts, scales="compact", swizzled=False,
                         values=True)
    d, b = put(data, s.reshape(-1))
    got = jax.jit(lambda d, b: mj.convert(d, b, target, num_experts=experts, scales="compact", swizzled=False,
                                          values=True))(d, b)
    np.testing.assert_array_equal(bytes_of(got.scales), bytes_of(want.scales))
    np.testing.assert_array_equal(np.asarray(got.values).reshape(-1), np.asarray(want.values).reshape(-1))
    assert got.scales.shape[0] == experts and got.values.shape == (experts, n, k)


@pytest.mark.parametrize("target,pad", [("trtllm_gated", (128, 256)), ("trtllm", (256, 128)), ("compact", (64, 0)),
                                        ("cutlass_128x4", (0, 64))])
def test_grouped_experts_padded_as_the_engine_pads_them(put, target, pad):
    """vLLM's MoE alignment (pad_rows_to / pad_cols_to, scale byte 127) in the same call: the padded shapes
    and bytes are mxfp8.convert's (which test_trtllm_layout holds to vLLM's own align function), inside jit;
    experts of 2 x 72 rows and K = 200 (a partial block), so every extent grows."""
    experts, n, k = 3, 144, 200
    c = -(-k // 32)
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
    s = rng.integers(1, 255, (experts, n, c), dtype=np.uint8)
    rows_to, cols_to = pad
    want = mxfp8.convert(data, s.reshape(-1), target, num_experts=experts, scales="compact", swizzled=False,
                         values=True, pad_rows_to=rows_to, pad_cols_to=cols_to)
    d, b = put(data, s.reshape(-1))
    got = jax.jit(lambda d, b: mj.convert(d, b, target, num_experts=experts, scales="compact", swizzled=False,
                                          values=True, pad_rows_to=rows_to, pad_cols_to=cols_to))(d, b)
    assert got.values.shape == np.asarray(want.values).shape and got.values.shape != (experts, n, k)
    assert got.scales.shape == np.asarray(want.scales).shape
    np.testing.assert_array_equal(bytes_of(got.values), bytes_of(want.values))
    np.testing.assert_array_equal(bytes_of(got.scales), bytes_of(want.scales))
    if rows_to or cols_to:  # a padded byte other than vLLM's 127 shows
        other = mj.convert(d, b, target, num_experts=experts, scales="compact", swizzled=False, values=True,
                           pad_rows_to=rows_to, pad_cols_to=cols_to, pad_scale=126)
        assert not np.array_equal(bytes_of(other.scales), bytes_of(want.scales))


def test_padding_without_values_is_refused_with_the_librarys_message():
    data, buf, s = make_mxfp8((128, 64), "compact", seed=5)
    with pytest.raises(ValueError, match="pad_rows_to / pad_cols_to pad the weight"):  # at trace time
        mj.convert(jnp.asarray(data.view(np.uint8)), jnp.asarray(buf), "compact", swizzled=False, fp8_dtype="e4m3",
                   pad_rows_to=256)


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("scales", ["compact", "padded", "swizzled"])
def test_quantize_equals_the_library(put, dtype, direction, scales):
    x = weights((130, 72), seed=3)
    if dtype == "bfloat16":
        xj = jnp.asarray(x).astype(jnp.bfloat16)
        x_lib = np.asarray(xj)  # ml_dtypes bfloat16, as NumPy holds JAX's
    else:
        xj, x_lib = jnp.asarray(x), x
    (xd,) = put(xj)
    values, scale = jax.jit(lambda a: mj.quantize(a, scales=scales, direction=direction))(xd)
    q = mxfp8.quantize(x_lib, scales=scales, rowwise=direction == "rowwise", columnwise=direction == "columnwise",
                       values_dtype="uint8")
    want_v = q.rowwise_data if direction == "rowwise" else q.columnwise_data
    want_s = q.rowwise_scale_inv if direction == "rowwise" else q.columnwise_scale_inv
    assert values.dtype == jnp.float8_e4m3fn and values.shape == x.shape
    np.testing.assert_array_equal(bytes_of(values), bytes_of(np.from_dlpack(want_v)))
    np.testing.assert_array_equal(bytes_of(scale), bytes_of(np.from_dlpack(want_s)))


@pytest.mark.parametrize("rounding", ["rceil", "floor", "compressed_tensors"])
def test_quantize_rules_and_e5m2(put, rounding):
    x = weights((64, 96), seed=4)
    (xd,) = put(x)
    for fmt in ("e4m3", "e5m2"):
        values, scale = mj.quantize(xd, fp8_dtype=fmt, rounding=rounding, values_dtype="uint8")
        q = mxfp8.quantize(x, fp8_dtype=fmt, rounding=rounding, values_dtype="uint8")
        np.testing.assert_array_equal(np.asarray(values), np.from_dlpack(q.rowwise_data))
        np.testing.assert_array_equal(np.asarray(scale), np.from_dlpack(q.rowwise_scale_inv))


@pytest.mark.parametrize("out", [jnp.float32, jnp.bfloat16])
def test_dequantize_equals_the_library(put, out):
    data, buf, s = make_mxfp8((200, 70), "swizzled", seed=5)
    d, b = put(data.view(np.uint8), buf)
    got = jax.jit(lambda d, b: mj.dequantize(d, b, swizzled=True, fp8_dtype="e4m3", dtype=out))(d, b)
    want = mxfp8.dequantize(data, buf, swizzled=True, dtype=jnp.dtype(out).name)
    assert got.dtype == out and got.shape == data.shape
    np.testing.assert_array_equal(bytes_of(got), bytes_of(want))


def test_a_quantize_convert_pipeline_in_one_jit(put):
    """What a JAX trainer hands an engine: quantize, then the engine's layout, in one compiled program."""
    x = weights((256, 512), seed=6)
    (xd,) = put(x)

    @jax.jit
    def step(w):
        values, scales = mj.quantize(w, scales="swizzled")
        return mj.convert(values, scales, "cutlass_128x4", swizzled=True)

    got = step(xd)
    q = mxfp8.quantize(x, scales="compact")
    want = mxfp8.convert(q.rowwise_data, q.rowwise_scale_inv, "cutlass_128x4", swizzled=False)
    np.testing.assert_array_equal(np.asarray(got.scales), np.asarray(want.scales))


def test_vmap_maps_a_leading_batch(put):
    x = weights((3, 64, 64), seed=7)
    (xd,) = put(x)
    values, scales = jax.vmap(lambda a: mj.quantize(a, values_dtype="uint8"))(xd)
    assert values.shape == (3, 64, 64) and scales.shape == (3, 64, 2)
    for i in range(3):
        q = mxfp8.quantize(x[i], values_dtype="uint8")
        np.testing.assert_array_equal(np.asarray(values[i]), np.from_dlpack(q.rowwise_data))
        np.testing.assert_array_equal(np.asarray(scales[i]), np.from_dlpack(q.rowwise_scale_inv))


def test_bad_options_fail_at_trace_time():
    data, buf, _ = make_mxfp8((100, 64), "padded", seed=8)
    d, b = jnp.asarray(data.view(np.uint8)), jnp.asarray(buf)
    traced = []

    def convert(target, **kw):
        traced.append(target)
        return jax.jit(lambda d, b: mj.convert(d, b, target, **kw)).lower(d, b)  # traced, never run

    with pytest.raises(ValueError, match="target is 'cutlass'"):
        convert("cutlass", swizzled=False)
    with pytest.raises(ValueError, match="rowwise scales only"):  # the library's own rule, at trace time
        convert("deepgemm", swizzled=False, direction="columnwise")
    with pytest.raises(ValueError, match="which needs rows \\(per expert\\) a multiple of 128"):
        convert("trtllm", swizzled=False, values=True)
    with pytest.raises(TypeError, match="swizzled"):
        convert("compact", swizzled="yes")
    with pytest.raises(ValueError, match="do not split into 3 experts"):
        convert("compact", swizzled=False, num_experts=3)
    with pytest.raises(ValueError, match="rounding is 'nearest'"):
        jax.jit(lambda a: mj.quantize(a, rounding="nearest")).lower(jnp.zeros((4, 32), jnp.float32))
    with pytest.raises(ValueError, match="dtype must be float32 or bfloat16"):
        mj.dequantize(d, b, swizzled=False, dtype=jnp.float16)
    assert len(traced) == 5


def test_a_buffer_the_options_do_not_describe_fails_with_the_librarys_message():
    data, buf, _ = make_mxfp8((200, 100), "swizzled", seed=10)
    with pytest.raises(ValueError, match="GEMM-swizzled scales of a 200 x 4 scale matrix need 256 x 4 = 1024 bytes, "
                                         "got 40"):  # at trace time
        jax.jit(lambda d, b: mj.convert(d, b, "compact", swizzled=True)).lower(
            jnp.asarray(data.view(np.uint8)), jnp.asarray(buf[:10]))


@pytest.mark.parametrize("scales", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("variant", ["rowwise", "columnwise", "per_row", "4over6"])
def test_nvfp4_quantize_and_dequantize_equal_the_library(put, scales, variant):
    x = weights((130, 96), seed=11)
    kw = dict(columnwise=variant == "columnwise", per_row=variant == "per_row")
    if variant == "4over6":
        kw.update(four_over_six="mse", e4m3_max=256)
    (xd,) = put(x)
    values, scale, amax = jax.jit(lambda a: mj.nvfp4_quantize(a, scales=scales, **kw))(xd)
    want = mxfp8.nvfp4_quantize(x, scales=scales, **kw)
    for got, ref in ((values, want.values), (scale, want.scales), (amax, want.amax)):
        assert got.shape == tuple(ref.shape)
        np.testing.assert_array_equal(bytes_of(got), bytes_of(ref))
    e4m3_max = kw.get("e4m3_max", 448)
    decoded = jax.jit(lambda v, s, a: mj.nvfp4_dequantize(v, s, a, swizzled=scales == "swizzled",
                                                          columnwise=kw["columnwise"], e4m3_max=e4m3_max))(
        values, scale, amax)
    ref = mxfp8.nvfp4.dequantize(want.values, want.scales, want.amax, swizzled=scales == "swizzled",
                                 direction="columnwise" if kw["columnwise"] else "rowwise", e4m3_max=e4m3_max)
    assert decoded.shape == ref.shape
    np.testing.assert_array_equal(bytes_of(decoded), bytes_of(ref))


def test_nvfp4_refusals():
    with pytest.raises(ValueError, match="four_over_six is 'best'"):
        mj.nvfp4_quantize(jnp.zeros((4, 32), jnp.float32), four_over_six="best")
    with pytest.raises(ValueError, match="K = 33 is odd: NVFP4 stores two values per byte"):  # at trace time
        jax.jit(mj.nvfp4_quantize).lower(jnp.zeros((4, 33), jnp.float32))


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("storage", ["padded", "swizzled"])
def test_export_components_equals_the_library(put, direction, storage):
    data, buf, s = make_mxfp8((200, 70), storage, direction=direction, seed=12)
    d, b = put(data.view(np.uint8), buf)
    values, scales = jax.jit(lambda d, b: mj.export_components(d, b, swizzled=storage == "swizzled", direction=direction,
                                                               fp8_dtype="e4m3"))(d, b)
    want_values, want_scales = mxfp8.export_components(data, buf, swizzled=storage == "swizzled", direction=direction,
                                                       values_dtype="uint8")
    np.testing.assert_array_equal(np.asarray(values), np.from_dlpack(want_values))
    np.testing.assert_array_equal(np.asarray(scales), np.from_dlpack(want_scales))
    np.testing.assert_array_equal(np.asarray(scales), s)



def test_what_jax_would_convert_or_cannot_name_is_refused_at_trace_time():
    """An input of an element type the library never takes is refused before JAX converts it (a NumPy
    float64 array would be narrowed to float32 without a word), a 0-d input and a bad e4m3_max are trace-time
    errors, and values=None is "no values", as mxfp8.convert takes it."""
    x64 = weights((64, 64), seed=13).astype(np.float64)
    with pytest.raises(ValueError, match="x is float64, which the library never takes"):
        mj.quantize(x64)
    with pytest.raises(ValueError, match="x is float64"):
        mj.nvfp4_quantize(x64)
    with pytest.raises(ValueError, match="compact is int8"):
        mj.swizzle_scales(jnp.zeros((4, 4), jnp.int8))
    with pytest.raises(TypeError, match="swizzled must be an array"):
        mj.unswizzle_scales([1, 2, 3], 1, 1)
    with pytest.raises(ValueError, match="x is 0-dimensional"):
        mj.nvfp4_quantize(jnp.float32(1.0))
    with pytest.raises(ValueError, match="x is 0-dimensional"):
        mj.quantize(jnp.float32(1.0))
    with pytest.raises(ValueError, match="compact is 0-dimensional"):
        mj.swizzle_scales(jnp.uint8(1))
    with pytest.raises(ValueError, match="data is 0-dimensional"):
        mj.convert(jnp.uint8(1), jnp.zeros((128, 4), jnp.uint8), "compact", swizzled=False)
    for bad in (300, 448.0, "448"):
        with pytest.raises((ValueError, TypeError), match="e4m3_max"):
            jax.jit(lambda a: mj.nvfp4_quantize(a, e4m3_max=bad)).lower(jnp.zeros((4, 32), jnp.float32))
    with pytest.raises(ValueError, match="desc.e4m3_max is 300, expected 448 or 256"):
        mj.nvfp4_dequantize(jnp.zeros((4, 16), jnp.uint8), jnp.zeros((4, 2), jnp.uint8), jnp.ones(1, jnp.float32),
                            swizzled=False, e4m3_max=300)
    data, buf, s = make_mxfp8((100, 64), "padded", seed=14)
    out = mj.convert(jnp.asarray(data.view(np.uint8)), jnp.asarray(buf), "compact", swizzled=False, values=None)
    assert out.values is None
    np.testing.assert_array_equal(np.asarray(out.scales), s)


def test_the_handlers_name_an_element_type_they_never_take():
    """The handlers' own check (for a caller of the FFI targets without mxfp8.jax): every buffer, the
    result ones too, named with its JAX type."""
    mj._registered()
    call = jax.ffi.ffi_call("mxfp8_swizzle_scales", jax.ShapeDtypeStruct((512,), jnp.uint8))
    with pytest.raises(Exception, match="mxfp8: compact is int16, which the library never takes"):
        jax.block_until_ready(call(jnp.zeros((4, 4), jnp.int16)))
    call = jax.ffi.ffi_call("mxfp8_unswizzle_scales", jax.ShapeDtypeStruct((4, 4), jnp.int8))
    with pytest.raises(Exception, match="mxfp8: the result is int8"):
        jax.block_until_ready(call(jnp.zeros((512,), jnp.uint8)))
    call = jax.ffi.ffi_call("mxfp8_swizzle_scales", jax.ShapeDtypeStruct((512,), jnp.uint8))
    with pytest.raises(Exception, match=r"mxfp8: compact is int4, which the library never takes \(its types: uint8, "):
        jax.block_until_ready(call(jnp.zeros((4, 4), jnp.int4)))  # a type once named "int0x0", then not at all


# Every element type JAX has (float64 and int64 need x64, which this process does not turn on).
ALL_TYPES = [jnp.bool_, jnp.int4, jnp.int8, jnp.int16, jnp.int32, jnp.uint4, jnp.uint8, jnp.uint16, jnp.uint32,
             jnp.float16, jnp.bfloat16, jnp.float32, jnp.complex64, jnp.float8_e4m3fn, jnp.float8_e5m2,
             jnp.float8_e8m0fnu, jnp.float8_e4m3, jnp.float8_e3m4, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz,
             jnp.float8_e4m3b11fnuz, jnp.float4_e2m1fn]


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=lambda t: jnp.dtype(t).name)
def test_trace_time_and_handler_agree_on_the_types_taken(dtype):
    """mxfp8.jax's trace-time refusal and the handlers' own take the same element types: a type is refused
    by one exactly when the other refuses it, with the same name for it."""
    a = jnp.zeros((4, 4), dtype)
    name = jnp.dtype(dtype).name
    mj._registered()
    call = jax.ffi.ffi_call("mxfp8_unswizzle_scales", jax.ShapeDtypeStruct((4, 4), jnp.uint8))
    if np.dtype(dtype) in mj._TAKEN:
        try:  # the trace-time check hands it to the library, which takes it or refuses it as it would at run time
            jax.jit(mj.swizzle_scales).lower(a)
        except ValueError as e:
            assert f"mxfp8: invalid argument: compact: dtype {name} is not a scale byte" in str(e)
        with pytest.raises(Exception, match="mxfp8: invalid argument: swizzled") as refused:
            jax.block_until_ready(call(a))  # ... and the handler hands it to the library (too small for 4 x 4)
        assert "never takes" not in str(refused.value)
    else:
        with pytest.raises(ValueError, match=f"compact is {name}, which the library never takes"):
            mj.swizzle_scales(a)
        with pytest.raises(Exception, match=f"mxfp8: swizzled is {name}, which the library never takes"):
            jax.block_until_ready(call(a))


def test_nvfp4_options_the_library_refuses_fail_at_trace_time():
    """What the library refuses in NVFP4 options whatever the shapes is refused when the call is traced,
    with the library's message (the library is asked; the rule is not written again in mxfp8.jax)."""
    x = jnp.zeros((4, 32), jnp.float32)
    lower = lambda **kw: jax.jit(lambda a: mj.nvfp4_quantize(a, **kw)).lower(x)  # noqa: E731 (traced, never run)
    with pytest.raises(ValueError, match="e4m3_max is 256 but options.four_over_six is MXFP8_NVFP4_4OVER6_OFF"):
        lower(e4m3_max=256)
    with pytest.raises(ValueError, match="per-row amax is rowwise only"):
        lower(per_row=True, columnwise=True)
    with pytest.raises(ValueError, match="options.e4m3_max is 300, expected 448 or 256"):
        lower(e4m3_max=300)
    lower(e4m3_max=256, four_over_six="mae", per_row=True, scales="swizzled")  # what it takes still traces
    with pytest.raises(ValueError, match="desc.e4m3_max is 300, expected 448 or 256"):
        jax.jit(lambda v, s, a: mj.nvfp4_dequantize(v, s, a, swizzled=False, e4m3_max=300)).lower(
            jnp.zeros((4, 16), jnp.uint8), jnp.zeros((4, 2), jnp.uint8), jnp.ones(1, jnp.float32))


def _struct(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


E4 = jnp.float8_e4m3fn
# (what is wrong, the call, its abstract operands, the exception, what the library says): each a call whose
# buffers or options the library refuses, which used to fail only when the compiled program ran.
TRACE_TIME_REFUSALS = [
    ("convert: scale_inv a row short", lambda d, s: mj.convert(d, s, "compact", swizzled=False),
     [(256, 64), E4, (255, 2), jnp.uint8], ValueError, "a 255 x 2 buffer (shape (255, 2)) cannot hold the 256 x 2"),
    ("convert: data of another type", lambda d, s: mj.convert(d, s, "compact", swizzled=False),
     [(256, 64), jnp.int32, (256, 2), jnp.uint8], ValueError, "rowwise_data: dtype int32 does not hold E4M3 values"),
    ("convert: a negative padding", lambda d, s: mj.convert(d, s, "compact", swizzled=False, values=True,
                                                               pad_rows_to=-32),
     [(256, 64), E4, (256, 2), jnp.uint8], ValueError, "pad_rows_to and pad_cols_to are -32 and 0"),
    ("convert: K padded to no block", lambda d, s: mj.convert(d, s, "compact", swizzled=False, values=True,
                                                                 pad_cols_to=48),
     [(256, 64), E4, (256, 2), jnp.uint8], ValueError, "pad_cols_to is 48, not a multiple of 32"),
    ("convert: a NaN padding scale", lambda d, s: mj.convert(d, s, "compact", swizzled=False, values=True,
                                                                pad_rows_to=32, pad_scale=255),
     [(256, 64), E4, (256, 2), jnp.uint8], ValueError, "pad_scale is 255"),
    ("convert: the gated target pads halves of an odd row count",
     lambda d, s: mj.convert(d, s, "trtllm_gated", swizzled=False, values=True, pad_rows_to=128),
     [(99, 64), E4, (99, 2), jnp.uint8], ValueError, "an odd count"),
    ("convert: grouped experts columnwise",
     lambda d, s: mj.convert(d, s, "compact", swizzled=False, num_experts=2, direction="columnwise"),
     [(256, 64), E4, (1024,), jnp.uint8], ValueError, "grouped experts carry rowwise data only"),
    ("dequantize: swizzled scales too short", lambda d, s: mj.dequantize(d, s, swizzled=True),
     [(256, 64), E4, (256, 2), jnp.uint8], ValueError, "need 256 x 4 = 1024 bytes, got 512"),
    ("quantize: an integer input", lambda x: mj.quantize(x), [(4, 64), jnp.int32], ValueError,
     "input: dtype int32 cannot be quantized"),
    ("nvfp4_quantize: columnwise of odd M", lambda x: mj.nvfp4_quantize(x, columnwise=True), [(3, 64), jnp.float32],
     ValueError, "M = 3 is odd"),
    ("nvfp4_dequantize: scales a block short",
     lambda d, s, a: mj.nvfp4_dequantize(d, s, a, swizzled=False),
     [(16, 16), jnp.uint8, (16, 1), jnp.uint8, (1,), jnp.float32], ValueError, "cannot hold the 16 x 2 scale matrix"),
    ("unswizzle_scales: a swizzled buffer short", lambda s: mj.unswizzle_scales(s, 100, 3), [(100,), jnp.uint8],
     ValueError, "the 128x4 layout of a 100 x 3 scale matrix is 512 bytes, but swizzled holds 100"),
    ("unswizzle_scales: no scale byte", lambda s: mj.unswizzle_scales(s, 100, 3), [(512,), jnp.float16], ValueError,
     "swizzled: dtype float16 is not a scale byte"),
    ("swizzle_scales: no scale byte", lambda c: mj.swizzle_scales(c), [(100, 3), jnp.int32], ValueError,
     "compact: dtype int32 is not a scale byte"),
]


@pytest.mark.parametrize("case", TRACE_TIME_REFUSALS, ids=[c[0] for c in TRACE_TIME_REFUSALS])
def test_every_refusal_happens_at_trace_time(case):
    """The library refuses a bad call when it is traced (mxfp8_xla_check on the operands' shapes and
    types, nothing compiled or run), with its own message, inside jit and outside; the same call with
    the operand fixed traces."""
    _, fn, spec, error, message = case
    operands = [_struct(spec[i], spec[i + 1]) for i in range(0, len(spec), 2)]
    with pytest.raises(error, match=re.escape(message)):
        jax.jit(fn).lower(*operands)
    with pytest.raises(error, match=re.escape(message)):  # eagerly: raised before anything is dispatched
        fn(*(jnp.zeros(o.shape, o.dtype) for o in operands))


def test_shapes_whose_size_int64_cannot_hold_are_refused_at_trace_time():
    """A tracer's shapes need not be arrays that exist: a swizzled operand of 2^64 elements is refused by the
    check (its size is counted with overflow checked), not wrapped around into a size that might match."""
    huge = _struct((2**62, 4), jnp.uint8)
    with pytest.raises(ValueError, match=re.escape("a scale matrix of more than 2^63 elements")):
        jax.jit(lambda s: mj.unswizzle_scales(s, 2**31 - 1, 2**31 - 1)).lower(huge)


def test_results_past_a_terabyte_are_not_checked_as_overlapping():
    """The trace-time check places the operands at addresses no memory backs; they were a terabyte apart, so
    a padded values result of more than a terabyte overlapped the next operand and the call was refused with
    "scales and values overlap in memory", a refusal of no argument the caller passed. A result that large
    traces (XLA, not the check, then says whether it can allocate it)."""
    d, s = jnp.zeros((64, 64), E4), jnp.full((64, 2), 127, jnp.uint8)
    jax.jit(lambda d, s: mj.convert(d, s, "cutlass_128x4", swizzled=False, values=True, pad_rows_to=2**40)).lower(d, s)


def test_what_the_checks_take_traces_and_runs():
    """The trace-time checks let through what the library takes, on every operation: each call of the
    list above with its operands made right traces, and runs to the library's result."""
    d, s = jnp.zeros((256, 64), E4), jnp.full((256, 2), 127, jnp.uint8)
    jax.jit(lambda d, s: mj.convert(d, s, "compact", swizzled=False, values=True, pad_rows_to=32)).lower(d, s)
    jax.jit(lambda d, s: mj.convert(d, s, "trtllm_gated", swizzled=False, values=True, pad_rows_to=128)).lower(d, s)
    jax.jit(lambda d, s: mj.convert(d, s, "compact", swizzled=False, num_experts=2, scales="compact")).lower(d, s)
    jax.jit(lambda x: mj.nvfp4_quantize(x, columnwise=True)).lower(jnp.zeros((4, 64), jnp.float32))
    assert mj.unswizzle_scales(jnp.zeros((512,), jnp.uint8), 100, 3).shape == (100, 3)
    assert mj.swizzle_scales(jnp.zeros((100, 3), jnp.float8_e8m0fnu)).shape == (512,)
    np.testing.assert_array_equal(np.asarray(mj.dequantize(d, s, swizzled=False)), np.zeros((256, 64), np.float32))


def test_the_check_entry_refuses_what_it_does_not_know():
    """mxfp8_xla_check names an operation or an operand count it has no check for, and an attribute
    missing from the call, instead of checking something else."""
    with pytest.raises(ValueError, match="no trace-time check of frobnicate with 1 operands"):
        mj._check("frobnicate", (((4,), "uint8"),), ())
    with pytest.raises(ValueError, match="lacks an attribute of its call"):
        mj._check("dequantize", (((4, 32), "uint8"), ((4, 1), "uint8"), ((4, 32), "float32")), (("format", 1),))


def test_option_and_input_mistakes_name_the_argument():
    """What the JAX probe found answered in Python's or NumPy's words (2026-12-08): a list where a name
    goes ("unhashable type: 'list'"), an array of no NumPy dtype ("Cannot interpret 'torch.float32'"), a
    decoder dtype NumPy does not know or None (read as float64)."""
    d, s = jnp.zeros((256, 64), jnp.float8_e4m3fn), jnp.full((256, 2), 127, jnp.uint8)
    with pytest.raises(ValueError, match=r"target is \['compact'\], expected one of"):
        mj.convert(d, s, ["compact"], swizzled=False)
    with pytest.raises(ValueError, match=r"values_dtype is \['fp8'\], expected 'fp8' or 'uint8'"):
        mj.quantize(jnp.ones((4, 32)), values_dtype=["fp8"])
    with pytest.raises(TypeError, match="x must be a jax.Array or NumPy array of a NumPy dtype, got .* of key<fry>"):
        mj.quantize(jax.random.key(0))
    for bad, shown in (("bogus", "'bogus'"), (None, "None"), (np.float64, "<class 'numpy.float64'>")):
        with pytest.raises(ValueError, match=re.escape(f"dtype must be float32 or bfloat16, got {shown}")):
            mj.dequantize(d, s, swizzled=False, dtype=bad)
        with pytest.raises(ValueError, match=re.escape(f"dtype must be float32 or bfloat16, got {shown}")):
            mj.nvfp4_dequantize(jnp.zeros((4, 16), jnp.uint8), jnp.zeros((4, 2), jnp.uint8), jnp.ones(1, jnp.float32),
                                swizzled=False, dtype=bad)
    assert mj.dequantize(d, s, swizzled=False, dtype="bfloat16").dtype == jnp.bfloat16
