"""JAX arrays (CPU) as producers and consumers."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def test_jax_inputs_and_jax_consumers():
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=3)
    values, scales = mxfp8.export_components(jnp.asarray(data), jnp.asarray(buf), swizzled=True, values_dtype="uint8")
    got_scales = jax.dlpack.from_dlpack(scales)
    got_values = jax.dlpack.from_dlpack(values)
    assert got_scales.shape == (257, 3)
    np.testing.assert_array_equal(np.asarray(got_scales), s)
    np.testing.assert_array_equal(np.asarray(got_values), data)


def test_jax_fp8_consumer():
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=4)
    values, _ = mxfp8.export_components(data, buf, swizzled=False)
    got = jax.dlpack.from_dlpack(values)
    assert got.dtype == jnp.float8_e4m3fn
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), data)


# ---- The JAX route (issue 38): a jax.Array on one device is taken through jaxlib's C++ export ----------
# (jaxlib._jax.buffer_to_dlpack_managed_tensor, what jax.Array.__dlpack__ calls once it has checked the
# array lies on one device), with the stream __dlpack__ would get, and its __dlpack_device__ answer is
# remembered per jax Device. Each test counts which way the arrays went (taken_by_jax against __dlpack__).

def counts():
    return mxfp8._mxfp8.taken_by_jax(), mxfp8._mxfp8.taken_counts()["dlpack"]


def delta(before):
    after = counts()
    return after[0] - before[0], after[1] - before[1]


def on_cpu(a):
    """`a` on JAX's CPU device (where JAX has a GPU, jnp.asarray puts arrays there: these tests read the
    results with NumPy, and bench/jax_overhead.py checks the route bit for bit on the GPU)."""
    return jax.device_put(jnp.asarray(a), jax.devices("cpu")[0])


def test_single_device_jax_arrays_take_the_route_and_stay_views():
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=5)
    x, b = on_cpu(data), on_cpu(buf)
    before = counts()
    values, scales = mxfp8.export_components(x, b, swizzled=True, values_dtype="uint8")
    assert delta(before) == (2, 0)  # neither asked __dlpack__
    v = np.from_dlpack(values)
    assert v.ctypes.data == x.unsafe_buffer_pointer()  # a view of the jax.Array's own buffer
    np.testing.assert_array_equal(v, data)
    np.testing.assert_array_equal(np.from_dlpack(scales), s)
    # the results stay valid after the caller drops its arrays (the capsule holds jax's reference)
    del x, b
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(values)), data)


def test_an_array_still_being_computed_is_waited_for():
    """JAX dispatches asynchronously: the route passes __dlpack__'s stream (None on the host), so jaxlib
    blocks until the buffer is computed before handing its pointer over."""
    data, buf, s = make_mxfp8((256, 64), "compact", seed=6)

    @jax.jit
    def slow(d, f):
        def body(_, carry):
            a, f = carry
            f = jnp.tanh(f @ f)  # work the compiler cannot drop: `a` depends on it (by zero)
            return a ^ (f[0, 0] > 1e30).astype(jnp.uint8), f
        return jax.lax.fori_loop(0, 60, body, (d, f))[0]

    f = on_cpu(np.random.default_rng(0).standard_normal((512, 512), np.float32) / 32)
    d, b = on_cpu(data), on_cpu(buf)
    jax.block_until_ready(slow(d, f))  # compiled
    x = slow(d, f)
    assert not x.is_ready()  # still computing when the export starts
    before = counts()
    values, _ = mxfp8.export_components(x, b, swizzled=False, values_dtype="uint8")
    assert delta(before) == (2, 0)
    np.testing.assert_array_equal(np.from_dlpack(values), data)


def test_non_default_layouts_reach_the_library_as_strides():
    """A jax.Array in a column-major layout is exported with its real strides (the library refuses them)."""
    from jax.experimental.layout import Format, Layout

    data, buf, _ = make_mxfp8((256, 96), "compact", seed=7)
    sharding = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    column_major = lambda a: jax.device_put(jnp.asarray(a), Format(Layout(major_to_minor=(1, 0)), sharding))
    before = counts()
    with pytest.raises(ValueError, match=r"rowwise_data: strides \(1, 256\) are not row-major"):
        mxfp8.export_components(column_major(data), on_cpu(buf), swizzled=False)
    with pytest.raises(ValueError, match=r"rowwise_scale_inv: the last dimension must have stride 1"):
        mxfp8.export_components(on_cpu(data), column_major(buf), swizzled=False)
    assert delta(before) == (4, 0)


@pytest.mark.parametrize("how", ["delete", "donate"])
def test_deleted_and_donated_arrays_raise_what_jax_raises(how):
    data, buf, _ = make_mxfp8((128, 64), "compact", seed=8)
    b = jnp.asarray(buf)
    mxfp8.export_components(jnp.asarray(data), b, swizzled=False)  # the device is known to the route
    x = jnp.asarray(data)
    if how == "delete":
        x.delete()
    else:
        jax.jit(lambda a: a + 1, donate_argnums=0)(x)
    assert x.is_deleted()
    with pytest.raises(Exception) as jax_says:
        x.__dlpack_device__()
    before = counts()
    with pytest.raises(type(jax_says.value)) as we_say:
        mxfp8.export_components(x, b, swizzled=False)
    assert str(we_say.value) == str(jax_says.value)
    assert delta(before) == (0, 0)  # refused before any capsule


MULTI_DEVICE = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import mxfp8
sys.path.insert(0, sys.argv[1])
from conftest import make_mxfp8

def counts():
    return [mxfp8._mxfp8.taken_by_jax(), mxfp8._mxfp8.taken_counts()["dlpack"]]

out = {}
cpus = jax.devices("cpu")
data, buf, s = make_mxfp8((256, 96), "swizzled", seed=9)
pinned = jax.sharding.SingleDeviceSharding(cpus[0], memory_kind="pinned_host")
for name in ["pinned_first", "device", "pinned_again"]:
    kind = jax.sharding.SingleDeviceSharding(cpus[0]) if name == "device" else pinned
    before = counts()
    r = mxfp8.export_components(jax.device_put(data, kind), jax.device_put(buf, kind), swizzled=True)
    out[name] = bool(np.array_equal(np.from_dlpack(r.scales), s))
    out[name + "_counts"] = [a - c for a, c in zip(counts(), before)]
b = jnp.asarray(buf)
for name, sharding in [("split", NamedSharding(Mesh(np.array(cpus), ("x",)), P("x"))),
                       ("replicated", NamedSharding(Mesh(np.array(cpus), ("x",)), P()))]:
    before = counts()
    try:
        mxfp8.export_components(jax.device_put(jnp.asarray(data), sharding), b, swizzled=True)
        out[name] = "exported"
    except Exception as e:
        out[name] = type(e).__name__
    out[name + "_counts"] = [a - c for a, c in zip(counts(), before)]
before = counts()
one = jax.device_put(jnp.asarray(data), NamedSharding(Mesh(np.array(cpus[:1]), ("x",)), P()))
r = mxfp8.export_components(one, b, swizzled=True)
out["one_device_mesh"] = bool(np.array_equal(np.from_dlpack(r.scales), s))
out["one_device_mesh_counts"] = [a - c for a, c in zip(counts(), before)]
before = counts()
r = mxfp8.export_components(jax.device_put(jnp.asarray(data), cpus[1]), jax.device_put(b, cpus[1]), swizzled=True)
out["second_device"] = bool(np.array_equal(np.from_dlpack(r.scales), s))
out["second_device_counts"] = [a - c for a, c in zip(counts(), before)]
print(json.dumps(out))
"""


def test_sharded_arrays_go_through_dunder_dlpack():
    """jaxlib's C++ export takes an array's first buffer whatever its sharding: an array over two devices
    must not be exported as its first shard. Only a SingleDeviceSharding takes the route; anything else
    asks __dlpack__ (JAX refuses two devices; a one-device mesh exports)."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    here = str(pathlib.Path(__file__).resolve().parent)
    run = subprocess.run([sys.executable, "-c", MULTI_DEVICE, here], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    # refused by its __dlpack_device__ (asked before any capsule), not exported as its first shard
    # The route takes an array only on a device whose arrays already answered __dlpack_device__ (device
    # memory kind): the first pinned-host arrays of the process go through __dlpack__, later ones not.
    assert got["pinned_first"] and got["pinned_first_counts"] == [0, 2]
    assert got["device"] and got["device_counts"] == [2, 0]
    assert got["pinned_again"] and got["pinned_again_counts"] == [2, 0]
    assert got["split"] == "BufferError" and got["split_counts"] == [0, 0]
    assert got["replicated"] == "BufferError" and got["replicated_counts"] == [0, 0]
    assert got["one_device_mesh"] and got["one_device_mesh_counts"] == [1, 1]  # the mesh's array by __dlpack__
    assert got["second_device"] and got["second_device_counts"] == [2, 0]


FAILING_EXPORT = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
import jaxlib._jax
import mxfp8
sys.path.insert(0, sys.argv[1])
from conftest import make_mxfp8

real = jaxlib._jax.buffer_to_dlpack_managed_tensor
calls = {"n": 0}
def export(buffer, stream=None):  # what the route finds (looked up on its first jax.Array)
    calls["n"] += 1
    if calls["n"] == 1:
        raise RuntimeError("a failure of the export (not its arguments)")
    if calls["n"] == 3:
        raise TypeError("another signature")
    return real(buffer, stream=stream)
jaxlib._jax.buffer_to_dlpack_managed_tensor = export  # JAX's own __dlpack__ calls it too

def counts():
    return [mxfp8._mxfp8.taken_by_jax(), mxfp8._mxfp8.taken_counts()["dlpack"]]

data, buf, s = make_mxfp8((128, 64), "compact", seed=10)
x, b = jnp.asarray(data), jnp.asarray(buf)
out = []
for _ in range(3):
    before = counts()
    r = mxfp8.export_components(x, b, swizzled=False, values_dtype="uint8")
    ok = bool(np.array_equal(np.from_dlpack(r.values), data) and np.array_equal(np.from_dlpack(r.scales), s))
    out.append([ok] + [a - c for a, c in zip(counts(), before)])
print(json.dumps(out))
"""


def test_a_failing_route_falls_back_to_dunder_dlpack():
    """A call of jaxlib's function that raises hands the array to __dlpack__ (which says why in JAX's words,
    or exports it); a TypeError (a jaxlib whose function takes other arguments) turns the route off."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    here = str(pathlib.Path(__file__).resolve().parent)
    run = subprocess.run([sys.executable, "-c", FAILING_EXPORT, here], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=300)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    # 1st export: data's route call fails (RuntimeError) -> __dlpack__ (JAX's call 2 works); scale_inv by
    # the route (call 3: TypeError -> off) -> __dlpack__ (call 4). Then every array asks __dlpack__.
    assert got[0] == [True, 0, 2]
    assert got[1] == [True, 0, 2] and got[2] == [True, 0, 2]


def _one_device_mesh(a):
    """`a` on one CPU device through a NamedSharding (not a SingleDeviceSharding): it takes __dlpack__."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices("cpu")[:1]), ("x",))
    return jax.device_put(jnp.asarray(a), NamedSharding(mesh, PartitionSpec()))


@pytest.mark.parametrize("how", ["route", "dunder"])
def test_a_jax_array_is_never_written(how):
    """JAX arrays never change (XLA may share or reuse a buffer), but jaxlib's capsules are legacy ones, which
    cannot say read-only: a jax.Array given as a destination is refused by name before anything is written,
    whichever way it would have been taken (the route, or __dlpack__ for a one-device mesh)."""
    data, buf, s = make_mxfp8((128, 64), "compact", seed=12)
    put = on_cpu if how == "route" else _one_device_mesh
    mxfp8.export_components(on_cpu(data), on_cpu(buf), swizzled=False)  # the CPU device known to the route
    out, values, scales = put(np.zeros(s.shape, np.uint8)), put(np.zeros(data.shape, np.uint8)), put(np.zeros_like(s))
    before = mxfp8._mxfp8.taken_by_jax()
    with pytest.raises(ValueError, match=r"^out is a jax\.Array, which JAX never lets change"):
        mxfp8.convert(data, buf, "compact", swizzled=False, out=out)
    spec = {"w": {"data": data, "scale_inv": buf, "swizzled": False, "fp8_dtype": "e4m3"}}
    with pytest.raises(ValueError, match=r"^params\['w'\]\[0\] is a jax\.Array"):
        mxfp8.import_tensors(spec, {"w": (values, scales)})
    assert mxfp8._mxfp8.taken_by_jax() == before  # refused before any export
    for a in (out, values, scales):
        assert not np.asarray(a).any()



DELETED_UNDER_A_VIEW = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
import mxfp8
sys.path.insert(0, sys.argv[1])
from conftest import make_mxfp8

data, buf, s = make_mxfp8((128, 64), "compact", seed=14)
cpu = jax.devices("cpu")[0]
mxfp8.export_components(jax.device_put(data, cpu), jax.device_put(buf, cpu), swizzled=False)  # device known
x, b = jax.device_put(data, cpu), jax.device_put(buf, cpu)
before = mxfp8._mxfp8.taken_by_jax()
values, scales = mxfp8.export_components(x, b, swizzled=False, values_dtype="uint8")
taken = mxfp8._mxfp8.taken_by_jax() - before
x.delete()
b.delete()
junk = [jnp.full(data.shape, 7, jnp.uint8) + i for i in range(8)]  # reuse of freed memory would show
print(json.dumps([taken, bool(np.array_equal(np.from_dlpack(values), data)),
                  bool(np.array_equal(np.from_dlpack(scales), s))]))
"""


def test_deleting_an_array_under_its_view_keeps_the_view():
    """The route exports the array's shard (addressable_data(0)), as __dlpack__ does: exporting the
    caller's array itself let x.delete() destroy the buffer while the view's external reference held it
    (XLA's CHECK failure aborted the process). A subprocess, so that the abort fails only this test."""
    import json
    import os
    import pathlib
    import subprocess
    import sys

    here = str(pathlib.Path(__file__).resolve().parent)
    run = subprocess.run([sys.executable, "-c", DELETED_UNDER_A_VIEW, here], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [2, True, True]
