"""mxfp8.convert into FlashInfer's TRT-LLM MoE layouts ("trtllm" for w2, "trtllm_gated" for w13 of SwiGLU
experts), against a NumPy reference that runs the consumers' steps one at a time, as vLLM's
_shuffle_mxfp8_moe_weights and prepare_fp8_moe_layer_for_fi do them: vLLM's swap_w13_to_w31, FlashInfer's
reorder_rows_for_gated_act_gemm, shuffle_matrix_a (epilogue_tile_m 128, its srcToDstBlk32RowMap table) and
shuffle_matrix_sf_a (the same rows, then block_scale_interleave: the 128x4 layout, here from its permute
form). Against FlashInfer's own functions too, from its wheel (scripts/install_deps.sh downloads it; the
pure torch ones run on the CPU): its row-index helpers, and its shuffle_matrix_a and
reorder_rows_for_gated_act_gemm applied to the values, the same rows then the 128x4 formula for the scales
(shuffle_matrix_sf_a's block_scale_interleave is a JIT-built kernel). Random data, poisoned outputs,
partial K, round trips back to compact, bad input; torch on CUDA where there is a GPU. And vLLM's own padding
before that shuffle (align_mxfp8_moe_weights_for_fi_trtllm, run unchanged from the file install_deps.sh keeps
of its wheel) against convert's pad_rows_to / pad_cols_to."""
import numpy as np
import pytest

import mxfp8
from conftest import import_from_wheel, make_mxfp8, round_up, swizzle_reference, vllm_functions

POISON = 0xFF
SRC_TO_DST_BLK32_ROW_MAP = [0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                            4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31]


def swap_w13_to_w31(x):
    """vLLM: the two halves of the rows swap ([gate; up] -> [up; gate])."""
    m = x.shape[0]
    return np.concatenate([x[m // 2:], x[:m // 2]])


def gated_act_gemm_row_indices(m):
    """FlashInfer get_reorder_rows_for_gated_act_gemm_row_indices: top half at even rows, bottom at odd."""
    rows = np.arange(m)
    top, bot = rows[:(m + 1) // 2], rows[(m + 1) // 2:]
    out = np.empty(m, np.int64)
    out[0::2] = top
    out[1::2] = bot
    return out


def shuffle_matrix_a_row_indices(m, epilogue_tile_m=128):
    """FlashInfer get_shuffle_matrix_a_row_indices: row_indices[new_row] = old_row."""
    block = 32 if epilogue_tile_m % 128 == 0 else 16
    assert block == 32 and m % block == 0
    old = np.arange(m)
    new = old // block * block + np.asarray(SRC_TO_DST_BLK32_ROW_MAP)[old % block]
    idx = np.empty(m, np.int64)
    idx[new] = old
    return idx


def trtllm_reference(w, s, gated):
    """One expert: (values [M, K] uint8, scales [M, roundup(C, 4)] uint8) as vLLM hands them to the kernel."""
    if gated:
        w, s = swap_w13_to_w31(w), swap_w13_to_w31(s)
        idx = gated_act_gemm_row_indices(w.shape[0])
        w, s = w[idx], s[idx]
    idx = shuffle_matrix_a_row_indices(w.shape[0])
    w, s = w[idx], s[idx]
    return w, swizzle_reference(s).reshape(s.shape[0], -1)  # shuffle_matrix_sf_a: 128x4 of the permuted rows


def grouped(experts, n, k, seed):
    rng = np.random.default_rng(seed)
    c = -(-k // 32)
    data = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
    s = rng.integers(0, 256, (experts, n, c), dtype=np.uint8)
    return data, s


@pytest.mark.parametrize("target", ["trtllm", "trtllm_gated"])
@pytest.mark.parametrize("experts,n,k", [(3, 128, 200), (2, 384, 96), (4, 256, 256), (1, 128, 33)])
def test_grouped_experts_match_vllms_steps(target, experts, n, k):
    data, s = grouped(experts, n, k, seed=n + k)
    c, cp = s.shape[2], round_up(s.shape[2], 4)
    values = np.full((experts, n, k), POISON, np.uint8)
    out = np.full((experts, n, cp), POISON, np.uint8)
    got = mxfp8.convert(data, s.reshape(-1), target, num_experts=experts, scales="compact", values=values, out=out, swizzled=False)
    assert got.scales is out and got.values is values
    for e in range(experts):
        w_ref, s_ref = trtllm_reference(data[e * n:(e + 1) * n], s[e], target == "trtllm_gated")
        np.testing.assert_array_equal(values[e], w_ref, err_msg=f"expert {e} values")
        np.testing.assert_array_equal(out[e], s_ref, err_msg=f"expert {e} scales")
    # New outputs: shaped as vLLM's parameters, w [E, M, K] and scales [E, M, roundup(C, 4)] ([E, M, C] there)
    fresh = mxfp8.convert(data, s.reshape(-1), target, num_experts=experts, scales="compact", values=True, swizzled=False)
    assert fresh.values.shape == (experts, n, k) and fresh.scales.shape == (experts, n, cp)
    np.testing.assert_array_equal(fresh.values, values)
    np.testing.assert_array_equal(fresh.scales, out)
    assert mxfp8.layout_bytes(target, n, c) == n * cp


@pytest.mark.parametrize("target", ["trtllm", "trtllm_gated"])
@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
def test_one_expert_from_te_storage_and_the_round_trip(target, storage):
    data, buf, s = make_mxfp8((256, 200), storage, seed=3)
    out = mxfp8.convert(data, buf, target, swizzled=storage == "swizzled", values=True)
    w_ref, s_ref = trtllm_reference(data, s, target == "trtllm_gated")
    np.testing.assert_array_equal(out.values, w_ref)
    np.testing.assert_array_equal(out.scales, s_ref)
    # Back to compact with the inverse of the rows each output row came from (and the 128x4 undone).
    m, c = s.shape
    rows = np.arange(m)
    order = trtllm_reference(rows[:, None].astype(np.int64), np.zeros((m, 1), np.uint8), target == "trtllm_gated")[0][:, 0]
    back_values = np.empty_like(out.values)
    back_values[order] = out.values
    np.testing.assert_array_equal(back_values, data)
    cp = round_up(c, 4)
    unswizzled = out.scales.reshape(m // 128, cp // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(m, cp)
    back_scales = np.empty_like(unswizzled)
    back_scales[order] = unswizzled
    np.testing.assert_array_equal(back_scales[:, :c], s)
    assert (back_scales[:, c:] == 0).all()  # padding columns


def test_the_gated_layout_interleaves_up_before_gate():
    """A w13 whose gate rows are all 1 and up rows all 2: FlashInfer's row pairs are (up, gate)."""
    n, k = 128, 64
    data = np.concatenate([np.full((n, k), 1, np.uint8), np.full((n, k), 2, np.uint8)])
    s = np.concatenate([np.full((n, 2), 10, np.uint8), np.full((n, 2), 20, np.uint8)])
    out = mxfp8.convert(data, s, "trtllm_gated", scales="compact", values=True, shape=(2 * n, k), swizzled=False)
    # Before the shuffle row 2i is up_i and 2i + 1 gate_i; the shuffle keeps each row's parity class in
    # 32-row blocks: source rows 4a + b go to 8b + a, so even interleaved rows (b even) land on rows whose
    # (r % 32) // 8 is even.
    parity = (np.arange(2 * n) % 32) // 8 % 2
    np.testing.assert_array_equal(out.values[:, 0], np.where(parity == 0, 2, 1))


def _flashinfer():
    """FlashInfer's pure torch helpers (flashinfer-python 0.7.2.post1, as its wheel ships them)."""
    torch = pytest.importorskip("torch")
    import_from_wheel("flashinfer", "flashinfer_python-*.whl")
    from flashinfer.fused_moe.core import get_reorder_rows_for_gated_act_gemm_row_indices, reorder_rows_for_gated_act_gemm
    from flashinfer.quantization.fp4_quantization import shuffle_matrix_a
    from flashinfer.utils import get_shuffle_matrix_a_row_indices

    return torch, get_shuffle_matrix_a_row_indices, get_reorder_rows_for_gated_act_gemm_row_indices, \
        shuffle_matrix_a, reorder_rows_for_gated_act_gemm


def test_matches_flashinfers_own_row_indices():
    torch, shuffle_rows, gated_rows, _, _ = _flashinfer()
    for m in (128, 256, 768):
        x = torch.zeros(m, 4, dtype=torch.uint8)
        np.testing.assert_array_equal(shuffle_rows(x, 128).numpy(), shuffle_matrix_a_row_indices(m))
        np.testing.assert_array_equal(gated_rows(x).numpy(), gated_act_gemm_row_indices(m))


@pytest.mark.parametrize("target", ["trtllm", "trtllm_gated"])
@pytest.mark.parametrize("n,k", [(128, 200), (384, 96)])
def test_matches_flashinfers_own_shuffle_of_values_and_scale_rows(target, n, k):
    """vLLM's steps with FlashInfer's own functions: swap, reorder_rows_for_gated_act_gemm, shuffle_matrix_a
    (values and, before the 128x4 interleave, scale rows)."""
    torch, shuffle_rows, _, shuffle_matrix_a, reorder_gated = _flashinfer()
    data, s = grouped(1, n, k, seed=n * k)
    w, sc = torch.from_numpy(data), torch.from_numpy(s[0])
    if target == "trtllm_gated":
        w, sc = torch.cat([w[n // 2:], w[:n // 2]]), torch.cat([sc[n // 2:], sc[:n // 2]])  # vLLM swap_w13_to_w31
        w, sc = reorder_gated(w), reorder_gated(sc)
    want_values = shuffle_matrix_a(w, 128).numpy()
    want_scale_rows = sc[shuffle_rows(sc, 128)].numpy()
    out = mxfp8.convert(data, s.reshape(-1), target, num_experts=1, scales="compact", values=True, swizzled=False)
    np.testing.assert_array_equal(out.values[0], want_values)
    np.testing.assert_array_equal(out.scales[0], swizzle_reference(want_scale_rows).reshape(n, -1))


def test_bad_input_gets_clear_errors():
    data, s = grouped(2, 96, 64, seed=1)
    with pytest.raises(ValueError, match="needs rows \\(per expert\\) a multiple of 128.*got 96"):
        mxfp8.convert(data, s.reshape(-1), "trtllm_gated", num_experts=2, scales="compact", values=True, swizzled=False)
    data, s = grouped(2, 128, 64, seed=1)
    with pytest.raises(ValueError, match="values is NULL, but options.target MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED permutes"):
        mxfp8.convert(data, s.reshape(-1), "trtllm", num_experts=2, scales="compact", swizzled=False)
    with pytest.raises(ValueError, match="convert stacked experts with mxfp8_grouped_convert"):
        mxfp8.convert(data.reshape(2, 128, 64), s, "trtllm_gated", scales="compact", values=True, swizzled=False)
    cw_data, cw_buf, _ = make_mxfp8((256, 128), "padded", direction="columnwise", seed=4)
    with pytest.raises(ValueError, match="rowwise scales only"):
        mxfp8.convert(cw_data, cw_buf, "trtllm", direction="columnwise", values=True, swizzled=False)
    out = np.full((2, 128, 4), POISON, np.uint8)
    with pytest.raises(ValueError, match="TRT-LLM shuffled scales of 2 128 x 2 matrices are 1024 bytes, got 512"):
        mxfp8.convert(data, s.reshape(-1), "trtllm", num_experts=2, scales="compact", values=True, out=out[:, :64], swizzled=False)
    assert (out == POISON).all()


def test_torch_cuda_matches_the_reference():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
        pytest.skip("needs a CUDA device and a CUDA build of mxfp8")
    # K: 16-byte, 4-byte and byte vectors of the row kernel, rows in one or two passes; C: 16-byte, word and
    # byte loads of the scales (permute_rows_cuda.cu); the scales hold zeros, for the fix-up.
    shapes = ((8, 384, 2048), (3, 128, 200), (2, 256, 33), (4, 128, 4624), (3, 256, 1536), (2, 128, 640),
              (2, 128, 1540), (1, 128, 257))
    for target in ("trtllm", "trtllm_gated"):
        for (experts, n, k), fixup in [(shape, False) for shape in shapes] + [((3, 256, 1536), True), ((3, 128, 200), True)]:
            data, s = grouped(experts, n, k, seed=k)
            values = torch.from_numpy(data).cuda().view(torch.float8_e4m3fn)
            out = mxfp8.convert(values, torch.from_numpy(s.reshape(-1)).cuda(), target, num_experts=experts,
                                scales="compact", values=True, zero_exponent_as_one=fixup, swizzled=False)
            assert out.values.dtype == torch.float8_e4m3fn and out.values.is_cuda
            got_v, got_s = out.values.view(torch.uint8).cpu().numpy(), out.scales.cpu().numpy()
            want = np.where(s == 0, 1, s).astype(np.uint8) if fixup else s
            assert not fixup or (s == 0).any()
            for e in range(experts):
                w_ref, s_ref = trtllm_reference(data[e * n:(e + 1) * n], want[e], target == "trtllm_gated")
                what = f"{target} {experts}x{n}x{k} fix-up {fixup} expert {e}"
                np.testing.assert_array_equal(got_v[e], w_ref, err_msg=what)
                np.testing.assert_array_equal(got_s[e], s_ref, err_msg=what)


def _vllm_alignment():
    """vLLM 0.33's align_mxfp8_moe_weights_for_fi_trtllm and the align_moe_weights_for_fi it calls, with
    vLLM's round_up, compiled unchanged from its files (conftest.vllm_functions)."""
    torch = pytest.importorskip("torch")

    class QuietLogger:  # vLLM's logger says once that it pads
        def info_once(self, *args, **kwargs):
            pass

    math_utils = vllm_functions("vllm/utils/math_utils.py", ["round_up"], {})
    return vllm_functions("vllm/model_executor/layers/quantization/utils/flashinfer_utils.py",
                          ["align_moe_weights_for_fi", "align_mxfp8_moe_weights_for_fi_trtllm"],
                          {"torch": torch, "round_up": math_utils["round_up"], "logger": QuietLogger()})


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("experts,inter,hidden", [(2, 72, 320), (3, 128, 96), (1, 40, 256), (2, 128, 256), (2, 96, 2880)])
def test_padding_is_vllms_alignment_before_its_trtllm_shuffle(device, experts, inter, hidden):
    """vLLM's prepare_fp8_moe_layer_for_fi for MXFP8 on the TRT-LLM MoE: align_mxfp8_moe_weights_for_fi_trtllm
    (intermediate to 128, hidden to 256, scale 127; vLLM's code), then its swap and FlashInfer's shuffle (the
    reference above), against one convert of the unpadded experts with pad_rows_to / pad_cols_to."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and (not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda):
        pytest.skip("needs a CUDA device and a CUDA build of mxfp8")
    align = _vllm_alignment()["align_mxfp8_moe_weights_for_fi_trtllm"]
    rng = np.random.default_rng(inter * hidden)
    w13 = rng.integers(0, 256, (experts, 2 * inter, hidden), dtype=np.uint8)
    w2 = rng.integers(0, 256, (experts, hidden, inter), dtype=np.uint8)
    s13 = rng.integers(1, 255, (experts, 2 * inter, -(-hidden // 32)), dtype=np.uint8)
    s2 = rng.integers(1, 255, (experts, hidden, -(-inter // 32)), dtype=np.uint8)
    on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    pw13, pw2, ps13, ps2, inter_p, hidden_p = align(on(w13), on(w2), on(s13), on(s2), True, 128, 256)
    assert (inter_p, hidden_p) == (round_up(inter, 128), round_up(hidden, 256))
    cases = [("w13", w13, s13, pw13, ps13, "trtllm_gated", 128, 256), ("w2", w2, s2, pw2, ps2, "trtllm", 256, 128)]
    for name, w, s, padded_w, padded_s, target, rows_to, cols_to in cases:
        n, k = w.shape[1:]
        got = mxfp8.convert(on(w.reshape(experts * n, k)), on(s.reshape(-1)), target, num_experts=experts, scales="compact",
                            values=True, swizzled=False, pad_rows_to=rows_to, pad_cols_to=cols_to)
        np_, kp = padded_w.shape[1:]
        assert got.values.shape == (experts, np_, kp), name
        assert got.scales.shape == (experts, np_, round_up(padded_s.shape[2], 4)), name
        got_v, got_s = got.values.cpu().numpy(), got.scales.cpu().numpy()
        for e in range(experts):
            w_ref, s_ref = trtllm_reference(padded_w[e].cpu().numpy(), padded_s[e].cpu().numpy(), target == "trtllm_gated")
            np.testing.assert_array_equal(got_v[e], w_ref, err_msg=f"{name} expert {e} values")
            np.testing.assert_array_equal(got_s[e], s_ref, err_msg=f"{name} expert {e} scales")


def test_padding_is_refused_where_it_cannot_apply():
    data, s = grouped(2, 144, 200, seed=5)
    with pytest.raises(ValueError, match="pad_cols_to is 48, not a multiple of 32"):
        mxfp8.convert(data, s.reshape(-1), "trtllm", num_experts=2, scales="compact", values=True, swizzled=False,
                      pad_rows_to=128, pad_cols_to=48)
    with pytest.raises(ValueError, match="the padded values must be written with their scales"):
        mxfp8.convert(data, s.reshape(-1), "compact", num_experts=2, scales="compact", swizzled=False, pad_rows_to=128)
    with pytest.raises(ValueError, match="255 is NaN"):
        mxfp8.convert(data, s.reshape(-1), "trtllm", num_experts=2, scales="compact", values=True, swizzled=False,
                      pad_rows_to=128, pad_scale=255)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("num_experts", [None, 2])
def test_refused_padding_of_huge_outputs_allocates_nothing_first(framework, num_experts):
    """Padding to 2^40 rows with an option the library refuses was a MemoryError (terabytes asked of NumPy or
    torch, torch's C++ backtrace in the message) before the library's ValueError could come: the outputs
    were allocated first. The third probe of the Python layer found it."""
    data, s = grouped(2, 144, 200, seed=5)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        data, s = torch.from_numpy(data), torch.from_numpy(s)
    args = (data, s.reshape(-1), "compact") if num_experts else (data[:144], s[0], "compact")
    kw = dict(num_experts=num_experts, scales="compact") if num_experts else {}
    for bad, message in ((dict(pad_scale=255, values=True), "255 is NaN"),
                         (dict(pad_cols_to=48, values=True), "pad_cols_to is 48, not a multiple of 32"),
                         ({}, "the padded values must be written with their scales")):
        with pytest.raises(ValueError, match=message):
            mxfp8.convert(*args, swizzled=False, pad_rows_to=2**40, **bad, **kw)


def test_grouped_convert_refuses_a_shape_that_is_not_the_datas():
    """The grouped desc takes K from shape= and the data as bytes: a shape of another K was read at the wrong
    offsets, without a word (one tensor's is refused by the library)."""
    data, s = grouped(2, 144, 200, seed=5)
    with pytest.raises(ValueError, match=r"shape \(200, 288\) is not data's shape \(288, 200\)"):
        mxfp8.convert(data, s.reshape(-1), "compact", num_experts=2, scales="compact", swizzled=False, shape=(200, 288))
    with pytest.raises(ValueError, match=r"is not data's shape"):
        mxfp8.convert(data, s.reshape(-1), "compact", num_experts=2, scales="compact", swizzled=False, shape=(2, 144, 100))
    got = mxfp8.convert(data, s.reshape(-1), "compact", num_experts=2, scales="compact", swizzled=False,
                        shape=(2, 144, 200))  # the same elements and K, split by expert: taken
    np.testing.assert_array_equal(np.asarray(got.scales).reshape(-1), s.reshape(-1))


@pytest.mark.parametrize("num_experts", [None, 2])
@pytest.mark.parametrize("pad_rows_to", [2**62, 2**63 - 1])
def test_gated_padding_past_int64_is_a_value_error(num_experts, pad_rows_to):
    """The gated target pads each half: 2 * roundup(I, pad_rows_to) can pass int64 where pad_rows_to fits. The
    library refuses that ("the padded rows overflows int64"); the wrapper's own extent must not hand the
    bindings an int they cannot take (a TypeError about layout_bytes' signature)."""
    data, s = grouped(2, 128, 64, seed=7)
    kw = dict(num_experts=num_experts, scales="compact") if num_experts else {}
    with pytest.raises(ValueError, match="overflows int64"):
        mxfp8.convert(data if num_experts else data[:128], s.reshape(-1) if num_experts else s[0], "trtllm_gated",
                      values=True, swizzled=False, pad_rows_to=pad_rows_to, **kw)


def _padded_in_layout(s, target):
    """A padded compact S in `target`, from mxfp8/layout.h's formulas (flat bytes)."""
    r, c = s.shape
    if target == "compact":
        return s.reshape(-1)
    if target == "cutlass_128x4":
        return swizzle_reference(s)
    if target == "deepgemm":  # byte ((c / 4) * roundup(R, 4) + r) * 4 + c % 4
        out = np.zeros(4 * -(-c // 4) * round_up(r, 4), np.uint8)
        rr, cc = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
        out[((cc // 4) * round_up(r, 4) + rr) * 4 + cc % 4] = s
        return out
    if target == "deepgemm_float32":  # bytes 0, 0, (e & 1) << 7, e >> 1
        out = np.zeros((r, c, 4), np.uint8)
        out[..., 2], out[..., 3] = (s & 1) << 7, s >> 1
        return out.reshape(-1)
    return trtllm_reference(np.zeros((r, 1), np.uint8), s, target == "trtllm_gated")[1].reshape(-1)


@pytest.mark.parametrize("target", ["compact", "cutlass_128x4", "deepgemm", "deepgemm_float32", "trtllm", "trtllm_gated"])
@pytest.mark.parametrize("storage", ["compact", "swizzled"])
def test_padding_with_the_fixup_rewrites_real_scales_only(target, storage):
    """The fix-up writes a real byte 0 as 1; padding scales are pad_scale, 0 here, and stay 0 (the header:
    "the scale_fixup rewrites the real scales only"). Grouped experts from compact or swizzled storage into
    every target, padded rows (each half for the gated one) and K, outputs inside poisoned guards."""
    gated = target == "trtllm_gated"
    experts, n, k = 2, (2 * 72 if gated else 200), 200
    rows_to, cols_to = (128, 256) if target.startswith("trtllm") else (48, 256)
    data, s = grouped(experts, n, k, seed=11)
    s[:, ::7, 1] = 0  # real zeros, for the fix-up
    c = s.shape[2]
    src = s.reshape(-1) if storage == "compact" else np.concatenate([swizzle_reference(x) for x in s])
    halves, half = (2, n // 2) if gated else (1, n)
    ph = round_up(half, rows_to)
    np_, kp = halves * ph, round_up(k, cols_to)
    want_v, want_s = [], []
    for e in range(experts):
        pv, ps = np.zeros((np_, kp), np.uint8), np.zeros((np_, kp // 32), np.uint8)  # pad_scale 0
        for h in range(halves):
            pv[h * ph:h * ph + half, :k] = data[e * n + h * half:e * n + (h + 1) * half]
            ps[h * ph:h * ph + half, :c] = np.where(s[e, h * half:(h + 1) * half] == 0, 1, s[e, h * half:(h + 1) * half])
        if target.startswith("trtllm"):
            pv = trtllm_reference(pv, ps, gated)[0]
        want_v.append(pv.reshape(-1))
        want_s.append(_padded_in_layout(ps, target))
    want_v, want_s = np.concatenate(want_v), np.concatenate(want_s)
    guard = 64
    vbuf, sbuf = np.full(want_v.size + 2 * guard, POISON, np.uint8), np.full(want_s.size + 2 * guard, POISON, np.uint8)
    mxfp8.convert(data, src, target, num_experts=experts, scales="compact" if storage == "compact" else "padded",
                  swizzled=storage == "swizzled", values=vbuf[guard:-guard], out=sbuf[guard:-guard],
                  zero_exponent_as_one=True, pad_rows_to=rows_to, pad_cols_to=cols_to, pad_scale=0)
    np.testing.assert_array_equal(vbuf[guard:-guard], want_v)
    np.testing.assert_array_equal(sbuf[guard:-guard], want_s)
    assert (vbuf[:guard] == POISON).all() and (vbuf[-guard:] == POISON).all()
    assert (sbuf[:guard] == POISON).all() and (sbuf[-guard:] == POISON).all()


def test_padding_keeps_a_tensors_lead_dims_unless_its_rows_grow():
    """A (2, 64, 96) weight: K padded alone keeps (2, 64, ...); rows padded make one matrix of the padded rows."""
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, (2, 64, 96), dtype=np.uint8)
    s = rng.integers(1, 255, (2, 64, 3), dtype=np.uint8)
    k_only = mxfp8.convert(data, s, "compact", swizzled=False, values=True, pad_cols_to=128)
    assert k_only.values.shape == (2, 64, 128) and k_only.scales.shape == (2, 64, 4)
    np.testing.assert_array_equal(k_only.values[..., :96], data)
    assert (k_only.values[..., 96:] == 0).all() and (k_only.scales[..., 3] == 127).all()
    aligned = mxfp8.convert(data, s, "compact", swizzled=False, values=True, pad_rows_to=128)  # 128 rows already
    assert aligned.values.shape == (2, 64, 96)
    np.testing.assert_array_equal(aligned.values, data)
    grown = mxfp8.convert(data, s, "compact", swizzled=False, values=True, pad_rows_to=256, pad_cols_to=128)
    assert grown.values.shape == (256, 128) and grown.scales.shape == (256, 4)
    np.testing.assert_array_equal(grown.values[:128, :96], data.reshape(128, 96))
    assert (grown.values[128:] == 0).all() and (grown.scales[128:] == 127).all()
