"""2-D (32x32) block scales and grouped MoE experts through the Python API, on host memory."""
import numpy as np
import pytest

import mxfp8
from conftest import POISON, round_up, swizzle_reference


def block_weight(rows, k, direction, swizzled, seed):
    """A 32x32-quantized weight's stored scales (every 32-row or 32-column block repeats its scale)."""
    rng = np.random.default_rng(seed)
    mb, cb = -(-rows // 32), -(-k // 32)
    blocks = rng.integers(1, 255, size=(mb, cb), dtype=np.uint8)
    if direction == "rowwise":
        s = np.repeat(blocks, 32, axis=0)[:rows]
        rp, cp = round_up(rows, 128), round_up(cb, 4)
    else:
        s = np.repeat(blocks, 32, axis=1)[:, :k]
        rp, cp = round_up(mb, 4), round_up(k, 128)
    if swizzled:
        buf = swizzle_reference(s if direction == "rowwise" else s.T).reshape(rp, cp)
    else:
        buf = np.full((rp, cp), POISON, np.uint8)
        buf[: s.shape[0], : s.shape[1]] = s
    return rng.integers(0, 256, (rows, k), dtype=np.uint8), buf, blocks


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("shape", [(100, 48), (64, 64), (257, 300)])
def test_block_scales_round_trip(direction, swizzled, shape):
    data, buf, blocks = block_weight(*shape, direction, swizzled, seed=sum(shape))
    _, scales = mxfp8.export_components(data, buf, swizzled=swizzled, direction=direction, block="32x32")
    assert scales.is_copy
    np.testing.assert_array_equal(np.from_dlpack(scales), blocks)


def test_disagreeing_block_is_a_value_error():
    data, buf, _ = block_weight(100, 96, "rowwise", False, seed=5)
    buf[40, 2] ^= 1
    with pytest.raises(ValueError, match=r"scale \(40, 2\) differs from scale \(32, 2\)"):
        mxfp8.export_components(data, buf, block="32x32", swizzled=False)


def expert_group(rows, k, swizzled, packing, seed):
    rng = np.random.default_rng(seed)
    c = -(-k // 32)
    data = rng.integers(0, 256, (sum(rows), k), dtype=np.uint8)
    pieces, expected = [], []
    for r in rows:
        s = rng.integers(1, 255, (r, c), dtype=np.uint8)
        expected.append(s)
        if packing == "compact":
            pieces.append(s.reshape(-1))
        elif swizzled:
            pieces.append(swizzle_reference(s))
        else:
            padded = np.full((round_up(r, 128), round_up(c, 4)), POISON, np.uint8)
            padded[:r, :c] = s
            pieces.append(padded.reshape(-1))
    return data, np.concatenate(pieces), expected


@pytest.mark.parametrize("swizzled, packing", [(True, "padded"), (False, "padded"), (False, "compact")])
def test_grouped_experts_per_expert_and_stacked(swizzled, packing):
    rows = [0, 1, 100, 257, 128]
    data, flat, expected = expert_group(rows, 48, swizzled, packing, seed=9)
    parts = mxfp8.export_grouped(data, flat, num_experts=5, expert_rows=rows, swizzled=swizzled, scales=packing,
                                 stacked=False, values_dtype="uint8")
    start = 0
    for (values, scales), r, s in zip(parts, rows, expected):
        np.testing.assert_array_equal(np.from_dlpack(values), data[start:start + r])
        np.testing.assert_array_equal(np.from_dlpack(scales), s)
        start += r
    # uniform experts stack into [E, N, K] and [E, N, ceil(K/32)]
    data, flat, expected = expert_group([96] * 4, 200, swizzled, packing, seed=10)
    values, scales = mxfp8.export_grouped(data, flat, num_experts=4, swizzled=swizzled, scales=packing,
                                          values_dtype="uint8")
    assert np.from_dlpack(values).shape == (4, 96, 200)
    np.testing.assert_array_equal(np.from_dlpack(scales), np.stack(expected))
    assert scales.is_copy == (packing != "compact")


def test_grouped_errors():
    data, flat, _ = expert_group([100, 60], 64, False, "padded", seed=11)
    with pytest.raises(ValueError, match="stacking needs experts of one row count"):
        mxfp8.export_grouped(data, flat, num_experts=2, expert_rows=[100, 60], swizzled=False)
    with pytest.raises(ValueError, match="do not split into 3 equal experts"):
        mxfp8.export_grouped(data, flat, num_experts=3, swizzled=False)
    with pytest.raises(ValueError, match="cannot be MXFP8_GROUPED_SCALES_COMPACT"):
        mxfp8.export_grouped(data, flat, num_experts=2, expert_rows=[100, 60], swizzled=True, scales="compact")


@pytest.mark.parametrize("swizzled, packing", [(True, "padded"), (False, "padded"), (False, "compact")])
@pytest.mark.parametrize("chosen", [[5, 0, 3], [2, 3, 4], [1], [6, 6]])
def test_a_subset_of_experts_in_a_given_order(swizzled, packing, chosen):
    """Expert parallelism: the experts one rank serves, stacked in the order asked for."""
    data, flat, expected = expert_group([160] * 7, 200, swizzled, packing, seed=12)
    values, scales = mxfp8.export_grouped(data, flat, num_experts=7, swizzled=swizzled, scales=packing,
                                          values_dtype="uint8", experts=chosen)
    v = np.from_dlpack(values)
    assert v.shape == (len(chosen), 160, 200)
    for i, e in enumerate(chosen):
        np.testing.assert_array_equal(v[i], data[e * 160:(e + 1) * 160])
    np.testing.assert_array_equal(np.from_dlpack(scales), np.stack([expected[e] for e in chosen]))
    in_order = chosen == list(range(chosen[0], chosen[0] + len(chosen)))
    assert values.is_copy == (not in_order)
    assert scales.is_copy == (not in_order or packing != "compact")
    with pytest.raises(ValueError, match="experts\\[1\\] is 7, out of range"):
        mxfp8.export_grouped(data, flat, num_experts=7, swizzled=swizzled, scales=packing, experts=[0, 7])


def test_an_empty_choice_of_experts_is_refused_not_all_of_them():
    """experts=[] chooses none (refused: there would be no N); it is not the C call's NULL and 0, which
    exports every expert."""
    data, flat, _ = expert_group([64] * 3, 64, False, "compact", seed=3)
    with pytest.raises(ValueError, match="count is 0: choose at least one expert"):
        mxfp8.export_grouped(data, flat, num_experts=3, swizzled=False, scales="compact", experts=[])
