"""Checkpoints engines load: MXFP8 and NVFP4 weights written from trainer storage, exactly as stored.

    mxfp8.checkpoint.save("out/model", tensors, format="compressed-tensors", config=hf_config)
    mxfp8.checkpoint.save("out/model", tensors, format="modelopt", config=hf_config)

Publishing a model trained in MXFP8 or NVFP4 usually means dequantizing Transformer Engine's storage and
quantizing again with another tool: a second rounding, and a served model that is not the trained one.
``save`` writes the trained bytes themselves (through export_components: TE's padded or swizzled scales
made compact, no dequantize, no requantize) as a Hugging Face directory that vLLM and SGLang load:

* ``format="compressed-tensors"`` (MXFP8 storage; what llm-compressor writes): per Linear ``X.weight``
  float8_e4m3fn ``[N, K]`` and ``X.weight_scale`` uint8 E8M0 ``[N, K/32]``; config.json's
  ``quantization_config`` as compressed-tensors 0.20.1 writes its ``MXFP8`` preset (W8A8 with dynamic
  activations, nothing calibrated) or, with ``scheme="MXFP8A16"``, the weight-only one. K must be a
  multiple of 32 (compressed-tensors' group size), values E4M3.
* ``format="modelopt"`` (NVFP4 storage; what ModelOpt 0.47 exports): ``X.weight`` uint8 ``[N, K/2]`` (two
  E2M1 values a byte, the even element in the low nibble), ``X.weight_scale`` float8_e4m3fn ``[N, K/16]``,
  ``X.weight_scale_2`` float32 0-d (amax / (6 * E4M3_MAX)), and ``hf_quant_config.json`` plus config.json's
  ``quantization_config`` as ModelOpt writes them. Trainer storage has no activation calibration, so the
  scheme is the weight-only ``W4A16_NVFP4`` unless ``input_scales`` gives each Linear its 0-d float32
  ``input_scale`` (then ``NVFP4``, W4A4). Fused Linears (q/k/v, gate/up) must share one weight_scale_2,
  as vLLM reads one per fused GEMM: quantize them with mxfp8.nvfp4_quantize_fused; separate amaxes are
  refused, naming them. K must be a multiple of 16, the amax one per tensor.

``tensors`` maps the caller's names to bucket specs (``{"data", "scale_inv", "swizzled", ...}`` as
export_bucket takes them, MXFP8 or ``"format": "nvfp4"``; ``"swizzled"`` required, whole tensors) for the
quantized Linears, and to plain arrays
(torch or NumPy) for what stays unquantized (embeddings, norms, lm_head), written in their dtype.
``name_map`` turns the caller's names into the checkpoint's (trainers and Hugging Face name layers
differently); a quantized tensor's checkpoint name ends in ``.weight``. The module of every unquantized
2-D ``.weight`` (embeddings and lm_head too) is listed as not quantized (compressed-tensors' ``ignore``,
ModelOpt's ``exclude_modules`` and ``ignore``): a loader takes an unlisted Linear for a quantized one, and
compressed-tensors' model-free readers take any unlisted 2-D weight for one; ``ignore=`` overrides it.
An unquantized array may not be named ``X.weight_scale`` or ``X.weight_scale_2`` next to an ``X.weight``:
``load`` reads those as the weight's scales.

The directory appears whole or not at all: everything is written into a temporary sibling and renamed at
the end; any failure (a name collision, a shape the format cannot hold, a full disk, an unwritable path)
raises before the rename and leaves nothing behind. An empty folder at `path` (a tempfile.mkdtemp()) is
taken as it is; ``overwrite=True`` replaces only a checkpoint folder (one with a config.json), and only
once the new one is complete. The target is looked at again right before the rename, so what another
process put there meanwhile is not replaced without it. Host memory holds one shard
(``max_shard_bytes``) at a time; ``progress=True`` reports tensors, bytes and MB/s on stderr. Needs torch
and safetensors.
"""
from __future__ import annotations

import importlib
import json
import numbers
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Union

from . import _args
from ._api import Components, export_components
from ._bucket import _Spec
from . import nvfp4 as _nvfp4

FORMATS = ("compressed-tensors", "modelopt")
COMPRESSED_TENSORS_VERSION = "0.20.1"  # the version whose config this writes, byte for byte (its "version")
MODELOPT_VERSION = "0.47.0"  # the producer version ModelOpt's files carry
_SINGLE = "model.safetensors"
_INDEX = "model.safetensors.index.json"
# Fused Linears whose NVFP4 weight_scale_2 a loader takes once for the fused GEMM (the max of them).
_FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class Loaded(NamedTuple):
    """What load returns: the format, the config.json dict, and the checkpoint's tensors by name: a
    quantized Linear's ``X.weight`` as Components (MXFP8: values, scales) or mxfp8.nvfp4.Components
    (NVFP4: packed values, scales, weight_scale_2), anything else as the tensor stored."""

    format: str
    config: Dict[str, Any]
    tensors: Dict[str, Any]


def _torch():
    try:
        import torch
        importlib.import_module("safetensors.torch")
    except ImportError as err:
        raise ImportError(f"mxfp8.checkpoint needs torch and safetensors (pip install torch safetensors): {err}") \
            from err
    return torch


def _torch_view(torch, array: Any) -> Any:
    """torch's view of `array` (a torch tensor, an mxfp8.Array, any DLPack producer), no copy. Negative
    strides (a NumPy a[::-1]) are refused first: torch 2.11's from_dlpack aborts the process on them."""
    if isinstance(array, torch.Tensor):
        return array
    strides = tuple(getattr(array, "strides", None) or ())
    if any(int(st) < 0 for st in strides):
        raise ValueError(f"negative strides {strides}: pass a copy")
    return torch.from_dlpack(array)


def _to_torch(torch, array: Any) -> Any:
    """A torch tensor on the host holding `array` (a torch tensor, an mxfp8.Array, any DLPack producer)."""
    return _torch_view(torch, array).detach().to("cpu")


def _writable(torch, name: str, value: Any) -> None:
    """A ValueError now, before anything is written, for an array the writing would fail on half-way: one
    with no bytes to read (a meta tensor) or of a dtype safetensors has no name for (complex, ...), asked of
    safetensors itself with an empty tensor of that dtype."""
    from safetensors.torch import save

    if value.device.type == "meta":
        raise ValueError(f"tensors[{name!r}] is a meta tensor: it has no bytes to write")
    try:
        save({"x": torch.empty(0, dtype=value.dtype)})
    except Exception as err:  # safetensors raises KeyError, ValueError or its own error for a dtype it lacks
        raise ValueError(f"tensors[{name!r}] is {value.dtype}, which safetensors cannot store ({err!r})") from err


def _components(torch, spec: _Spec, where: str, fmt: str) -> Dict[str, Any]:
    """The checkpoint tensors of one quantized Linear (suffixes of its module name), on the host."""
    if fmt == "compressed-tensors":
        if spec.nvfp4:
            raise ValueError(f"{where} is NVFP4: format='compressed-tensors' holds MXFP8 weights (NVFP4 goes in "
                             "format='modelopt')")
        if spec.fp8_dtype != "e4m3":
            raise ValueError(f"{where} is {spec.fp8_dtype}: compressed-tensors' MXFP8 weights are E4M3")
        if len(spec.shape) != 2 or spec.shape[-1] % 32:
            raise ValueError(f"{where} has shape {spec.shape}: compressed-tensors' MXFP8 Linears are 2-D with K a "
                             "multiple of 32 (its group size; a partial last block does not load)")
        values, scales = export_components(spec.data, spec.scale_inv, shape=spec.shape, fp8_dtype="e4m3",
                                           swizzled=spec.swizzled, values_dtype="uint8")
        return {"weight": _to_torch(torch, values).view(torch.float8_e4m3fn),
                "weight_scale": _to_torch(torch, scales).contiguous()}
    if not spec.nvfp4:
        raise ValueError(f"{where} is MXFP8: format='modelopt' holds NVFP4 weights (MXFP8 goes in "
                         "format='compressed-tensors')")
    shape = spec.nvfp4_shape(0)
    if len(shape) != 2 or shape[-1] % 16:
        raise ValueError(f"{where} has shape {shape}: ModelOpt's NVFP4 Linears are 2-D with K a multiple of 16")
    if _args.numel(_args.dims(f"{where}['amax']", spec.amax)) != 1:
        raise ValueError(f"{where} has a per-row amax: ModelOpt's NVFP4 weight has one weight_scale_2")
    parts = _nvfp4.export_components(spec.data, spec.scale_inv, spec.amax, shape=shape, swizzled=spec.swizzled,
                                     e4m3_max=spec.e4m3_max, values_dtype="uint8", scales_dtype="uint8")
    return {"weight": _to_torch(torch, parts.values).contiguous(),
            "weight_scale": _to_torch(torch, parts.scales).contiguous().view(torch.float8_e4m3fn),
            "weight_scale_2": _to_torch(torch, parts.global_scale).reshape(())}


def _quantization_config(fmt: str, scheme: str, ignore: List[str]) -> Dict[str, Any]:
    """config.json's quantization_config, as the format's producer writes it."""
    if fmt == "compressed-tensors":
        group = {"dynamic": False, "group_size": 32, "num_bits": 8, "scale_dtype": "torch.uint8", "strategy": "group",
                 "symmetric": True, "type": "float"}
        activations = dict(group, dynamic=True) if scheme == "MXFP8" else None
        return {"config_groups": {"group_0": {"format": "mxfp8-quantized", "input_activations": activations,
                                              "output_activations": None, "targets": ["Linear"], "weights": group}},
                "format": "mxfp8-quantized", "global_compression_ratio": None, "ignore": ignore,
                "kv_cache_scheme": None, "moe_sparsity_config": None, "quant_method": "compressed-tensors",
                "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {},
                "version": COMPRESSED_TENSORS_VERSION}
    nvfp4 = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
    group = {"weights": nvfp4, "targets": ["Linear"]}
    if scheme == "NVFP4":
        group = {"input_activations": nvfp4, **group}
    return {"config_groups": {"group_0": group}, "ignore": ignore, "quant_algo": scheme,
            "producer": {"name": "modelopt", "version": MODELOPT_VERSION}, "quant_method": "modelopt"}


def _hf_quant_config(scheme: str, ignore: List[str]) -> Dict[str, Any]:
    """ModelOpt's hf_quant_config.json (vLLM reads it where config.json has no quantization_config)."""
    return {"producer": {"name": "modelopt", "version": MODELOPT_VERSION},
            "quantization": {"quant_algo": scheme, "kv_cache_quant_algo": None, "group_size": 16,
                             "exclude_modules": ignore}}


class _Shards:
    """Tensors gathered into safetensors files of at most `limit` bytes (one larger tensor alone), written
    into `folder` as they fill; named model-0000i-of-0000n at the end, when n is known."""

    def __init__(self, folder: Path, limit: int):
        self.folder, self.limit = folder, limit
        self.pending: Dict[str, Any] = {}
        self.pending_storages: set = set()  # data_ptr() of each pending tensor's storage
        self.pending_bytes = 0
        self.files: List[List[str]] = []  # the names in each file written
        self.total = 0  # bytes added
        self.written = 0  # bytes in files

    def add(self, name: str, tensor: Any) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.limit:
            self.flush()
        # safetensors refuses a file whose tensors share a storage (tied embeddings, experts that are views
        # of one flat buffer); each is written as its own bytes, as it reads back, so such a one is copied.
        storage = tensor.untyped_storage().data_ptr()
        if storage in self.pending_storages:
            tensor = tensor.clone()
            storage = tensor.untyped_storage().data_ptr()
        self.pending_storages.add(storage)
        self.pending[name] = tensor
        self.pending_bytes += size
        self.total += size

    def flush(self) -> None:
        if not self.pending:
            return
        from safetensors.torch import save_file

        save_file(self.pending, str(self.folder / f"shard-{len(self.files):05d}"), metadata={"format": "pt"})
        self.files.append(list(self.pending))
        self.written += self.pending_bytes
        self.pending, self.pending_storages, self.pending_bytes = {}, set(), 0

    def finish(self) -> None:
        """The final names, and the index when there is more than one file."""
        self.flush()
        n = len(self.files)
        names = [_SINGLE] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
        for i, name in enumerate(names):
            os.replace(self.folder / f"shard-{i:05d}", self.folder / name)
            os.chmod(self.folder / name, 0o666 & ~_umask())  # safetensors writes 0600: a server of another uid reads it
        if n > 1:
            index = {"metadata": {"total_size": self.total},
                     "weight_map": {t: names[i] for i, file in enumerate(self.files) for t in sorted(file)}}
            _write_json(self.folder / _INDEX, index)


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, allow_nan=False)
        f.write("\n")


def _positive_finite(torch, what: str, value: Any, allow_zero: bool) -> Any:
    """A float32 scalar or one-element array that is finite and positive (or zero where allowed)."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)  # NumPy's float32 too
    if not (hasattr(value, "__dlpack__") or number) or isinstance(value, bool):
        raise TypeError(f"{what} must be a float32 array of one element or a number, got {type(value).__name__}")
    t = torch.as_tensor(value) if number else _to_torch(torch, value)
    if t.numel() != 1:
        raise ValueError(f"{what} has {t.numel()} elements, it is one number")
    v = float(t.reshape(()).to(torch.float32))  # as it is written: a float64 1e300 is float32 inf
    if not (v == v and abs(v) != float("inf") and (v > 0 or (allow_zero and v == 0))):
        raise ValueError(f"{what} is {v}: it must be finite and {'non-negative' if allow_zero else 'positive'}")
    return t


def _checked_spec(torch, name: str, value: Mapping[str, Any]) -> _Spec:
    """A quantized Linear's bucket spec, read as export_bucket reads it, with what a checkpoint needs more:
    `swizzled` said (a wrong guess would decode silently, and a checkpoint stays), the whole tensor (a
    shard is a receiver's business), and an NVFP4 amax a reader can decode with."""
    where = f"tensors[{name!r}]"
    if "swizzled" not in value:
        raise ValueError(f"{where} has no 'swizzled': say whether its scales are in the cuBLAS 128x4 layout "
                         "(True) or row-major (False); the two can have the same shape and a wrong guess would be "
                         "written without a word")
    if "rows" in value or "cols" in value:
        raise ValueError(f"{where} has 'rows' / 'cols': a checkpoint holds whole tensors")
    for key in ("data", "scale_inv") + (("amax",) if value.get("format") == "nvfp4" else ()):
        if key in value and not hasattr(value[key], "shape"):
            raise TypeError(f"{where}[{key!r}] must be an array, got {type(value[key]).__name__}")
    spec = _Spec(name, value)
    if spec.nvfp4:
        _positive_finite(torch, f"{where}['amax']", spec.amax, allow_zero=True)
    return spec


def _check_fused_groups(torch, modules: Dict[str, Optional[_Spec]]) -> None:
    """Fused Linears of one parent (q/k/v, gate/up; module name -> spec, None when unquantized) are one
    GEMM in the engines: all quantized or none, and NVFP4 ones under one weight_scale_2 (a loader takes
    one per fused GEMM, so another one would decode the rest of it wrongly)."""
    for group in _FUSED:
        parents = {m.rsplit(".", 1)[0] for m in modules if m.rsplit(".", 1)[-1] in group}
        for parent in sorted(parents):
            members = [f"{parent}.{g}" for g in group if f"{parent}.{g}" in modules]
            quantized = [m for m in members if modules[m] is not None]
            if quantized and len(quantized) != len(members):
                raise ValueError(f"{', '.join(members)} are fused by the engines (one GEMM) but only "
                                 f"{', '.join(quantized)} {'is' if len(quantized) == 1 else 'are'} quantized")
            nvfp4 = [m for m in quantized if modules[m].nvfp4]
            scales = {m: (float(_to_torch(torch, modules[m].amax).reshape(())), modules[m].e4m3_max) for m in nvfp4}
            if len(set(scales.values())) > 1:
                raise ValueError(
                    f"{', '.join(nvfp4)} are fused by the engines (one weight_scale_2 per fused GEMM) but have "
                    f"different global scales (amax / (6 * e4m3_max): "
                    f"{', '.join(f'{m}: {a:g} / (6 * {e})' for m, (a, e) in scales.items())}): quantize them "
                    "together (mxfp8.nvfp4_quantize_fused) so that they share one")


def _umask() -> int:
    """The process's umask, the mode a checkpoint's folder and files get as os.makedirs and open would."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_empty(folders: List[Path]) -> None:
    """The folders save made for the target, innermost first, where they are still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def _may_replace(target: Path, overwrite: bool) -> bool:
    """Whether something is at `target` (which overwrite=True then replaces), or a FileExistsError where
    nothing may be replaced. Asked before anything is written and again right before the new checkpoint
    takes its place: what appeared at `target` during a save (another process's save or folder, a file) is
    not replaced unless it is a checkpoint and overwrite was asked. An empty folder (a tempfile.mkdtemp()) holds
    nothing to lose: the rename takes its place, and fails if something was put in it meanwhile."""
    if not (target.exists() or target.is_symlink()):
        return False
    if not target.is_symlink() and target.is_dir() and not any(target.iterdir()):
        return False
    if not overwrite:
        raise FileExistsError(f"{target} exists: pass overwrite=True to replace it (once the new one is complete)")
    if target.is_symlink() or not target.is_dir() or not (target / "config.json").is_file():
        raise FileExistsError(f"{target} is not a checkpoint directory (a folder with a config.json): overwrite "
                              "replaces only a checkpoint")
    return True


def _scratch_prefix(target: Path, kind: str) -> str:
    """A hidden sibling's name prefix: the target's name cut so that prefix + mkdtemp's suffix stays within
    a file system's 255-byte name (a legal 250-byte target name would otherwise fail)."""
    return f".{os.fsencode(target.name)[:128].decode(errors='ignore') or 'checkpoint'}.{kind}-"


def save(path: Union[str, os.PathLike], tensors: Mapping[str, Any], *, format: str,
         config: Optional[Mapping[str, Any]] = None, name_map: Union[None, Mapping[str, str], Callable[[str], str]] = None,
         scheme: Optional[str] = None, input_scales: Optional[Mapping[str, Any]] = None,
         ignore: Optional[List[str]] = None, max_shard_bytes: int = 5 * 10**9, overwrite: bool = False,
         progress: bool = False) -> Path:
    """Writes `tensors` as a Hugging Face checkpoint directory at `path` (see the module's docs) and returns
    its path.

    Args:
        tensors: caller's name -> a bucket spec (a quantized Linear's trainer storage) or an array
            (written as it is). Tensors that share memory (tied embeddings, views of one buffer) are each
            written as their own bytes.
        format: "compressed-tensors" (MXFP8) or "modelopt" (NVFP4).
        config: the model's Hugging Face config (a dict, e.g. ``model.config.to_dict()``); written as
            config.json with ``quantization_config`` set. None: config.json holds only that.
        name_map: a dict or a function from the caller's names to the checkpoint's; default: the same.
        scheme: compressed-tensors "MXFP8" (default) or "MXFP8A16"; modelopt "W4A16_NVFP4" (default) or
            "NVFP4" (needs input_scales).
        input_scales: caller's name of a quantized NVFP4 Linear -> its 0-d float32 input scale (W4A4).
        ignore: the modules listed as not quantized; default: the unquantized 2-D ``.weight`` modules.
        max_shard_bytes: the largest safetensors file (a larger tensor goes alone).
        overwrite: replace an existing directory at `path` (only once the new one is complete).
        progress: report progress on stderr.
    """
    torch = _torch()
    if format not in FORMATS:
        raise ValueError(f"format is {format!r}, expected one of {', '.join(map(repr, FORMATS))}")
    schemes = ("MXFP8", "MXFP8A16") if format == "compressed-tensors" else ("W4A16_NVFP4", "NVFP4")
    # input_scales given (even empty) asks for W4A4: each quantized Linear then needs its entry, said by name
    # below, where an empty dict was taken as none and its refusals named the wrong cause.
    if input_scales is not None and not isinstance(input_scales, Mapping):
        raise TypeError(f"input_scales must be a dict (a quantized Linear's name -> its input scale), got "
                        f"{type(input_scales).__name__}")
    if scheme is None:
        scheme = schemes[1] if format == "modelopt" and input_scales is not None else schemes[0]
    if scheme not in schemes:
        raise ValueError(f"scheme is {scheme!r}; format={format!r} writes {' or '.join(map(repr, schemes))}")
    if format == "compressed-tensors" and input_scales is not None:
        raise ValueError("input_scales: compressed-tensors' MXFP8 activations are dynamic, they have no input scale")
    if scheme == "NVFP4" and input_scales is None:
        raise ValueError("scheme='NVFP4' (W4A4) needs input_scales: the activations' 0-d float32 input_scale of "
                         "every quantized Linear, which trainer storage does not hold")
    if scheme == "W4A16_NVFP4" and input_scales is not None:
        raise ValueError("input_scales with scheme='W4A16_NVFP4': a weight-only checkpoint has no input scales")
    max_shard_bytes = _args.integer("max_shard_bytes", max_shard_bytes, 1)
    overwrite, progress = _args.flag("overwrite", overwrite), _args.flag("progress", progress)
    if not isinstance(tensors, Mapping) or not tensors:
        raise ValueError("tensors must be a non-empty dict: name -> a bucket spec or an array")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict (the model's Hugging Face config), got {type(config).__name__}")
    if config is not None and "quantization_config" in config:
        raise ValueError("config already has a quantization_config: save writes the format's own")
    rename = (lambda n: name_map.get(n, n)) if isinstance(name_map, Mapping) else (name_map or (lambda n: n))
    target = Path(path)
    _may_replace(target, overwrite)

    # Every name and shape first: nothing is written for a model that would be refused half-way.
    plan, seen, checked_input_scales = [], {}, {}
    for name, value in tensors.items():
        out = rename(name)
        if not isinstance(out, str) or not out:
            raise ValueError(f"name_map gives {out!r} for {name!r}: a checkpoint name is a non-empty str")
        quantized = isinstance(value, Mapping)
        if quantized and not out.endswith(".weight"):
            raise ValueError(f"{name!r} is a quantized Linear but its checkpoint name {out!r} does not end in "
                             "'.weight' (its scales are named after its module)")
        suffixes = (("weight", "weight_scale") + (("weight_scale_2",) if format == "modelopt" else ())
                    + (("input_scale",) if input_scales else ())) if quantized else ()
        names = [out[:-len("weight")] + s for s in suffixes] if quantized else [out]
        for n in names:
            if n == "__metadata__":  # safetensors' header key: the file is written, and no reader opens it
                raise ValueError(f"{name!r} would write the checkpoint tensor '__metadata__', the name safetensors "
                                 "keeps for its header's metadata")
            if n in seen:
                raise ValueError(f"{name!r} and {seen[n]!r} both write the checkpoint tensor {n!r}")
            seen[n] = name
        spec = _checked_spec(torch, name, value) if quantized else None
        if not quantized and not (hasattr(value, "__dlpack__") and hasattr(value, "shape")):
            raise TypeError(f"tensors[{name!r}] must be a bucket spec (dict) or an array (torch, NumPy, any DLPack "
                            f"producer with a shape), got {type(value).__name__}")
        if not quantized:  # torch's view of it now (no copy): one torch cannot take is refused before writing
            try:
                value = _torch_view(torch, value)
            except (RuntimeError, TypeError, ValueError, BufferError) as err:
                raise ValueError(f"tensors[{name!r}] cannot be written: torch cannot take it ({err})") from err
            _writable(torch, name, value)
        if input_scales is not None and quantized:
            if name not in input_scales:
                raise ValueError(f"input_scales has no entry for the quantized Linear {name!r}")
            checked_input_scales[name] = _positive_finite(torch, f"input_scales[{name!r}]", input_scales[name],
                                                          allow_zero=False).to(torch.float32).reshape(())
        plan.append((name, out, spec, value))
    for name, out, spec, _ in plan:  # the names load reads as a weight's scales are the quantized Linears' alone
        module, _, suffix = out.rpartition(".")
        if spec is None and suffix in ("weight_scale", "weight_scale_2") and f"{module}.weight" in seen:
            raise ValueError(f"{name!r} is written as {out!r}, next to the weight {module + '.weight'!r}: load reads "
                             f"a weight's {suffix} as its quantization scales, so this array would not come back "
                             "as it was given")
    unknown = [n for n in (input_scales or {}) if n not in tensors or not isinstance(tensors[n], Mapping)]
    if unknown:
        raise ValueError(f"input_scales names {unknown[0]!r}, which is not a quantized Linear of tensors")
    quantized_modules = {out[:-len(".weight")] for _, out, spec, _ in plan if spec is not None}
    _check_fused_groups(torch, {out[:-len(".weight")]: spec for _, out, spec, _ in plan if out.endswith(".weight")})
    if ignore is None:
        ignore = sorted(out[:-len(".weight")] for _, out, spec, value in plan
                        if spec is None and out.endswith(".weight") and len(value.shape) == 2
                        and out[:-len(".weight")] not in quantized_modules)
    elif not isinstance(ignore, (list, tuple)) or not all(isinstance(m, str) and m for m in ignore):
        raise TypeError(f"ignore must be a list of module names (str), got {ignore!r}")
    else:
        listed = [m for m in ignore if m in quantized_modules]
        if listed:
            raise ValueError(f"ignore lists {listed[0]!r}, a quantized Linear: a reader would take its FP8 weight "
                             "for an unquantized one")
        ignore = list(ignore)

    config_json = dict(config or {})
    config_json["quantization_config"] = _quantization_config(format, scheme, ignore)
    try:
        json.dumps(config_json, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"config cannot be written as JSON ({err})") from err

    created = [p for p in reversed(target.parents) if not p.exists()]  # removed again on a failure
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _remove_empty(created)
        raise OSError(err.errno, f"cannot make the folder of {target} ({err.strerror or err})", err.filename) \
            from err
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix=_scratch_prefix(target, "partial"), dir=target.parent))
        os.chmod(folder, 0o777 & ~_umask())  # mkdtemp's 0700 would be the checkpoint's, unreadable to other users
        started = time.monotonic()
        shards = _Shards(folder, max_shard_bytes)
        for done, (name, out, spec, value) in enumerate(plan, 1):
            if progress:
                elapsed = max(time.monotonic() - started, 1e-9)
                print(f"\r{target.name}: tensor {done}/{len(plan)}, {shards.written / 1e9:.2f} GB written, "
                      f"{shards.written / elapsed / 1e6:.0f} MB/s", end="", file=sys.stderr, flush=True)
            if spec is None:
                shards.add(out, _to_torch(torch, value).contiguous())
                continue
            parts = _components(torch, spec, f"tensors[{name!r}]", format)
            module = out[:-len("weight")]
            if input_scales:
                parts["input_scale"] = checked_input_scales[name]
            for suffix, tensor in parts.items():
                shards.add(module + suffix, tensor)
        shards.finish()
        _write_json(folder / "config.json", config_json)
        if format == "modelopt":
            _write_json(folder / "hf_quant_config.json", _hf_quant_config(scheme, ignore))
        if progress:
            print(f"\r{target.name}: {shards.total / 1e9:.2f} GB in {len(shards.files)} file(s), "
                  f"{shards.total / max(time.monotonic() - started, 1e-9) / 1e6:.0f} MB/s", file=sys.stderr)
        if _may_replace(target, overwrite):  # the old directory goes only once the new one is in its place
            old = Path(tempfile.mkdtemp(prefix=_scratch_prefix(target, "old"), dir=target.parent))
            try:
                os.replace(target, old / "x")
            except BaseException:
                shutil.rmtree(old, ignore_errors=True)
                raise
            try:
                os.replace(folder, target)
            except BaseException:
                os.replace(old / "x", target)  # the old checkpoint back where it was
                shutil.rmtree(old, ignore_errors=True)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(folder, target)
    except BaseException as err:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        _remove_empty(created)
        if isinstance(err, OSError) and not isinstance(err, FileExistsError):  # _may_replace's stays itself
            raise OSError(err.errno, f"writing the checkpoint {target} failed ({err.strerror or err}); nothing was "
                                     "left behind", err.filename) from err
        raise
    return target


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot be read as JSON ({err})") from err


def _format_of(folder: Path, config: Any) -> str:
    """The format of a checkpoint: compressed-tensors' mxfp8-quantized, or ModelOpt's NVFP4 (its
    quantization in config.json, or only in hf_quant_config.json as older exports have it)."""
    q = config.get("quantization_config") if isinstance(config, dict) else None
    if q is None and (folder / "hf_quant_config.json").is_file():
        hf = _read_json(folder / "hf_quant_config.json")
        quantization = hf.get("quantization") if isinstance(hf, dict) else None
        if not isinstance(quantization, dict):
            raise ValueError(f"{folder / 'hf_quant_config.json'}: its 'quantization' is {quantization!r}, not a dict")
        q = {"quant_method": "modelopt", **quantization}
    if not isinstance(q, dict):
        raise ValueError(f"{folder}: config.json has no quantization_config (and there is no hf_quant_config.json)")
    method = q.get("quant_method")
    if method == "compressed-tensors":
        if q.get("format") != "mxfp8-quantized":
            raise ValueError(f"{folder}: a compressed-tensors checkpoint of format {q.get('format')!r}; load reads "
                             "'mxfp8-quantized'")
        return "compressed-tensors"
    if method == "modelopt":
        if q.get("quant_algo") not in ("NVFP4", "W4A16_NVFP4"):
            raise ValueError(f"{folder}: a ModelOpt checkpoint of quant_algo {q.get('quant_algo')!r}; load reads "
                             "'NVFP4' and 'W4A16_NVFP4'")
        return "modelopt"
    raise ValueError(f"{folder}: quantization_config.quant_method is {method!r}, not one of "
                     f"{', '.join(map(repr, FORMATS))}")


def _loaded_linear(torch, where: str, fmt: str, weight: Any, scales: Any, global_scale: Any) -> Any:
    """A quantized Linear's parts read from a file, as load gives them, once their dtypes and shapes are the
    format's: a file that says otherwise (float32 scales, a scale shape of another K) would otherwise come
    back as components a reader decodes into wrong weights without a word."""
    def refuse(what: str) -> None:
        raise ValueError(f"{where}: {what}")

    if weight.dim() != 2:
        refuse(f"weight has shape {tuple(weight.shape)}: a quantized Linear's is 2-D")
    rows, cols = weight.shape
    if fmt == "compressed-tensors":
        if weight.dtype != torch.float8_e4m3fn or scales.dtype != torch.uint8:
            refuse(f"weight is {weight.dtype} and weight_scale {scales.dtype}: mxfp8-quantized stores "
                   "float8_e4m3fn values and uint8 E8M0 scales")
        if tuple(scales.shape) != (rows, _args.ceil_div(cols, 32)):
            refuse(f"weight_scale has shape {tuple(scales.shape)}: a weight of shape {(rows, cols)} has "
                   f"{(rows, _args.ceil_div(cols, 32))} (one scale per 32 values)")
        return Components(weight, scales)
    if weight.dtype != torch.uint8 or scales.dtype not in (torch.float8_e4m3fn, torch.uint8):
        refuse(f"weight is {weight.dtype} and weight_scale {scales.dtype}: NVFP4 stores uint8 packed values "
               "and float8_e4m3fn scales")
    if tuple(scales.shape) != (rows, _args.ceil_div(2 * cols, 16)):
        refuse(f"weight_scale has shape {tuple(scales.shape)}: a packed weight of shape {(rows, cols)} (K "
               f"{2 * cols}) has {(rows, _args.ceil_div(2 * cols, 16))} (one scale per 16 values)")
    if global_scale.dtype != torch.float32 or global_scale.numel() != 1:
        refuse(f"weight_scale_2 is {global_scale.dtype} of shape {tuple(global_scale.shape)}: NVFP4's is one "
               "float32")
    g = float(global_scale.reshape(()))
    if not (g >= 0 and g != float("inf")):  # save writes amax / (6 * E4M3_MAX) of a finite, non-negative amax
        refuse(f"weight_scale_2 is {g}: a decoder multiplies every value by it; it must be finite and non-negative")
    return _nvfp4.Components(weight, scales.view(torch.uint8), global_scale.reshape(1))


def load(path: Union[str, os.PathLike]) -> Loaded:
    """Reads a directory `save` wrote (or another compressed-tensors mxfp8-quantized or ModelOpt NVFP4
    checkpoint): its config and its tensors, each quantized Linear's parts gathered under its ``X.weight``
    name as the components export_components gives (MXFP8: Components(values float8_e4m3fn, scales uint8);
    NVFP4: nvfp4.Components(values uint8, scales uint8, global_scale float32 (1,))); anything else,
    ``X.input_scale`` included, as stored. Reads everything into host memory."""
    torch = _torch()
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(path)
    config = _read_json(folder / "config.json")
    fmt = _format_of(folder, config)
    if (folder / _INDEX).is_file():
        index = _read_json(folder / _INDEX)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{folder / _INDEX}: no weight_map")
        outside = [n for n in weight_map.values() if not isinstance(n, str) or Path(n).name != n or n == ".."]
        if outside:
            raise ValueError(f"{folder / _INDEX}: weight_map names {outside[0]!r}, not a file of the checkpoint")
        files = [folder / n for n in sorted(set(weight_map.values()))]
    else:
        files = [folder / _SINGLE]
    raw: Dict[str, Any] = {}
    held: Dict[str, str] = {}  # tensor -> the file it came from: one held twice would be the last file's
    for f in files:
        try:
            tensors = load_file(str(f))
        except (SafetensorError, OSError) as err:  # a truncated or foreign file: said of the file
            raise ValueError(f"{f}: cannot be read as safetensors ({err})") from err
        for name, tensor in tensors.items():
            if name in raw:
                raise ValueError(f"{folder}: {name!r} is in both {held[name]} and {f.name}")
            raw[name], held[name] = tensor, f.name
    if (folder / _INDEX).is_file():
        missing = [n for n in weight_map if n not in raw]
        if missing:
            raise ValueError(f"{folder / _INDEX}: {missing[0]!r} is in the weight_map but in none of its files")
    out: Dict[str, Any] = {}
    for name, tensor in raw.items():
        module, _, suffix = name.rpartition(".")
        if suffix == "weight_scale_2" and fmt == "compressed-tensors" and f"{module}.weight" in raw:
            raise ValueError(f"{folder}: {module} has a weight_scale_2, which mxfp8-quantized does not have (NVFP4's "
                             "second-level scale): the file is not what its config says")
        if suffix in ("weight_scale", "weight_scale_2") and f"{module}.weight" in raw:
            continue
        if suffix == "weight":
            scale, global_scale = raw.get(f"{module}.weight_scale"), raw.get(f"{module}.weight_scale_2")
            if fmt == "modelopt" and (scale is None) != (global_scale is None):
                has, lacks = ("weight_scale", "weight_scale_2") if global_scale is None else ("weight_scale_2", "weight_scale")
                raise ValueError(f"{folder}: {module} has a {has} but no {lacks} (NVFP4 needs both)")
            if scale is not None:
                out[name] = _loaded_linear(torch, f"{folder}: {module}", fmt, tensor, scale, global_scale)
                continue
            if fmt == "compressed-tensors" and tensor.dtype == torch.float8_e4m3fn:
                raise ValueError(f"{folder}: {module}.weight is float8_e4m3fn with no weight_scale: an "
                                 "mxfp8-quantized weight's values cannot be decoded without their scales")
        out[name] = tensor
    return Loaded(fmt, config, out)
