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
