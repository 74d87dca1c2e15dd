"""Writes a small synthetic Llama-like model in each checkpoint format and verifies it with the formats'
own readers.

The model's Linears are quantized by the library into Transformer Engine's storage (MXFP8: FP8 values and
swizzled E8M0 scales; NVFP4: packed values, swizzled E4M3 scales and the amax, q/k/v and gate/up
sharing one), its embeddings, norms and lm_head stay bfloat16. mxfp8.checkpoint.save writes
OUT/mxfp8-compressed-tensors and OUT/nvfp4-modelopt. Each is then read back: by compressed-tensors' model-free
dequantizer (CompressedTensorsDequantizer) or ModelOpt's NVFP4QTensor where those packages import, compared
bit for bit with the library's own dequantize of the trainer storage (for NVFP4 the block decode and
weight_scale_2 separately, since the two round value x scale x weight_scale_2 in different orders); and
always by mxfp8.checkpoint.load, compared with export_components. The save's speed is shown against a
plain safetensors save_file of the same bytes.
"""
from __future__ import annotations

import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Tuple

LAYERS, HIDDEN, INTERMEDIATE, VOCAB, KV = 2, 256, 512, 512, 64


def llama_config(layers: int = LAYERS) -> Dict[str, Any]:
    """The Hugging Face config of the demo model (a tiny Llama: 4 heads of 64, 1 KV head)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE, "num_hidden_layers": layers, "num_attention_heads": HIDDEN // 64,
            "num_key_value_heads": KV // 64, "head_dim": 64, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
            "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def model_weights(torch, layers: int = LAYERS, seed: int = 0) -> Dict[str, Any]:
    """name -> bfloat16 weight of the demo model, random with a spread of block magnitudes."""
    g = torch.Generator().manual_seed(seed)
    shapes = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,),
              "lm_head.weight": (VOCAB, HIDDEN)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (HIDDEN, HIDDEN), p + "self_attn.k_proj.weight": (KV, HIDDEN),
                       p + "self_attn.v_proj.weight": (KV, HIDDEN), p + "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
                       p + "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN), p + "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
                       p + "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE), p + "input_layernorm.weight": (HIDDEN,),
                       p + "post_attention_layernorm.weight": (HIDDEN,)})
    out = {}
    for name, shape in shapes.items():
        w = torch.randn(shape, generator=g) * 0.02
        if len(shape) == 2:  # blocks of different magnitudes: the scales differ
            w = w * torch.exp2(torch.randint(-4, 4, (shape[0], 1), generator=g).float())
        out[name] = w.to(torch.bfloat16)
    return out


def is_linear(name: str) -> bool:
    return name.endswith("_proj.weight")


def trainer_storage(torch, weights: Dict[str, Any], fmt: str) -> Dict[str, Any]:
    """name -> bucket spec of TE storage for each Linear (MXFP8, or NVFP4 with fused q/k/v and gate/up
    quantized under one amax), the rest as it is."""
    import mxfp8

    out: Dict[str, Any] = {n: w for n, w in weights.items() if not is_linear(n)}
    linears = [n for n in weights if is_linear(n)]
    if fmt == "mxfp8":
        for n in linears:
            q = mxfp8.quantize(weights[n], scales="swizzled")
            out[n] = {"data": q.rowwise_data, "scale_inv": q.rowwise_scale_inv, "swizzled": True}
        return out
    groups, done = [], set()
    for n in linears:
        parent, leaf = n.rsplit(".", 2)[0], n.rsplit(".", 2)[1]
        fused = ([f"{parent}.{x}.weight" for x in ("q_proj", "k_proj", "v_proj")] if leaf in ("q_proj", "k_proj", "v_proj")
                 else [f"{parent}.{x}.weight" for x in ("gate_proj", "up_proj")] if leaf in ("gate_proj", "up_proj")
                 else [n])
        if n not in done:
            groups.append(fused)
            done.update(fused)
    for group in groups:
        for n, q in zip(group, mxfp8.nvfp4_quantize_fused([weights[n] for n in group], scales="swizzled")):
            out[n] = {"format": "nvfp4", "data": q.values, "scale_inv": q.scales, "amax": q.amax, "swizzled": True,
                      "shape": tuple(weights[n].shape)}
    return out


def reference(torch, spec: Dict[str, Any]) -> Any:
    """The library's float32 dequantize of one Linear's trainer storage. NVFP4: its block decode alone
    (E2M1 value x E4M3 block scale, exact in float32), the amax set to 6 * E4M3_MAX so that the global scale
    is 1, because ModelOpt and the library round value x scale x weight_scale_2 in different orders; the
    weight_scale_2 itself is checked separately (global_scale)."""
    import mxfp8

    if spec.get("format") == "nvfp4":
        unit = torch.full_like(spec["amax"], 6 * spec.get("e4m3_max", 448))
        return torch.from_dlpack(mxfp8.nvfp4.dequantize(spec["data"], spec["scale_inv"], unit, shape=spec["shape"],
                                                        swizzled=True))
    return torch.from_dlpack(mxfp8.dequantize(spec["data"], spec["scale_inv"], swizzled=True))


def global_scale(torch, spec: Dict[str, Any]) -> Any:
    """weight_scale_2 of NVFP4 trainer storage: amax / (6 * E4M3_MAX), one float32 division."""
    return spec["amax"].reshape(()).float() / torch.tensor(6.0 * spec.get("e4m3_max", 448), dtype=torch.float32)


def read_with_compressed_tensors(torch, folder: Path) -> Dict[str, Any]:
    """Every tensor of the checkpoint through compressed-tensors' own model-free dequantizer (float32)."""
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer
    from safetensors.torch import load_file

    tensors = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return CompressedTensorsDequantizer(str(folder), dtype=torch.float32).validate(tensors)


def read_with_modelopt(torch, folder: Path) -> Dict[str, Any]:
    """Every quantized Linear of the checkpoint through ModelOpt's NVFP4QTensor (float32), as (its block
    decode with weight_scale_2 = 1, the weight_scale_2 read): see reference()."""
    from modelopt.torch.quantization.qtensor import NVFP4QTensor
    from safetensors.torch import load_file

    tensors = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    out = {}
    for name, w in tensors.items():
        module = name[:-len(".weight")]
        if name.endswith(".weight") and f"{module}.weight_scale_2" in tensors:
            n, half = w.shape
            decoded = NVFP4QTensor(torch.Size([n, 2 * half]), torch.bfloat16, w).dequantize(
                dtype=torch.float32, scale=tensors[f"{module}.weight_scale"],
                double_scale=torch.ones((), dtype=torch.float32), block_sizes={-1: 16})
            out[name] = (decoded, tensors[f"{module}.weight_scale_2"])
    return out


def _reader(fmt: str):
    """The producer's reader of `fmt`, or why it is not there."""
    module = "compressed_tensors" if fmt == "mxfp8" else "modelopt.torch.quantization.qtensor"
    try:
        importlib.import_module(module)
        if fmt == "mxfp8":
            return read_with_compressed_tensors, "compressed-tensors' CompressedTensorsDequantizer"
        return read_with_modelopt, "ModelOpt's NVFP4QTensor"
    except Exception as err:  # not installed, or not importable on this machine
        return None, f"{'compressed-tensors' if fmt == 'mxfp8' else 'nvidia-modelopt'} not importable ({err})"


def run(out: str, layers: int = LAYERS) -> int:
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError as err:
        print(f"python -m mxfp8 checkpoint needs torch and safetensors: {err}", file=sys.stderr)
        return 1
    import mxfp8.checkpoint as ckpt

    weights = model_weights(torch, layers)
    failures = 0
    for fmt, format_name in (("mxfp8", "compressed-tensors"), ("nvfp4", "modelopt")):
        storage = trainer_storage(torch, weights, fmt)
        folder = Path(out) / f"{fmt}-{format_name}"
        start = time.perf_counter()
        ckpt.save(folder, storage, format=format_name, config=llama_config(layers), overwrite=True)
        ours = time.perf_counter() - start
        size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
        with tempfile.TemporaryDirectory(dir=out) as scratch:  # the same bytes, saved plainly
            loaded = ckpt.load(folder)
            plain = {k: v for k, v in _flat(loaded.tensors).items()}
            start = time.perf_counter()
            save_file(plain, str(Path(scratch) / "plain.safetensors"))
            baseline = time.perf_counter() - start
        print(f"{folder}: {len(storage)} tensors ({sum(isinstance(v, dict) for v in storage.values())} quantized "
              f"{fmt.upper()}), {size / 1e6:.1f} MB in {ours * 1e3:.0f} ms ({size / ours / 1e6:.0f} MB/s; a plain "
              f"safetensors save_file of the same bytes {size / baseline / 1e6:.0f} MB/s)")
        # 1. the library's own reader: the components export_components gives
        for name, spec in storage.items():
            got = loaded.tensors[name]
            if isinstance(spec, dict):
                want = _export(torch, spec)
                same = all(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
                           for a, b in zip(got, want))
            else:
                same = torch.equal(got, spec)
            if not same:
                print(f"  mxfp8.checkpoint.load: {name} differs", file=sys.stderr)
                failures += 1
        # 2. the producer's reader, against the library's dequantize of the trainer storage
        reader, what = _reader(fmt)
        if reader is None:
            print(f"  skipped the producer's check: {what}")
        else:
            read = reader(torch, folder)
            bad = [n for n, spec in storage.items() if isinstance(spec, dict) and not matches(torch, read[n], spec)]
            failures += len(bad)
            print(f"  {what}: {'every quantized weight bit-exact with mxfp8 dequantize' if not bad else bad}")
    print("checkpoint demo OK" if not failures else f"checkpoint demo FAILED: {failures} tensors differ")
    return 0 if not failures else 1


def matches(torch, read: Any, spec: Dict[str, Any]) -> bool:
    """What a producer's reader decoded equals the library's decode of the trainer storage, bit for bit."""
    if spec.get("format") == "nvfp4":
        decoded, scale_2 = read
        return (torch.equal(decoded, reference(torch, spec)) and
                torch.equal(scale_2.reshape(()).view(torch.int32), global_scale(torch, spec).view(torch.int32)))
    return torch.equal(read.float(), reference(torch, spec))


def _export(torch, spec: Dict[str, Any]) -> Tuple[Any, ...]:
    import mxfp8

    if spec.get("format") == "nvfp4":
        c = mxfp8.nvfp4.export_components(spec["data"], spec["scale_inv"], spec["amax"], shape=spec["shape"],
                                          swizzled=True)
        return tuple(torch.from_dlpack(x) for x in c)
    c = mxfp8.export_components(spec["data"], spec["scale_inv"], swizzled=True)
    return tuple(torch.from_dlpack(x) for x in c)


def _flat(tensors: Dict[str, Any]) -> Dict[str, Any]:
    """load's tensors as plain name -> tensor (each component under its own name)."""
    out = {}
    for name, value in tensors.items():
        if isinstance(value, tuple):
            for i, part in enumerate(value):
                out[f"{name}.{i}"] = part.contiguous()
        else:
            out[name] = value
    return out
