"""Buckets and the swizzle pair through the Python API, on host memory."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, swizzle_reference


def test_bucket_round_trip():
    specs, expected = {}, {}
    for i, (shape, storage) in enumerate([((100, 48), "swizzled"), ((257, 33), "padded"), ((3, 5, 64), "compact")]):
        data, buf, s = make_mxfp8(shape, storage, seed=i)
        specs[f"layer{i}.weight"] = {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}
        expected[f"layer{i}.weight"] = (data, s)
    bucket, manifest = mxfp8.export_bucket(specs, alignment=64)
    assert [m["name"] for m in manifest] == list(specs)
    assert all(m["values_offset"] % 64 == 0 and m["scales_offset"] % 64 == 0 for m in manifest)
    parts = mxfp8.unpack_bucket(bucket, manifest)
    for name, (data, s) in expected.items():
        values, scales = parts[name]
        np.testing.assert_array_equal(values, data)
        np.testing.assert_array_equal(scales.reshape(s.shape), s)
        assert not np.shares_memory(values, data)  # a bucket holds copies


def test_swizzle_pair_matches_the_layout():
    rng = np.random.default_rng(1)
    s = rng.integers(1, 255, (300, 7), dtype=np.uint8)
    swz = mxfp8.swizzle_scales(s)
    np.testing.assert_array_equal(swz, swizzle_reference(s))
    np.testing.assert_array_equal(mxfp8.unswizzle_scales(swz, 300, 7), s)
    with pytest.raises(ValueError, match=r"the swizzled layout of a 300 x 7 scale matrix is 3072 bytes, but swizzled "
                                         r"has shape \(3071,\)"):
        mxfp8.unswizzle_scales(swz[:-1], 300, 7)


# What the second probe of the Python layer found in buckets (2026-12-07), each failing on the code before.

@pytest.mark.parametrize("shape", [(2, 0, 32), (0, 3, 64), (2, 3, 0)])
def test_a_manifest_of_empty_tensors_is_read_back(shape):
    """The library refused its own manifest of experts (E, 0, K): their scales (E, 0, ceil(K/32)) were taken
    for a product past the scale matrix's 0 rows (1 > 0 / E), so unpack_bucket, import_bucket and a
    distributed Receiver refused what export_bucket wrote."""
    data, buf, s = make_mxfp8(shape, "swizzled", seed=3)
    other, other_buf, other_s = make_mxfp8((40, 96), "swizzled", seed=4)
    specs = {"empty": {"data": data, "scale_inv": buf, "swizzled": True, "shape": shape},
             "w": {"data": other, "scale_inv": other_buf, "swizzled": True}}
    bucket, manifest = mxfp8.export_bucket(specs)
    scales_shape = (*shape[:-1], -(-shape[-1] // 32))
    assert tuple(manifest[0]["scales_shape"]) == scales_shape
    parts = mxfp8.unpack_bucket(bucket, manifest)
    assert parts["empty"].values.shape == shape and parts["empty"].scales.shape == scales_shape
    np.testing.assert_array_equal(parts["w"].values, other)
    np.testing.assert_array_equal(parts["w"].scales, other_s)
    params = {"empty": (np.empty(shape, np.uint8), np.empty(scales_shape, np.uint8), "compact"),
              "w": (np.full((40, 96), 0xAB, np.uint8), np.full((40, 3), 0xAB, np.uint8), "compact")}
    mxfp8.import_bucket(bucket, manifest, params)
    np.testing.assert_array_equal(params["w"][0], other)
    np.testing.assert_array_equal(params["w"][1], other_s)


def sized_specs():
    """Two tensors whose buckets are 4 KiB and 270 KiB (each alone past bucket_bytes=4096)."""
    specs = {}
    for name, shape in (("small", (64, 64)), ("big", (512, 512))):
        data, buf, _ = make_mxfp8(shape, "swizzled", seed=len(name))
        specs[name] = {"data": data, "scale_inv": buf, "swizzled": True}
    return specs


def test_iter_buckets_refuses_a_buffer_too_small_before_the_first_bucket():
    """Every bucket's size is known before the first is filled: a buffer too small for a later one was
    refused only when that bucket came, after the earlier ones had been yielded (and sent)."""
    yielded = []
    with pytest.raises(ValueError, match=r"buffer holds 8192 bytes, the largest bucket needs \d+"):
        for _, manifest in mxfp8.iter_buckets(sized_specs(), bucket_bytes=4096, buffer=np.zeros(8192, np.uint8)):
            yielded.append(manifest)
    assert yielded == []


def test_export_bucket_names_a_bucket_too_small_as_the_caller_passed_it():
    """bucket= too small was refused in the terms of the C desc the call builds (desc.parts_out[0] ... past the
    end of a bucket of 10 bytes), a field the Python caller never saw; nothing is written."""
    specs = sized_specs()
    _, manifest = mxfp8.export_bucket(specs)
    total = max(e["scales_offset"] + e["scales_bytes"] for e in manifest)
    for size in (0, 10, total - 1):
        bucket = np.full(size, 0xCD, np.uint8)
        with pytest.raises(ValueError, match=rf"^bucket holds {size} bytes but these tensors take {total}$"):
            mxfp8.export_bucket(specs, bucket=bucket)
        assert (bucket == 0xCD).all()
    bucket = np.full(total, 0xCD, np.uint8)
    assert mxfp8.export_bucket(specs, bucket=bucket)[0] is bucket


@pytest.mark.parametrize("dtype", [np.int8, np.bool_])
def test_unpack_bucket_gives_uint8_scales_whatever_one_byte_dtype_the_bucket_has(dtype):
    """A bucket of another one-byte dtype (a wire buffer received as int8) is bytes, as import_bucket reads
    it: its scales came back in that dtype (E8M0 131 as -125, or True)."""
    data, buf, s = make_mxfp8((128, 64), "swizzled", seed=9)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": data, "scale_inv": buf, "swizzled": True}})
    assert (s > 127).any()
    values, scales = mxfp8.unpack_bucket(bucket.view(dtype), manifest)["w"]
    assert values.dtype == np.uint8 and scales.dtype == np.uint8
    np.testing.assert_array_equal(values, data)
    np.testing.assert_array_equal(scales, s)


def test_unpack_bucket_gives_uint8_scales_of_a_torch_bucket_of_another_one_byte_dtype():
    torch = pytest.importorskip("torch")
    data, buf, s = make_mxfp8((128, 64), "swizzled", seed=9)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf),
                                                  "swizzled": True}})
    for dtype in (torch.int8, torch.bool, torch.float8_e4m3fn):
        values, scales = mxfp8.unpack_bucket(bucket.view(dtype), manifest)["w"]
        assert values.dtype == torch.float8_e4m3fn and scales.dtype == torch.uint8, dtype
        np.testing.assert_array_equal(scales.numpy(), s)


@pytest.mark.parametrize("caller_buffer", [False, True], ids=["its own buffer", "the caller's buffer"])
def test_iter_buckets_refuses_a_buffer_resized_between_buckets(caller_buffer):
    """The bucket yielded is a view of the buffer: resized by the caller between two buckets, the next fill
    raised torch's own RuntimeError ("setStorage: ... out of bounds")."""
    torch = pytest.importorskip("torch")
    specs = {name: {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in spec.items()}
             for name, spec in sized_specs().items()}
    buffer = torch.zeros(1 << 20, dtype=torch.uint8) if caller_buffer else None
    buckets = mxfp8.iter_buckets(specs, bucket_bytes=4096, buffer=buffer)
    bucket, _ = next(buckets)
    bucket.untyped_storage().resize_(0)
    with pytest.raises(ValueError, match=r"the buffer.s storage was resized to 0 bytes since iter_buckets began"):
        next(buckets)


def test_unpack_bucket_names_the_entry_the_library_refused():
    """unpack_bucket (and SGLang's and vLLM's readers, which check through it) said only the C field
    ("desc.parts_in[1] ..."); import_bucket added the entry's name, as this does now."""
    bucket, manifest = mxfp8.export_bucket(sized_specs())
    manifest[1] = dict(manifest[1], scales_bytes=manifest[1]["scales_bytes"] + 1)
    with pytest.raises(ValueError, match=r"desc.parts_in\[1\].* \(entry 1 is 'big'\)$"):
        mxfp8.unpack_bucket(bucket, manifest)


def test_a_bucket_that_is_no_array_is_a_type_error_and_an_overflowing_shape_names_its_entry():
    with pytest.raises(TypeError, match="bucket must be a 1-D byte array .*, got bytes"):
        mxfp8.unpack_bucket(b"abc", [])
    bucket, manifest = mxfp8.export_bucket(sized_specs())
    manifest[1] = dict(manifest[1], shape=[1 << 62, 1 << 62])
    with pytest.raises(ValueError, match=r"desc.shapes\[1\] \(4611686018427387904, 4611686018427387904\): its rows or "
                                         r"elements overflow int64 \(entry 1 is 'big'\)"):
        mxfp8.unpack_bucket(bucket, manifest)
