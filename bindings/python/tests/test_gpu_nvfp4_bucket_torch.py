"""NVFP4 tensors in buckets on CUDA torch tensors: export_bucket, prepare_buckets, unpack_bucket, import_bucket
and prepare_import_bucket on the device, the bucket byte for byte the host's and every parameter the
reference of test_nvfp4_bucket.py. Skips without a CUDA device."""
import numpy as np
import pytest

import mxfp8
from conftest import POISON, make_mxfp8, swizzle_reference
from test_nvfp4_bucket import CASES, NVFP4_SHARDS, check_params, nvfp4_source, params_for, shard_reference

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
    pytest.skip("needs a CUDA device and a CUDA build of mxfp8", allow_module_level=True)


def cuda_spec(spec):
    return {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() if isinstance(v, np.ndarray) else v
            for k, v in spec.items()}


def cuda_params(p):
    return tuple(torch.from_numpy(x.copy()).cuda() for x in p[:3]) + (p[3],)


def host(p):
    return tuple(x.cpu().numpy() for x in p[:3]) + (p[3],)


@pytest.mark.parametrize("convention", ["decode", "encode"])
def test_cuda_bucket_matches_the_host_and_the_reference(convention):
    sources = [nvfp4_source(shape, layout, direction, per_row, e4m3_max, seed=i)
               for i, (shape, layout, direction, per_row, e4m3_max, _) in enumerate(CASES) if direction == "rowwise"]
    targets = [c[5] for c in CASES if c[2] == "rowwise"]
    data, buf, s = make_mxfp8((100, 96), "swizzled", seed=7)
    tensors = {f"w{i}": spec for i, (spec, _) in enumerate(sources)}
    tensors["m"] = {"data": data, "scale_inv": buf, "swizzled": True}
    host_bucket, host_manifest = mxfp8.export_bucket(tensors)
    bucket, manifest = mxfp8.export_bucket({k: cuda_spec(v) for k, v in tensors.items()})
    assert bucket.is_cuda and manifest == host_manifest
    torch.cuda.synchronize()
    # Every part byte for byte; the bytes between parts (alignment) are left as they were, on both sides.
    written = np.zeros(len(host_bucket), dtype=bool)
    for e in manifest:
        for part in ("values", "scales", "amax"):
            if f"{part}_offset" in e:
                written[e[f"{part}_offset"]:e[f"{part}_offset"] + e[f"{part}_bytes"]] = True
    assert written.sum() < len(host_bucket)  # the case has gaps: the mask matters
    np.testing.assert_array_equal(bucket.cpu().numpy()[written], host_bucket[written])

    params = {f"w{i}": cuda_params(params_for(ref, t)) for i, ((_, ref), t) in enumerate(zip(sources, targets))}
    params["m"] = (torch.full((9600,), POISON, dtype=torch.uint8, device="cuda"),
                   torch.full((512,), POISON, dtype=torch.uint8, device="cuda"), "cutlass_128x4")
    mxfp8.import_bucket(bucket, manifest, params, global_scale=convention)
    torch.cuda.synchronize()
    for i, (_, ref) in enumerate(sources):
        check_params(host(params[f"w{i}"]), ref, convention)
    np.testing.assert_array_equal(params["m"][1].cpu().numpy(), swizzle_reference(s))

    parts = mxfp8.unpack_bucket(bucket, manifest)
    np.testing.assert_array_equal(parts["w0"].scales.cpu().numpy(), sources[0][1][1])


def test_cuda_bucket_plan_and_prepared_import():
    sources = [nvfp4_source((130, 40 + 16 * i), "swizzled", "rowwise", i % 2 == 0, 448, seed=i) for i in range(4)]
    tensors = {f"w{i}": cuda_spec(spec) for i, (spec, _) in enumerate(sources)}
    for plan in mxfp8.prepare_buckets(tensors, bucket_bytes=8192):
        manifest = plan.manifest
        bucket = plan.run()
        params = {e["name"]: cuda_params(params_for(sources[int(e["name"][1:])][1], "cutlass_128x4")) for e in manifest}
        imported = mxfp8.prepare_import_bucket(bucket, manifest, params)
        imported.run()
        torch.cuda.synchronize()
        for name, p in params.items():
            check_params(host(p), sources[int(name[1:])][1])


def test_cuda_direct_import_of_nvfp4_storage():
    sources = [nvfp4_source((130, 40 + 16 * i), "swizzled", "rowwise", i % 2 == 0, 448, seed=30 + i) for i in range(3)]
    tensors = {f"w{i}": cuda_spec(spec) for i, (spec, _) in enumerate(sources)}
    params = {f"w{i}": cuda_params(params_for(ref, "cutlass_128x4")) for i, (_, ref) in enumerate(sources)}
    plan = mxfp8.prepare_import_tensors(tensors, params, global_scale="encode")
    plan.run()
    torch.cuda.synchronize()
    for i, (_, ref) in enumerate(sources):
        check_params(host(params[f"w{i}"]), ref, "encode")


@pytest.mark.parametrize("case", NVFP4_SHARDS, ids=lambda c: f"{c[1]}-{c[3]}-{c[4]}-{c[5]}")
@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("route", ["bucket", "direct"])
def test_cuda_import_of_an_nvfp4_shard_matches_the_reference(case, prepared, route):
    """A receiver's shard of an NVFP4 entry (rows, K columns, row pieces; per-row amax) from a CUDA bucket,
    or straight from CUDA storage (TE-padded scales), into CUDA parameters, immediate and prepared: the
    header's crop of the reference."""
    shape, direction, per_row, rows, cols, target = case
    storage = "swizzled" if route == "bucket" else "padded"
    spec, ref = nvfp4_source(shape, storage, direction, per_row, 448, seed=sum(shape) + len(rows))
    want = shard_reference(ref, direction, rows, cols)
    p = cuda_params(params_for(want, target))
    shards = {"w": {"rows": rows, "cols": cols}}
    if route == "direct":
        tensors = {"w": cuda_spec(spec)}
        if prepared:
            mxfp8.prepare_import_tensors(tensors, {"w": p}, direction=direction, shards=shards).run()
        else:
            mxfp8.import_tensors(tensors, {"w": p}, direction=direction, shards=shards)
        torch.cuda.synchronize()
        check_params(host(p), want)
        return
    bucket, manifest = mxfp8.export_bucket({"w": cuda_spec(spec)}, direction=direction)
    assert bucket.is_cuda
    if prepared:
        mxfp8.prepare_import_bucket(bucket, manifest, {"w": p}, shards=shards).run()
    else:
        mxfp8.import_bucket(bucket, manifest, {"w": p}, shards=shards)
    torch.cuda.synchronize()
    check_params(host(p), want)
