"""libmxfp8_tvm_ffi loaded as an Apache TVM FFI module: every function with NumPy on the CPU (inputs built
from the layout's formula and the reference quantizer, outputs poisoned first), the errors, and, with a
CUDA device, torch tensors on torch's current stream.

Skips when apache-tvm-ffi is not installed or the package was built without the adapter, unless
MXFP8_REQUIRE_TVM_FFI=1 (scripts/test.sh and bench/device/gpu_check.sh set it), which turns the skip into a failure.
"""
import ctypes
import gc
import os
import weakref

import numpy as np
import pytest

import mx_reference
import mxfp8
from conftest import POISON, make_mxfp8, round_up, swizzle_reference


def _load():
    try:
        import tvm_ffi

        return tvm_ffi.load_module(mxfp8.tvm_ffi_library_path())
    except (ImportError, FileNotFoundError) as e:
        if os.environ.get("MXFP8_REQUIRE_TVM_FFI") == "1":
            raise
        pytest.skip(f"the tvm-ffi adapter is not available: {e}", allow_module_level=True)


mod = _load()


def poisoned(shape, dtype=np.uint8):
    return np.full(shape, POISON, dtype)


FUNCTIONS = ["version", "unswizzle_scales", "swizzle_scales", "export_scales", "quantize", "dequantize",
             "convert", "bucket_plan", "export_bucket", "import_tensors", "prepare_import_tensors", "import_bucket",
             "prepare_import_bucket", "nvfp4_export", "nvfp4_quantize", "nvfp4_import_tensors",
             "prepare_nvfp4_import_tensors", "nvfp4_bucket_plan", "nvfp4_export_bucket", "nvfp4_import_bucket",
             "prepare_nvfp4_import_bucket"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_exports_its_signature_and_doc_string(name):
    assert "type_schema" in mod.get_function_metadata(name)
    assert "mxfp8_" in mod.get_function_doc(name)  # names the C call it wraps


def test_version_is_the_loaded_librarys():
    major, minor, patch = (int(p) for p in mxfp8.__version__.split("."))
    assert mod.version() == major * 10000 + minor * 100 + patch


@pytest.mark.parametrize("rows, cols", [(1, 1), (200, 7), (128, 4), (129, 5), (0, 3), (300, 33)])
def test_unswizzle_scales_into_a_caller_buffer(rows, cols):
    s = np.random.default_rng(rows * 100 + cols).integers(1, 255, (rows, cols), dtype=np.uint8)
    compact = poisoned((rows, cols))
    mod.unswizzle_scales(swizzle_reference(s), compact)
    np.testing.assert_array_equal(compact, s)


def test_unswizzle_scales_writes_the_transpose_through_strides():
    s = np.random.default_rng(1).integers(1, 255, (70, 6), dtype=np.uint8)
    buffer = poisoned((6, 70))
    mod.unswizzle_scales(swizzle_reference(s), buffer.T)  # a (70, 6) view with strides (1, 70)
    np.testing.assert_array_equal(buffer, s.T)


@pytest.mark.parametrize("rows, cols", [(1, 1), (200, 7), (129, 5), (256, 8)])
def test_swizzle_scales_matches_the_formula_padding_zeroed(rows, cols):
    s = np.random.default_rng(rows + cols).integers(1, 255, (rows, cols), dtype=np.uint8)
    swizzled = poisoned(round_up(rows, 128) * round_up(cols, 4))
    mod.swizzle_scales(s, swizzled)
    np.testing.assert_array_equal(swizzled, swizzle_reference(s))


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("shape", [(257, 96 + 17), (3, 40, 64), (1, 1)])
def test_export_scales_writes_compact_scales_and_returns_a_values_view(storage, direction, shape):
    data, buf, s = make_mxfp8(shape, storage, direction, seed=len(shape) + shape[-1])
    dst = poisoned(s.size)  # any shape with the right element count
    values = mod.export_scales(data, buf, dst, "e5m2", storage == "swizzled", direction)
    np.testing.assert_array_equal(dst.reshape(s.shape), s)
    assert str(values.dtype) == "float8_e5m2"
    assert tuple(values.shape) == shape
    assert values.data_ptr() == data.ctypes.data  # a view of the caller's data, no copy


def test_export_scales_view_keeps_the_callers_data_alive_and_no_longer():
    data, buf, s = make_mxfp8((64, 64), "compact", seed=3)
    values = mod.export_scales(data, buf, poisoned(s.size), "e4m3", False, "rowwise")
    expected, alive = data.copy(), weakref.ref(data)
    del data
    gc.collect()
    assert alive() is not None  # held by the view (through tvm-ffi, not through this library)
    n = expected.size
    np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(values.data_ptr())),
                                  expected.reshape(-1))
    del values
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("scales", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("block", ["1x32", "32x32"])
def test_quantize_into_caller_buffers_matches_the_reference(scales, block):
    x = mx_reference.special_input((100, 72), np.float32, seed=5)
    m, k = x.shape
    rw_values, rw_scales = mx_reference.quantize(x, "e4m3", "rceil", "rowwise", block)
    cw_values, cw_scales = mx_reference.quantize(x, "e4m3", "rceil", "columnwise", block)
    if block == "32x32" and scales != "compact":  # stored as 1x32 scales, each block's repeated
        rw_scales = np.repeat(rw_scales, 32, axis=0)[:m]
        cw_scales = np.repeat(cw_scales, 32, axis=1)[:, :k]
    if scales == "compact":
        rw_expect, cw_expect = rw_scales, cw_scales
    else:
        rw_pad = np.zeros((round_up(m, 128), round_up(rw_scales.shape[1], 4)), np.uint8)
        rw_pad[: rw_scales.shape[0], : rw_scales.shape[1]] = rw_scales
        cw_pad = np.zeros((round_up(cw_scales.shape[0], 4), round_up(k, 128)), np.uint8)
        cw_pad[: cw_scales.shape[0], : cw_scales.shape[1]] = cw_scales
        if scales == "padded":
            rw_expect, cw_expect = rw_pad, cw_pad
        else:
            rw_expect = swizzle_reference(rw_scales)
            cw_expect = swizzle_reference(cw_scales.T)  # columnwise scales are swizzled as their transpose
    outs = [poisoned(x.shape), poisoned(rw_expect.size), poisoned(x.shape), poisoned(cw_expect.size)]
    mod.quantize(x, *outs, "e4m3", block, "rceil", scales)
    np.testing.assert_array_equal(outs[0], rw_values)
    np.testing.assert_array_equal(outs[1], rw_expect.reshape(-1))
    np.testing.assert_array_equal(outs[2], cw_values)
    np.testing.assert_array_equal(outs[3], cw_expect.reshape(-1))


def test_quantize_one_direction_with_floor_rounding():
    x = mx_reference.special_input((33, 65), np.float32, seed=6)
    values, scales = mx_reference.quantize(x, "e5m2", "floor", "columnwise")
    out_values, out_scales = poisoned(x.shape), poisoned(scales.shape)
    mod.quantize(x, None, None, out_values, out_scales, "e5m2", "1x32", "floor", "compact")
    np.testing.assert_array_equal(out_values, values)
    np.testing.assert_array_equal(out_scales, scales)


def test_quantize_with_compressed_tensors_rounding():
    import ct_reference
    x = mx_reference.special_input((40, 96), np.float32, seed=8)
    values, scales = ct_reference.quantize(x, "e4m3", "rowwise")
    out_values, out_scales = poisoned(x.shape), poisoned(scales.shape)
    mod.quantize(x, out_values, out_scales, None, None, "e4m3", "1x32", "compressed_tensors", "compact")
    np.testing.assert_array_equal(out_values, ct_reference.nan_as_7f(values))
    np.testing.assert_array_equal(out_scales, scales)


@pytest.mark.parametrize("storage", ["padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_dequantize_matches_the_reference(storage, direction):
    data, buf, s = make_mxfp8((130, 80), storage, direction, seed=7)
    out = np.full(data.shape, 12345.0, np.float32)
    mod.dequantize(data, buf, out, "e4m3", storage == "swizzled", direction)
    np.testing.assert_array_equal(out, mx_reference.dequantize(data, s, "e4m3", direction))


def test_bucket_plan_and_export_bucket_pack_values_and_compact_scales():
    shapes = [(200, 96), (1, 33), (130, 64 + 5)]
    tensors = [make_mxfp8(shape, "swizzled", seed=i) for i, shape in enumerate(shapes)]
    data = [t[0] for t in tensors]
    bufs = [t[1] for t in tensors]
    plan = list(mod.bucket_plan(data, bufs, "e4m3", True, "rowwise", 256))
    total, entries = plan[0], np.array(plan[1:]).reshape(-1, 4)
    bucket = poisoned(total)
    for short in (poisoned(total - 1), poisoned(0)):  # said of `bucket`, not of the desc's parts_out[0]
        with pytest.raises(ValueError, match=rf"^invalid argument: bucket holds {short.size} bytes but these tensors "
                                             rf"take {total}$"):
            mod.export_bucket(data, bufs, short, "e4m3", True, "rowwise", 256)
    manifest = list(mod.export_bucket(data, bufs, bucket, "e4m3", True, "rowwise", 256))
    assert manifest == plan
    end = 0
    for (d, _, s), (v_off, v_bytes, s_off, s_bytes) in zip(tensors, entries):
        assert v_off % 256 == 0 and s_off % 256 == 0 and v_off >= end and s_off >= v_off + v_bytes
        np.testing.assert_array_equal(bucket[v_off : v_off + v_bytes], d.reshape(-1))
        np.testing.assert_array_equal(bucket[s_off : s_off + s_bytes], s.reshape(-1))
        end = s_off + s_bytes
    assert total >= end


# ---- the import (tensors into a receiver's buffers), immediate and prepared


IMPORT_SHAPES = [(200, 96), (1, 33), (130, 64 + 5), (256, 128)]


def _import_sources(storage, seed=0):
    return [make_mxfp8(shape, storage, seed=seed + i) for i, shape in enumerate(IMPORT_SHAPES)]


def _target_bytes(s, target):
    return s.reshape(-1) if target == "compact" else swizzle_reference(s)


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("target", ["compact", "cutlass_128x4"])
def test_import_tensors_writes_values_and_scales_in_the_target_layout(storage, target):
    sources = _import_sources(storage, seed=3)
    values = [poisoned(d.size) for d, _, _ in sources]
    scales = [poisoned(_target_bytes(s, target).size) for _, _, s in sources]
    mod.import_tensors([d for d, _, _ in sources], [b for _, b, _ in sources], values, scales, "e4m3",
                       storage == "swizzled", "rowwise", target, False)
    for (d, _, s), v, sc in zip(sources, values, scales):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(sc, _target_bytes(s, target))


def test_import_tensors_to_an_engine_layout_matches_convert():
    sources = _import_sources("swizzled", seed=11)[-1:]  # (256, 128): whole tiles, as DeepGEMM takes them
    (d, b, s), = sources
    want = poisoned(_deepgemm_bytes(s).size)
    mod.convert(d, b, want, None, "deepgemm", "e4m3", True, "rowwise", False, 0, 0, 127)
    got = poisoned(want.size)
    mod.import_tensors([d], [b], None, [got], "e4m3", True, "rowwise", "deepgemm", False)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _deepgemm_bytes(s))


def test_prepared_import_runs_again_on_new_bytes_and_keeps_its_tensors():
    sources = _import_sources("swizzled", seed=5)
    data = [d for d, _, _ in sources]
    values = [poisoned(d.size) for d in data]
    scales = [poisoned(swizzle_reference(s).size) for _, _, s in sources]
    run = mod.prepare_import_tensors(data, [b for _, b, _ in sources], values, scales, "e4m3", True, "rowwise",
                                     "cutlass_128x4", False)
    assert all((v == POISON).all() for v in values)  # preparing moves nothing
    run()
    for d, v in zip(data, values):
        np.testing.assert_array_equal(v, d.reshape(-1))
    # A new optimizer step writes the same storage: the next run moves the new bytes.
    for d in data:
        d[...] = 255 - d
    run()
    for d, v in zip(data, values):
        np.testing.assert_array_equal(v, d.reshape(-1))
    # The run holds the tensors it was given: with every other reference gone, a run still reads them.
    expected = [d.reshape(-1).copy() for d in data]
    probe = weakref.ref(data[0])
    del data, sources
    gc.collect()
    assert probe() is not None
    for v in values:
        v[...] = POISON
    run()
    for want, v in zip(expected, values):
        np.testing.assert_array_equal(v, want)
    del run
    gc.collect()
    assert probe() is None  # dropping the run released the tensors


def test_import_refusals_name_the_problem_and_write_nothing():
    (d, b, s), = _import_sources("compact", seed=7)[:1]
    scales = poisoned(s.size)
    with pytest.raises(ValueError, match="1 tensors for 2 data tensors"):
        mod.import_tensors([d, d], [b, b], None, [scales], "e4m3", False, "rowwise", "compact", False)
    with pytest.raises(ValueError, match=r'^invalid argument: target: expected one of "compact", "cutlass_128x4"'):
        mod.prepare_import_tensors([d], [b], None, [scales], "e4m3", False, "rowwise", "128x4", False)
    with pytest.raises(ValueError, match=r"^invalid argument: desc\.scales\[0\]"):  # one byte short
        mod.import_tensors([d], [b], None, [poisoned(s.size - 1)], "e4m3", False, "rowwise", "compact", False)
    assert (scales == POISON).all()


def test_none_for_a_tensor_or_an_item_is_a_type_error_naming_it_and_writes_nothing():
    """tvm-ffi passes None for a Tensor (or an item of a tensor list) as an undefined tensor, which the
    adapter dereferenced (a segfault): each is refused by name. None stays allowed where the C API takes a
    NULL: values_list itself, and an item of it (that entry's scales only)."""
    (d, b, s), = _import_sources("compact", seed=8)[:1]
    scales, values = poisoned(s.size), poisoned(d.size)
    calls = {
        r"^data is None": lambda: mod.export_scales(None, b, scales, "e4m3", False, "rowwise"),
        r"^data_list\[0\] is None": lambda: mod.bucket_plan([None], [b], "e4m3", False, "rowwise", 256),
        r"^scale_inv_list\[1\] is None": lambda: mod.import_tensors([d, d], [b, None], None, [scales, scales], "e4m3",
                                                                    False, "rowwise", "compact", False),
        r"^scales_list\[0\] is None": lambda: mod.prepare_import_tensors([d], [b], None, [None], "e4m3", False,
                                                                         "rowwise", "compact", False),
        r"^bucket is None": lambda: mod.import_bucket(None, [0, 0, 1, 0, 1], [(1, 1)], None, [scales], "e4m3",
                                                      "rowwise", "compact", False),
        r"^amax_list\[0\] is None": lambda: mod.nvfp4_bucket_plan([d], [b], [None], False, "rowwise", 448, 256),
        r"^data is None, expected a tensor": lambda: mod.nvfp4_export(None, b, np.ones(1, np.float32), scales,
                                                                  np.ones(1, np.float32), False, "rowwise", 448,
                                                                  "decode"),
    }
    for message, call in calls.items():
        with pytest.raises(TypeError, match=message):
            call()
    assert (scales == POISON).all()
    # A None item of values_list: that entry's scales only (the C API's NULL entry).
    mod.import_tensors([d], [b], [None], [scales], "e4m3", False, "rowwise", "compact", False)
    np.testing.assert_array_equal(scales, s.reshape(-1))
    assert (values == POISON).all()


# ---- the import of a bucket (export_bucket's bytes and manifest) into a receiver's buffers


BUCKET_SHAPES = [(200, 96), (1, 33), (3, 40, 64 + 5), (256, 128)]


def _sent_bucket(seed, direction="rowwise"):
    """A bucket packed here from the wire format (values, then compact S, each at a multiple of 256), its
    manifest, and the tensors' values and S."""
    tensors = [make_mxfp8(shape, "compact", direction, seed=seed + i) for i, shape in enumerate(BUCKET_SHAPES)]
    manifest, parts, end = [], [], 0
    for d, _, s in tensors:
        v_off = round_up(end, 256)
        s_off = round_up(v_off + d.size, 256)
        manifest += [v_off, d.size, s_off, s.size]
        parts.append((v_off, d.reshape(-1), s_off, s.reshape(-1)))
        end = s_off + s.size
    bucket = poisoned(end)
    for v_off, v, s_off, sc in parts:
        bucket[v_off : v_off + v.size] = v
        bucket[s_off : s_off + sc.size] = sc
    return bucket, [end] + manifest, tensors


@pytest.mark.parametrize("target", ["compact", "cutlass_128x4"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_import_bucket_writes_values_and_scales_in_the_target_layout(target, direction):
    bucket, manifest, tensors = _sent_bucket(31, direction)
    sent = bucket.copy()
    swizzled = (lambda s: swizzle_reference(s)) if direction == "rowwise" else (lambda s: swizzle_reference(s.T))
    want = [s.reshape(-1) if target == "compact" else swizzled(s) for _, _, s in tensors]
    values = [poisoned(d.size) for d, _, _ in tensors]
    scales = [poisoned(w.size) for w in want]
    mod.import_bucket(bucket, manifest, BUCKET_SHAPES, values, scales, "e5m2", direction, target, False)
    for (d, _, _), v, sc, w in zip(tensors, values, scales, want):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(sc, w)
    np.testing.assert_array_equal(bucket, sent)  # only read
    scales_only = [poisoned(w.size) for w in want]
    mod.import_bucket(bucket, manifest, BUCKET_SHAPES, None, scales_only, "e5m2", direction, target, False)
    for sc, w in zip(scales_only, want):
        np.testing.assert_array_equal(sc, w)


def test_import_bucket_reads_what_export_bucket_wrote_with_the_fixup():
    shapes = [(130, 64 + 5), (64, 64)]
    tensors = [make_mxfp8(shape, "swizzled", seed=40 + i) for i, shape in enumerate(shapes)]
    for _, buf, s in tensors:  # one zero exponent each, in S and where the swizzled storage keeps it
        s[0, 0] = 0
        buf.reshape(-1)[0] = 0
    bucket = poisoned(mod.bucket_plan([d for d, _, _ in tensors], [b for _, b, _ in tensors], "e4m3", True,
                                      "rowwise", 64)[0])
    manifest = mod.export_bucket([d for d, _, _ in tensors], [b for _, b, _ in tensors], bucket, "e4m3", True,
                                 "rowwise", 64)
    scales = [poisoned(s.size) for _, _, s in tensors]
    values = [poisoned(d.size) for d, _, _ in tensors]
    mod.import_bucket(bucket, manifest, shapes, values, scales, "e4m3", "rowwise", "compact", True)
    for (d, _, s), v, sc in zip(tensors, values, scales):
        want = s.reshape(-1).copy()
        want[want == 0] = 1
        np.testing.assert_array_equal(sc, want)
        np.testing.assert_array_equal(v, d.reshape(-1))


def test_prepared_bucket_import_moves_the_buckets_new_bytes_and_holds_it():
    bucket, manifest, tensors = _sent_bucket(50)
    values = [poisoned(d.size) for d, _, _ in tensors]
    scales = [poisoned(s.size) for _, _, s in tensors]
    run = mod.prepare_import_bucket(bucket, manifest, BUCKET_SHAPES, values, scales, "e4m3", "rowwise", "compact",
                                    False)
    assert all((v == POISON).all() for v in values) and all((s == POISON).all() for s in scales)
    run()
    for (d, _, s), v, sc in zip(tensors, values, scales):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(sc, s.reshape(-1))
    bucket[...] = 255 - bucket  # the next step's bytes, in the same bucket
    run()
    for (d, _, s), v, sc in zip(tensors, values, scales):
        np.testing.assert_array_equal(v, 255 - d.reshape(-1))
        np.testing.assert_array_equal(sc, 255 - s.reshape(-1))
    probe = weakref.ref(bucket)
    del bucket
    gc.collect()
    assert probe() is not None  # the run holds the bucket
    del run
    gc.collect()
    assert probe() is None


def test_import_bucket_refusals_name_the_problem_and_write_nothing():
    bucket, manifest, tensors = _sent_bucket(60)
    scales = [poisoned(s.size) for _, _, s in tensors]
    with pytest.raises(ValueError,
                       match=r"^invalid argument: manifest: 16 integers for 4 shapes, expected 1 \+ 4 \* 4"):
        mod.import_bucket(bucket, manifest[:-1], BUCKET_SHAPES, None, scales, "e4m3", "rowwise", "compact", False)
    with pytest.raises(ValueError, match="^invalid argument: scales_list: 3 tensors for 4 shapes"):
        mod.import_bucket(bucket, manifest, BUCKET_SHAPES, None, scales[:3], "e4m3", "rowwise", "compact", False)
    wrong = BUCKET_SHAPES[:-1] + [(256, 127)]  # one column short of what the part holds
    with pytest.raises(ValueError, match=r"^invalid argument: desc\.parts_in\[3\]"):
        mod.prepare_import_bucket(bucket, manifest, wrong, None, scales, "e4m3", "rowwise", "compact", False)
    past_the_end = list(manifest)
    past_the_end[-2] = bucket.size  # the last scales part starts at the bucket's end
    with pytest.raises(ValueError, match=r"^invalid argument: desc\.parts_in\[3\]"):
        mod.import_bucket(bucket, past_the_end, BUCKET_SHAPES, None, scales, "e4m3", "rowwise", "compact", False)
    with pytest.raises(ValueError, match=r"^invalid argument: desc\.scales\[1\]"):  # one byte short
        mod.import_bucket(bucket, manifest, BUCKET_SHAPES, None, [scales[0], poisoned(scales[1].size - 1)] + scales[2:],
                          "e4m3", "rowwise", "compact", False)
    with pytest.raises(ValueError, match='^invalid argument: target: expected one of "compact"'):
        mod.import_bucket(bucket, manifest, BUCKET_SHAPES, None, scales, "e4m3", "rowwise", "128x4", False)
    # The manifest's integers as the caller gave them (the probe of 2026-12-08): a negative one was read as the
    # uint64 it wraps to, and manifest[0], the bucket's size, was never read.
    negative = list(manifest)
    negative[1] = -64
    with pytest.raises(ValueError, match=r"^invalid argument: manifest\[1\] is -64, an offset or byte count of entry 0"):
        mod.import_bucket(bucket, negative, BUCKET_SHAPES, None, scales, "e4m3", "rowwise", "compact", False)
    for total, said in ((-5, "must be >= 0"), (bucket.size + 1, f"but bucket holds {bucket.size} bytes")):
        with pytest.raises(ValueError, match=rf"^invalid argument: manifest\[0\] \(the bucket's total bytes\) is {total}"
                                             rf"(: |, ){said}"):
            mod.import_bucket(bucket, [total] + list(manifest[1:]), BUCKET_SHAPES, None, scales, "e4m3", "rowwise",
                              "compact", False)
    assert all((s == POISON).all() for s in scales)


# ---- NVFP4


@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("layout", ["compact", "swizzled"])
def test_nvfp4_quantize_then_export_round_trips_the_reference(per_row, layout):
    import nvfp4_quantize_reference as ref

    m, k = 130, 96 + 16
    x = np.random.default_rng(21).standard_normal((m, k)).astype(np.float32) * 3
    want_values, want_scales, want_amax = ref.quantize(x, per_row=per_row)
    stored_scales = ref.swizzled(want_scales) if layout == "swizzled" else want_scales
    values, scales = poisoned((m, k // 2)), poisoned(stored_scales.shape)
    amax = np.full(m if per_row else 1, np.nan, np.float32)
    mod.nvfp4_quantize(x, values, scales, amax, layout, "row" if per_row else "tensor", False, "rowwise", 448, "off")
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(scales.reshape(-1), stored_scales.reshape(-1))
    np.testing.assert_array_equal(amax, want_amax)

    compact, global_scale = poisoned(want_scales.shape), np.full(amax.shape, np.nan, np.float32)
    view = mod.nvfp4_export(values, scales, amax, compact, global_scale, layout == "swizzled", "rowwise", 448, "decode")
    np.testing.assert_array_equal(np.from_dlpack(view), want_values)
    assert np.from_dlpack(view).ctypes.data == values.ctypes.data  # a view, not a copy
    np.testing.assert_array_equal(compact, want_scales)
    np.testing.assert_array_equal(global_scale, (want_amax / np.float32(6 * 448)).astype(np.float32))
    mod.nvfp4_export(values, scales, amax, compact, global_scale, layout == "swizzled", "rowwise", 448, "encode")
    np.testing.assert_array_equal(global_scale, ref.encode_scale(want_amax, 448).reshape(-1))


def test_nvfp4_refusals_name_the_problem_and_write_nothing():
    values, scales, amax = poisoned((64, 16)), poisoned((64, 2)), np.ones(1, np.float32)
    compact, global_scale = poisoned((64, 2)), np.full(1, np.nan, np.float32)
    with pytest.raises(ValueError, match=r'^invalid argument: global_scale_convention: expected one of "decode", "encode"'):
        mod.nvfp4_export(values, scales, amax, compact, global_scale, False, "rowwise", 448, "weight_scale_2")
    with pytest.raises(ValueError, match="^invalid argument: "):  # E4M3_MAX is 448 or 256
        mod.nvfp4_export(values, scales, amax, compact, global_scale, False, "rowwise", 447, "decode")
    with pytest.raises(ValueError, match="^invalid argument: "):  # x must be even along K
        mod.nvfp4_quantize(np.ones((4, 33), np.float32), poisoned((4, 16)), poisoned((4, 3)), np.ones(1, np.float32),
                           "compact", "tensor", False, "rowwise", 448, "off")
    with pytest.raises(ValueError, match='^invalid argument: scales_layout: expected one of "compact"'):  # not `scales`
        mod.nvfp4_quantize(np.ones((4, 32), np.float32), poisoned((4, 16)), poisoned((4, 2)), np.ones(1, np.float32),
                           "tiled", "tensor", False, "rowwise", 448, "off")
    assert (compact == POISON).all() and np.isnan(global_scale).all()


NVFP4_SHAPES = [(130, 96 + 16), (1, 40), (33, 2)]  # stored (rows, cols): cols even, not all multiples of 16


def _nvfp4_sources(storage, per_row, seed):
    """NVFP4 stored matrices from the format's rules (nvfp4_reference): (data, scale_inv as stored, amax,
    compact E4M3 S)."""
    import nvfp4_reference as ref

    out = []
    for i, (rows, cols) in enumerate(NVFP4_SHAPES):
        codes, s = ref.random_case(rows, cols, seed + i)
        rng = np.random.default_rng(seed + i)
        amax = rng.uniform(0.5, 600.0, rows if per_row else 1).astype(np.float32)
        amax[0] = 0.0  # a zero amax: decode 0, encode 1
        out.append((ref.pack(codes), ref.store_scales(s, storage), amax, s))
    return out


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("target", ["compact", "cutlass_128x4"])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("convention", ["decode", "encode"])
def test_nvfp4_import_tensors_writes_values_scales_and_global_scales(storage, target, per_row, convention):
    import nvfp4_reference as ref

    sources = _nvfp4_sources(storage, per_row, seed=70)
    want_scales = [s.reshape(-1) if target == "compact" else swizzle_reference(s) for _, _, _, s in sources]
    want_global = [(a / np.float32(6 * 448)).astype(np.float32) if convention == "decode" else ref.encode_scale(a, 448)
                   for _, _, a, _ in sources]
    values = [poisoned(d.size) for d, _, _, _ in sources]
    scales = [poisoned(w.size) for w in want_scales]
    global_scales = [np.full(a.shape, np.nan, np.float32) for _, _, a, _ in sources]
    mod.nvfp4_import_tensors([d for d, _, _, _ in sources], [b for _, b, _, _ in sources],
                             [a for _, _, a, _ in sources], values, scales, global_scales, storage == "swizzled",
                             "rowwise", target, 448, convention)
    for (d, _, _, _), v, sc, w, g, wg in zip(sources, values, scales, want_scales, global_scales, want_global):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(sc, w)
        np.testing.assert_array_equal(g, wg)


def test_nvfp4_import_columnwise_reads_the_stored_transpose_and_4over6():
    """A columnwise entry is TE's stored (K, M) matrix: the same bytes land; E4M3_MAX 256 divides by 6 * 256."""
    sources = _nvfp4_sources("swizzled", False, seed=80)
    values = [poisoned(d.size) for d, _, _, _ in sources]
    scales = [poisoned(s.size) for _, _, _, s in sources]
    global_scales = [np.full(1, np.nan, np.float32) for _ in sources]
    mod.nvfp4_import_tensors([d for d, _, _, _ in sources], [b for _, b, _, _ in sources],
                             [a for _, _, a, _ in sources], None, scales, global_scales, True, "columnwise",
                             "compact", 256, "decode")
    for (_, _, a, s), sc, g in zip(sources, scales, global_scales):
        np.testing.assert_array_equal(sc, s.reshape(-1))
        np.testing.assert_array_equal(g, (a / np.float32(6 * 256)).astype(np.float32))
    assert all((v == POISON).all() for v in values)  # values_list None: scales and global scales only


def test_prepared_nvfp4_import_runs_again_on_new_bytes():
    sources = _nvfp4_sources("padded", True, seed=90)
    data, amax = [d for d, _, _, _ in sources], [a for _, _, a, _ in sources]
    values = [poisoned(d.size) for d in data]
    scales = [poisoned(s.size) for _, _, _, s in sources]
    global_scales = [np.full(a.shape, np.nan, np.float32) for a in amax]
    run = mod.prepare_nvfp4_import_tensors(data, [b for _, b, _, _ in sources], amax, values, scales, global_scales,
                                           False, "rowwise", "compact", 448, "decode")
    assert all((v == POISON).all() for v in values) and all(np.isnan(g).all() for g in global_scales)
    run()
    for d in data:
        d[...] = 255 - d
    for a in amax:
        a *= 2
    run()
    for d, v, a, g, (_, _, _, s), sc in zip(data, values, amax, global_scales, sources, scales):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(g, (a / np.float32(6 * 448)).astype(np.float32))
        np.testing.assert_array_equal(sc, s.reshape(-1))


def test_nvfp4_import_refusals_name_the_problem_and_write_nothing():
    (d, b, a, s), = _nvfp4_sources("compact", False, seed=95)[:1]
    scales, global_scale = poisoned(s.size), np.full(1, np.nan, np.float32)
    args = ([d], [b], [a], None, [scales], [global_scale], False, "rowwise")
    with pytest.raises(ValueError, match="^invalid argument: amax_list: 2 tensors for 1 data tensors"):
        mod.nvfp4_import_tensors([d], [b], [a, a], None, [scales], [global_scale], False, "rowwise", "compact", 448,
                                 "decode")
    with pytest.raises(ValueError, match="^invalid argument: global_scales_list: 0 tensors for 1 data tensors"):
        mod.nvfp4_import_tensors([d], [b], [a], None, [scales], [], False, "rowwise", "compact", 448, "decode")
    with pytest.raises(ValueError, match="^invalid argument: .*NVFP4"):  # an engine layout is MXFP8's
        mod.nvfp4_import_tensors(*args, "deepgemm", 448, "decode")
    with pytest.raises(ValueError, match="^invalid argument: "):  # E4M3_MAX is 448 or 256
        mod.prepare_nvfp4_import_tensors(*args, "compact", 447, "decode")
    with pytest.raises(ValueError, match="^invalid argument: e4m3_max: 4294967744 does not fit in an int32"):
        mod.nvfp4_import_tensors(*args, "compact", 2**32 + 448, "decode")
    with pytest.raises(ValueError, match='^invalid argument: global_scale_convention: expected one of "decode", "encode"'):
        mod.nvfp4_import_tensors(*args, "compact", 448, "weight_scale_2")
    with pytest.raises(ValueError, match=r"^invalid argument: desc\.scales\[0\]"):  # one byte short
        mod.nvfp4_import_tensors([d], [b], [a], None, [poisoned(s.size - 1)], [global_scale], False, "rowwise",
                                 "compact", 448, "decode")
    assert (scales == POISON).all() and np.isnan(global_scale).all()


@pytest.mark.parametrize("storage", ["compact", "swizzled"])
@pytest.mark.parametrize("per_row", [False, True])
def test_nvfp4_bucket_carries_values_scales_and_amax_and_imports_into_buffers(storage, per_row):
    import nvfp4_reference as ref

    sources = _nvfp4_sources(storage, per_row, seed=100)
    data, bufs, amax = [d for d, _, _, _ in sources], [b for _, b, _, _ in sources], [a for _, _, a, _ in sources]
    plan = list(mod.nvfp4_bucket_plan(data, bufs, amax, storage == "swizzled", "rowwise", 448, 64))
    total, parts = plan[0], np.array(plan[1:]).reshape(-1, 6)
    bucket = poisoned(total)
    assert list(mod.nvfp4_export_bucket(data, bufs, amax, bucket, storage == "swizzled", "rowwise", 448, 64)) == plan
    end = 0
    for (d, _, a, s), (v_off, v_bytes, s_off, s_bytes, a_off, a_bytes) in zip(sources, parts):
        assert v_off >= end and v_off % 64 == 0 and s_off % 64 == 0 and a_off % 64 == 0
        np.testing.assert_array_equal(bucket[v_off : v_off + v_bytes], d.reshape(-1))
        np.testing.assert_array_equal(bucket[s_off : s_off + s_bytes], s.reshape(-1))  # compact on the wire
        np.testing.assert_array_equal(bucket[a_off : a_off + a_bytes].view(np.float32), a)  # the amax itself
        end = a_off + a_bytes

    values = [poisoned(d.size) for d in data]
    scales = [poisoned(swizzle_reference(s).size) for _, _, _, s in sources]
    global_scales = [np.full(a.shape, np.nan, np.float32) for a in amax]
    mod.nvfp4_import_bucket(bucket, plan, NVFP4_SHAPES, values, scales, global_scales, "rowwise", "cutlass_128x4",
                            448, "encode")
    for (d, _, a, s), v, sc, g in zip(sources, values, scales, global_scales):
        np.testing.assert_array_equal(v, d.reshape(-1))
        np.testing.assert_array_equal(sc, swizzle_reference(s))
        np.testing.assert_array_equal(g, ref.encode_scale(a, 448))


def test_prepared_nvfp4_bucket_import_moves_the_new_amax():
    sources = _nvfp4_sources("compact", False, seed=110)
    data, bufs, amax = [d for d, _, _, _ in sources], [b for _, b, _, _ in sources], [a for _, _, a, _ in sources]
    bucket = poisoned(mod.nvfp4_bucket_plan(data, bufs, amax, False, "rowwise", 256, 256)[0])
    manifest = mod.nvfp4_export_bucket(data, bufs, amax, bucket, False, "rowwise", 256, 256)
    scales = [poisoned(s.size) for _, _, _, s in sources]
    global_scales = [np.full(1, np.nan, np.float32) for _ in sources]
    run = mod.prepare_nvfp4_import_bucket(bucket, manifest, NVFP4_SHAPES, None, scales, global_scales, "rowwise",
                                          "compact", 256, "decode")
    assert all(np.isnan(g).all() for g in global_scales)
    for a in amax:
        a *= 4
    mod.nvfp4_export_bucket(data, bufs, amax, bucket, False, "rowwise", 256, 256)  # the next step, same bucket
    run()
    for (_, _, a, s), sc, g in zip(sources, scales, global_scales):
        np.testing.assert_array_equal(sc, s.reshape(-1))
        np.testing.assert_array_equal(g, (a / np.float32(6 * 256)).astype(np.float32))


def test_nvfp4_bucket_refusals_name_the_problem_and_write_nothing():
    sources = _nvfp4_sources("compact", False, seed=120)
    data, bufs, amax = [d for d, _, _, _ in sources], [b for _, b, _, _ in sources], [a for _, _, a, _ in sources]
    plan = list(mod.nvfp4_bucket_plan(data, bufs, amax, False, "rowwise", 448, 16))
    bucket = poisoned(plan[0] - 1)  # a byte short
    with pytest.raises(ValueError, match="^invalid argument: "):
        mod.nvfp4_export_bucket(data, bufs, amax, bucket, False, "rowwise", 448, 16)
    assert (bucket == POISON).all()
    with pytest.raises(ValueError, match="^invalid argument: amax_list: 2 tensors for 3 data tensors"):
        mod.nvfp4_bucket_plan(data, bufs, amax[:2], False, "rowwise", 448, 16)
    with pytest.raises(ValueError, match="alignment: expected a power of two >= 1"):
        mod.nvfp4_bucket_plan(data, bufs, amax, False, "rowwise", 448, 0)
    bucket = poisoned(plan[0])
    mod.nvfp4_export_bucket(data, bufs, amax, bucket, False, "rowwise", 448, 16)
    scales = [poisoned(s.size) for _, _, _, s in sources]
    global_scales = [np.full(1, np.nan, np.float32) for _ in sources]
    with pytest.raises(ValueError,
                       match=r"^invalid argument: manifest: 13 integers for 3 shapes, expected 1 \+ 6 \* 3"):
        mod.nvfp4_import_bucket(bucket, plan[:13], NVFP4_SHAPES, None, scales, global_scales, "rowwise", "compact",
                                448, "decode")
    with pytest.raises(ValueError, match="^invalid argument: "):  # an MXFP8 reading of NVFP4 parts
        mod.import_bucket(bucket, [plan[0]] + [x for i in range(3) for x in plan[1 + 6 * i : 5 + 6 * i]],
                          NVFP4_SHAPES, None, scales, "e4m3", "rowwise", "compact", False)
    with pytest.raises(ValueError, match="^invalid argument: "):  # E4M3_MAX is 448 or 256
        mod.prepare_nvfp4_import_bucket(bucket, plan, NVFP4_SHAPES, None, scales, global_scales, "rowwise",
                                        "compact", 300, "decode")
    assert all((sc == POISON).all() for sc in scales) and all(np.isnan(g).all() for g in global_scales)


# ---- errors: the library's status name and message, as the Python exception the pybind11 binding raises


def test_bad_input_raises_value_error_with_the_librarys_message_and_writes_nothing():
    s = np.random.default_rng(8).integers(1, 255, (200, 7), dtype=np.uint8)
    compact = poisoned((200, 7))
    with pytest.raises(ValueError, match=r"^invalid argument: swizzled: the swizzled layout of a 200 x 7 scale "
                                         r"matrix is 256 x 8 = 2048 bytes, got 2047"):
        mod.unswizzle_scales(swizzle_reference(s)[:-1], compact)
    assert (compact == POISON).all()


def test_a_mismatched_bucket_raises_before_anything_is_written():
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=9)
    bucket = poisoned(100)  # too small for the plan
    with pytest.raises(ValueError, match="^invalid argument: "):
        mod.export_bucket([data], [buf], bucket, "e4m3", False, "rowwise", 256)
    assert (bucket == POISON).all()
    with pytest.raises(ValueError, match="^invalid argument: scale_inv_list: 1 tensors for 2 data tensors"):
        mod.bucket_plan([data, data], [buf], "e4m3", False, "rowwise", 256)
    with pytest.raises(ValueError, match="alignment: expected a power of two >= 1"):
        mod.bucket_plan([data], [buf], "e4m3", False, "rowwise", -(2**63))  # as a uint64: 2^63, a power of two


def test_a_missing_output_raises():
    x = np.ones((32, 32), np.float32)
    with pytest.raises(TypeError, match="argument #1"):  # tvm-ffi's own check: a tensor is required
        mod.unswizzle_scales(np.zeros(512, np.uint8), None)
    values = poisoned(x.shape)
    with pytest.raises(ValueError, match="^invalid argument: rowwise_scale_inv is NULL but rowwise_data is not"):
        mod.quantize(x, values, None, None, None, "e4m3", "1x32", "rceil", "compact")
    assert (values == POISON).all()
    with pytest.raises(ValueError, match="^invalid argument: every output is NULL"):
        mod.quantize(x, None, None, None, None, "e4m3", "1x32", "rceil", "compact")


def test_a_wrong_dtype_raises_naming_the_argument():
    with pytest.raises(ValueError, match=r"^invalid argument: compact: dtype float32 is not a scale byte \(uint8, float8_e8m0fnu or float8_e4m3fn\)"):
        mod.unswizzle_scales(np.zeros(512, np.uint8), np.zeros((2, 4), np.float32))
    data, buf, _ = make_mxfp8((64, 64), "padded", seed=10)
    with pytest.raises(ValueError, match="^invalid argument: output: dtype int8 is not float32 or bfloat16"):
        mod.dequantize(data, buf, np.zeros(data.shape, np.int8), "e4m3", False, "rowwise")
    with pytest.raises(ValueError, match="^invalid argument: input: "):
        mod.quantize(np.zeros((32, 32), np.int32), poisoned((32, 32)), poisoned((32, 1)), None, None,
                     "e4m3", "1x32", "rceil", "compact")


# ---- convert: every target against its layout built here from the formula (or, for the TRT-LLM ones,
# vLLM's steps one at a time: test_trtllm_layout.trtllm_reference), outputs poisoned first


def _deepgemm_bytes(s):
    """DeepGEMM's packed layout of S (R x C) as flat bytes: S(r, c) at ((c / 4) * roundup(R, 4) + r) * 4 + c % 4."""
    r, c = s.shape
    ra = round_up(r, 4)
    out = np.zeros(round_up(c, 4) // 4 * ra * 4, np.uint8)
    rows, cols = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    out[((cols // 4) * ra + rows) * 4 + cols % 4] = s
    return out


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("target", ["compact", "cutlass_128x4", "deepgemm", "deepgemm_float32"])
@pytest.mark.parametrize("shape", [(257, 96 + 17), (3, 40, 64), (1, 1)])
def test_convert_writes_each_target_from_any_storage(storage, target, shape):
    data, buf, s = make_mxfp8(shape, storage, seed=shape[-1] + len(target))
    want = {"compact": s.reshape(-1), "cutlass_128x4": swizzle_reference(s), "deepgemm": _deepgemm_bytes(s),
            # SGLang's Hopper parameter: (u8 as int32 << 23) viewed as float32
            "deepgemm_float32": (s.astype(np.int32) << 23).view(np.uint8).reshape(-1)}[target]
    scales = poisoned(want.size)
    values = poisoned(data.size)
    mod.convert(data, buf, scales, values, target, "e4m3", storage == "swizzled", "rowwise", False, 0, 0, 127)
    np.testing.assert_array_equal(scales, want)
    np.testing.assert_array_equal(values, data.reshape(-1))
    scales_only = poisoned(want.size)
    mod.convert(data, buf, scales_only, None, target, "e4m3", storage == "swizzled", "rowwise", False, 0, 0, 127)
    np.testing.assert_array_equal(scales_only, want)


@pytest.mark.parametrize("storage", ["padded", "swizzled"])
def test_convert_columnwise_128x4_swizzles_the_transpose(storage):
    data, buf, s = make_mxfp8((200, 72), storage, "columnwise", seed=5)
    scales = poisoned(round_up(s.shape[1], 128) * round_up(s.shape[0], 4))
    mod.convert(data, buf, scales, None, "cutlass_128x4", "e4m3", storage == "swizzled", "columnwise", False, 0, 0, 127)
    np.testing.assert_array_equal(scales, swizzle_reference(s.T))


@pytest.mark.parametrize("target", ["trtllm", "trtllm_gated"])
def test_convert_to_the_trtllm_layouts_moves_value_and_scale_rows(target):
    from test_trtllm_layout import trtllm_reference

    data, buf, s = make_mxfp8((256, 200), "swizzled", seed=9)
    w_ref, s_ref = trtllm_reference(data, s, target == "trtllm_gated")
    values, scales = poisoned(data.shape), poisoned(s_ref.shape)
    mod.convert(data, buf, scales, values, target, "e4m3", True, "rowwise", False, 0, 0, 127)
    np.testing.assert_array_equal(values, w_ref)
    np.testing.assert_array_equal(scales, s_ref)


def test_convert_fixup_writes_zero_exponents_as_one():
    data, buf, s = make_mxfp8((64, 64), "compact", seed=13)
    s[0, 0] = buf[0, 0] = 0
    scales = poisoned(s.size)
    mod.convert(data, buf, scales, None, "compact", "e4m3", False, "rowwise", True, 0, 0, 127)
    want = s.reshape(-1).copy()
    want[want == 0] = 1
    np.testing.assert_array_equal(scales, want)


def _padded_reference(data, s, rows_to, cols_to, pad_scale):
    """The padded weight from the rule: (M, K) values to (roundup(M, rows_to), roundup(K, cols_to)) with zeros,
    S to (M', K' / 32) with pad_scale, the real parts where they were."""
    m, k = s.shape[0], data.shape[-1]
    mp = round_up(m, rows_to) if rows_to else m
    kp = round_up(k, cols_to) if cols_to else k
    values = np.zeros((mp, kp), np.uint8)
    values[:m, :k] = data.reshape(m, k)
    scales = np.full((mp, -(-kp // 32)), pad_scale, np.uint8)
    scales[:m, : s.shape[1]] = s
    return values, scales


@pytest.mark.parametrize("target", ["compact", "cutlass_128x4", "deepgemm"])
@pytest.mark.parametrize("shape, rows_to, cols_to", [((130, 72), 128, 256), ((3, 40, 72), 128, 0),
                                                     ((257, 33), 0, 64), ((128, 256), 128, 256)])
def test_convert_pads_rows_and_columns_to_an_engines_alignment(target, shape, rows_to, cols_to):
    data, buf, s = make_mxfp8(shape, "swizzled", seed=shape[0] + cols_to)
    want_values, want_s = _padded_reference(data, s, rows_to, cols_to, 127)
    want = {"compact": want_s.reshape(-1), "cutlass_128x4": swizzle_reference(want_s),
            "deepgemm": _deepgemm_bytes(want_s)}[target]
    values, scales = poisoned(want_values.size), poisoned(want.size)
    mod.convert(data, buf, scales, values, target, "e4m3", True, "rowwise", False, rows_to, cols_to, 127)
    np.testing.assert_array_equal(values, want_values.reshape(-1))
    np.testing.assert_array_equal(scales, want)


def test_convert_padding_takes_the_callers_pad_scale_and_the_trtllm_targets():
    from test_trtllm_layout import trtllm_reference

    data, buf, s = make_mxfp8((200, 200), "padded", seed=19)
    want_values, want_s = _padded_reference(data, s, 128, 256, 100)
    scales, values = poisoned(want_s.size), poisoned(want_values.size)
    mod.convert(data, buf, scales, values, "compact", "e4m3", False, "rowwise", False, 128, 256, 100)
    np.testing.assert_array_equal(scales, want_s.reshape(-1))
    np.testing.assert_array_equal(values, want_values.reshape(-1))
    # trtllm: the padded matrix (256 rows) laid out as the target lays out any 256-row weight
    w_ref, s_ref = trtllm_reference(want_values, want_s, False)
    scales, values = poisoned(s_ref.shape), poisoned(w_ref.shape)
    mod.convert(data, buf, scales, values, "trtllm", "e4m3", False, "rowwise", False, 128, 256, 100)
    np.testing.assert_array_equal(values, w_ref)
    np.testing.assert_array_equal(scales, s_ref)


def test_convert_padding_refusals_name_the_option_and_write_nothing():
    data, buf, s = make_mxfp8((100, 64), "compact", seed=23)
    scales, values = poisoned(128 * 2), poisoned(128 * 64)
    with pytest.raises(ValueError, match="^invalid argument: options.pad_cols_to is 48, not a multiple of 32"):
        mod.convert(data, buf, scales, values, "compact", "e4m3", False, "rowwise", False, 128, 48, 127)
    with pytest.raises(ValueError, match="^invalid argument: options.pad_scale is 255"):
        mod.convert(data, buf, scales, values, "compact", "e4m3", False, "rowwise", False, 128, 0, 255)
    with pytest.raises(ValueError, match="^invalid argument: pad_scale: 4294967423 does not fit in an int32"):
        mod.convert(data, buf, scales, values, "compact", "e4m3", False, "rowwise", False, 128, 0, 2**32 + 127)
    with pytest.raises(ValueError, match="^invalid argument: values is NULL, but options.pad_rows_to"):
        mod.convert(data, buf, scales, None, "compact", "e4m3", False, "rowwise", False, 128, 0, 127)
    with pytest.raises(ValueError, match="^invalid argument: options.pad_rows_to and pad_cols_to are -1 and 0"):
        mod.convert(data, buf, scales, values, "compact", "e4m3", False, "rowwise", False, -1, 0, 127)
    with pytest.raises(ValueError, match="^invalid argument: "):  # sized for the unpadded weight
        mod.convert(data, buf, poisoned(s.size), poisoned(data.size), "compact", "e4m3", False, "rowwise", False,
                    128, 0, 127)
    assert (scales == POISON).all() and (values == POISON).all()


def test_convert_refusals_name_the_problem_and_write_nothing():
    data, buf, s = make_mxfp8((100, 64), "padded", seed=17)
    scales = poisoned(s.size)
    with pytest.raises(ValueError, match=r'^invalid argument: target: expected one of "compact", "cutlass_128x4", '
                                         r'"trtllm", "deepgemm", "trtllm_gated", "deepgemm_float32", got "cutlass"'):
        mod.convert(data, buf, scales, None, "cutlass", "e4m3", False, "rowwise", False, 0, 0, 127)
    with pytest.raises(ValueError, match="^invalid argument: "):  # 100 rows: not a multiple of 128
        mod.convert(data, buf, poisoned((100, 4)), poisoned(data.shape), "trtllm", "e4m3", False, "rowwise", False,
                    0, 0, 127)
    with pytest.raises(ValueError, match="^invalid argument: "):  # one byte short
        mod.convert(data, buf, poisoned(s.size - 1), None, "compact", "e4m3", False, "rowwise", False, 0, 0, 127)
    assert (scales == POISON).all()


def test_a_bad_option_string_raises_naming_the_choices():
    data, buf, s = make_mxfp8((64, 64), "compact", seed=11)
    with pytest.raises(ValueError, match=r'^invalid argument: fp8_dtype: expected one of "e4m3", "e5m2", got "e4m4"'):
        mod.export_scales(data, buf, poisoned(s.size), "e4m4", False, "rowwise")
    with pytest.raises(ValueError, match='direction: expected one of "rowwise", "columnwise", got "rows"'):
        mod.dequantize(data, buf, np.zeros(data.shape, np.float32), "e4m3", False, "rows")
    with pytest.raises(ValueError, match='scales: expected one of "compact", "padded", "swizzled"'):
        mod.quantize(np.ones((32, 32), np.float32), None, None, poisoned((32, 32)), poisoned((1, 32)),
                     "e4m3", "1x32", "rceil", "tiled")
    # Each list entry's refusal says which entry (the library names only the tensor's own fields).
    bad = make_mxfp8((64, 64), "compact", seed=12)
    with pytest.raises(ValueError, match=r"^invalid argument: entry 1 \(data_list\[1\], scale_inv_list\[1\]\): "):
        mod.bucket_plan([data, bad[0].astype(np.float32)], [buf, bad[1]], "e4m3", False, "rowwise", 256)


# ---- torch on a CUDA device


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
        pytest.skip("needs a CUDA device and a CUDA build of mxfp8")
    return torch


def test_gpu_work_runs_on_torchs_current_stream():
    """The unswizzle is queued behind a 0.5 s sleep on a side stream made current with torch.cuda.stream:
    while the sleep runs the destination is untouched and the side stream's event is pending; after the
    event it holds the scales. A launch on any other stream would have run at once."""
    torch = _torch_cuda()
    s = np.random.default_rng(12).integers(1, 255, (1000, 130), dtype=np.uint8)
    swizzled = torch.from_numpy(swizzle_reference(s)).cuda()
    compact = torch.full(s.shape, POISON, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    side, probe = torch.cuda.Stream(), torch.cuda.Stream()
    done = torch.cuda.Event()
    # Before the sleep starts: a first pinned allocation can take a good part of a second, and the first
    # launch of a kernel loads its module (CUDA's lazy loading), which waits for the running sleep.
    early = torch.empty(s.shape, dtype=torch.uint8, pin_memory=True)
    mod.unswizzle_scales(swizzled, torch.empty_like(compact))
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(2 * 10**9)  # about 1 s of clock cycles on an H200
        mod.unswizzle_scales(swizzled, compact)
        done.record()
    torch.cuda.default_stream().synchronize()
    with torch.cuda.stream(probe):
        early.copy_(compact, non_blocking=True)  # an async copy on `probe`, which waits for nothing
    probe.synchronize()
    assert not done.query(), "the side stream finished early: the sleep is too short to prove anything"
    assert (early.numpy() == POISON).all(), "the unswizzle ran before the side stream reached it"
    done.synchronize()
    np.testing.assert_array_equal(compact.cpu().numpy(), s)


def test_gpu_torch_tensors_in_export_quantize_dequantize():
    torch = _torch_cuda()
    data, buf, s = make_mxfp8((257, 160), "swizzled", "rowwise", seed=13)
    d = torch.from_numpy(data).cuda()
    b = torch.from_numpy(buf).cuda()
    dst = torch.full((257, 5), POISON, dtype=torch.uint8, device="cuda")
    values = mod.export_scales(d, b, dst, "e4m3", True, "rowwise")
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float8_e4m3fn
    assert values.data_ptr() == d.data_ptr()
    np.testing.assert_array_equal(dst.cpu().numpy(), s)

    out = torch.empty((257, 160), dtype=torch.float32, device="cuda")
    mod.dequantize(d, b, out, "e4m3", True, "rowwise")
    np.testing.assert_array_equal(out.cpu().numpy(), mx_reference.dequantize(data, s, "e4m3"))

    x = mx_reference.special_input((96, 200), np.float32, seed=14)
    ref_values, ref_scales = mx_reference.quantize(x, "e4m3", "rceil", "rowwise")
    q_values = torch.full(x.shape, POISON, dtype=torch.uint8, device="cuda")
    q_scales = torch.full(ref_scales.shape, POISON, dtype=torch.uint8, device="cuda")
    mod.quantize(torch.from_numpy(x).cuda(), q_values, q_scales, None, None, "e4m3", "1x32", "rceil", "compact")
    np.testing.assert_array_equal(q_values.cpu().numpy(), ref_values)
    np.testing.assert_array_equal(q_scales.cpu().numpy(), ref_scales)


def test_gpu_float8_torch_data_comes_back_as_a_float8_view():
    torch = _torch_cuda()
    data, buf, s = make_mxfp8((300, 64), "padded", "columnwise", seed=15)
    d = torch.from_numpy(data).cuda().view(torch.float8_e5m2)
    dst = torch.full(s.shape, POISON, dtype=torch.uint8, device="cuda")
    values = mod.export_scales(d, torch.from_numpy(buf).cuda(), dst, "e5m2", False, "columnwise")
    assert values.dtype == torch.float8_e5m2 and values.data_ptr() == d.data_ptr() and values.shape == d.shape
    np.testing.assert_array_equal(dst.cpu().numpy(), s)


def test_gpu_unswizzle_into_a_caller_buffer_is_captured_in_a_cuda_graph():
    """Caller-allocated outputs and the environment's stream are what make a call capturable: the call,
    captured once in a torch CUDA graph, is replayed after the swizzled scales change in place."""
    torch = _torch_cuda()
    rng = np.random.default_rng(16)
    first, second = (rng.integers(1, 255, (300, 40), dtype=np.uint8) for _ in range(2))
    swizzled = torch.from_numpy(swizzle_reference(first)).cuda()
    compact = torch.full(first.shape, POISON, dtype=torch.uint8, device="cuda")
    mod.unswizzle_scales(swizzled, compact)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mod.unswizzle_scales(swizzled, compact)
    swizzled.copy_(torch.from_numpy(swizzle_reference(second)))
    compact.fill_(POISON)
    graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(compact.cpu().numpy(), second)
