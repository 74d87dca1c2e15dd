"""Test inputs built from the layout's definition, independently of the library."""
import os

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

# JAX reserves 75% of a GPU's memory when it first touches it; the device harness runs four test files at
# once (torch's and JAX's side by side), and a JAX test then ran out of memory (2026-12-06, H100). Here JAX
# allocates as it goes.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

POISON = 0xFF  # never a test scale (scales are drawn from 1..254); NaN in E8M0


def round_up(n, d):
    return (n + d - 1) // d * d


def swizzle_reference(s):
    """The cuBLAS 128x4 layout of a scale matrix, from its permute form (padding zero)."""
    r, c = s.shape
    rp, cp = round_up(r, 128), round_up(c, 4)
    padded = np.zeros((rp, cp), np.uint8)
    padded[:r, :c] = s
    return padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1).copy()


def make_mxfp8(shape, storage, direction="rowwise", seed=0):
    """Random values plus scales S, stored as `storage`: "compact", "padded" (TE's allocation, padding
    poisoned) or "swizzled" (TE's optimize_for_gemm, padding poisoned). Returns (data, buffer, S)."""
    rng = np.random.default_rng(seed)
    m = int(np.prod(shape[:-1]))
    k = shape[-1]
    r, c = (m, -(-k // 32)) if direction == "rowwise" else (-(-m // 32), k)
    data = rng.integers(0, 256, size=shape, dtype=np.uint8)
    s = rng.integers(1, 255, size=(r, c), dtype=np.uint8)
    if storage == "compact":
        buf = s.reshape(*shape[:-1], c) if direction == "rowwise" else s.copy()
    elif storage == "padded":
        rp, cp = (round_up(r, 128), round_up(c, 4)) if direction == "rowwise" else (round_up(r, 4), round_up(c, 128))
        buf = np.full((rp, cp), POISON, np.uint8)
        buf[:r, :c] = s
    else:
        mat = s if direction == "rowwise" else s.T  # columnwise scales are swizzled as their transpose
        swz = swizzle_reference(mat)
        # poison the padding: every byte the reference left zero that is not a real scale
        real = np.zeros(swz.shape, bool)
        real[swizzle_reference(np.ones_like(mat)) == 1] = True
        swz[~real] = POISON
        rp, cp = (round_up(r, 128), round_up(c, 4)) if direction == "rowwise" else (round_up(r, 4), round_up(c, 128))
        buf = swz.reshape(rp, cp)
    return data, np.ascontiguousarray(buf), s


def decode(values_u8, scales, fp8_dtype, direction="rowwise"):
    """float64 of values * 2^(scale - 127), block by block."""
    v = values_u8.view(ml_dtypes.float8_e4m3fn if fp8_dtype == "e4m3" else ml_dtypes.float8_e5m2).astype(np.float64)
    v = v.reshape(-1, v.shape[-1])
    s = np.ldexp(1.0, scales.astype(np.int32) - 127)
    s[scales == 255] = np.nan
    if direction == "rowwise":
        s = np.repeat(s.reshape(v.shape[0], -1), 32, axis=1)[:, : v.shape[1]]
    else:
        s = np.repeat(s, 32, axis=0)[: v.shape[0]]
    return v * s


VLLM_ORACLE = "vllm-0.33.0"  # scripts/install_deps.sh keeps a few files of that wheel under wheels/VLLM_ORACLE


def oracle_wheels():
    """Where scripts/install_deps.sh puts the peers' wheels the tests read: the venv's wheels/, or
    $MXFP8_TEST_WHEELS (the device machine's carried copy, bench/device/carried_deps.sh)."""
    import os
    import pathlib
    import sys

    return pathlib.Path(os.environ.get("MXFP8_TEST_WHEELS") or pathlib.Path(sys.prefix) / "wheels")


def vllm_functions(relative_path: str, names, namespace: dict) -> dict:
    """The top-level functions `names` of vLLM's `relative_path` (e.g. "vllm/utils/math_utils.py"), as
    scripts/install_deps.sh kept it from the vLLM wheel, defined unchanged in `namespace` (which gives them
    the module globals they use) and returned there. vLLM's modules import the whole engine, so the functions
    are compiled from the file's own syntax tree rather than imported. Skips when the file is not there."""
    import ast

    path = oracle_wheels() / VLLM_ORACLE / relative_path
    if not path.exists():
        pytest.skip(f"{path} is not there (scripts/install_deps.sh test keeps it from the vllm wheel)")
    tree = ast.parse(path.read_text(), str(path))
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    missing = set(names) - {node.name for node in found}
    assert not missing, f"{path} has no {sorted(missing)}: vLLM changed; read it again"
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def import_from_wheel(module: str, wheel_glob: str):
    """`module` as its installed package gives it, else from a wheel that scripts/install_deps.sh downloaded
    into the venv's wheels/ (a test oracle, not installed: its dependencies are far larger than the pure
    torch functions the tests read), unpacked once into wheels/unpacked/ and put on sys.path. Skips when
    neither is there."""
    import importlib
    import sys
    import zipfile

    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    wheels = sorted(oracle_wheels().glob(wheel_glob))
    if not wheels:
        pytest.skip(f"{module} is not installed and no {wheel_glob} is in {oracle_wheels()} "
                    "(scripts/install_deps.sh test downloads it there)")
    unpacked = wheels[-1].parent / "unpacked" / wheels[-1].stem
    if not unpacked.exists():
        staging = unpacked.with_name(unpacked.name + ".partial")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extractall(staging)
        staging.rename(unpacked)
    sys.path.insert(0, str(unpacked))
    return importlib.import_module(module)
