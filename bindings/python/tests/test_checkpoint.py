"""mxfp8.checkpoint: trainer storage written as the checkpoints engines load, verified by the formats' own
readers (compressed-tensors' dequantizer and Hugging Face transformers' loader for MXFP8, ModelOpt's
NVFP4QTensor for NVFP4) against the library's dequantize of the same storage, bit for bit; the files and
configs as the producers write them; a round trip through load; and every refusal leaving nothing behind.
The readers' cases skip where their packages are not installed (scripts/install_deps.sh installs them)."""
import errno
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import mxfp8  # noqa: E402
import mxfp8.checkpoint as ckpt  # noqa: E402
from mxfp8 import _checkpoint_demo as demo  # noqa: E402

FORMATS = {"mxfp8": "compressed-tensors", "nvfp4": "modelopt"}


@pytest.fixture(scope="module")
def weights():
    return demo.model_weights(torch, layers=1, seed=3)


def storage(weights, fmt):
    return demo.trainer_storage(torch, weights, fmt)


def save(tmp_path, weights, fmt, **kw):
    return ckpt.save(tmp_path / "model", storage(weights, fmt), format=FORMATS[fmt], config=demo.llama_config(1), **kw)


def nothing_left(parent):
    return [p.name for p in parent.iterdir() if p.name.startswith(".model")] == []


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_the_checkpoint_has_the_modes_of_the_callers_umask(tmp_path, weights, mask):
    # A serving engine often runs as another user: the folder and its files get what os.makedirs and open
    # give under the caller's umask (mkdtemp's 0700 and safetensors' 0600 kept them from it), overwritten too.
    old = os.umask(mask)
    try:
        for _ in range(2):  # written, then overwritten
            folder = ckpt.save(tmp_path / "model", storage(weights, "mxfp8"), format="compressed-tensors",
                               config=demo.llama_config(1), overwrite=True)
            assert os.stat(folder).st_mode & 0o777 == 0o777 & ~mask
            files = list(folder.iterdir())
            assert files and all(os.stat(f).st_mode & 0o777 == 0o666 & ~mask for f in files), \
                {f.name: oct(os.stat(f).st_mode & 0o777) for f in files}
    finally:
        os.umask(old)


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_the_producers_reader_decodes_what_the_trainer_stored(tmp_path, weights, fmt):
    reader, why = demo._reader(fmt)
    if reader is None:
        pytest.skip(why)
    st = storage(weights, fmt)
    folder = ckpt.save(tmp_path / "model", st, format=FORMATS[fmt], config=demo.llama_config(1))
    read = reader(torch, folder)
    quantized = [n for n, spec in st.items() if isinstance(spec, dict)]
    assert len(quantized) == 7 and all(demo.matches(torch, read[n], st[n]) for n in quantized)
    # The check can fail: one byte of one weight flipped in the file is seen by the reader.
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors[quantized[2]].view(torch.uint8)[0, 0] ^= 0x11
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    read = reader(torch, folder)
    assert [n for n in quantized if not demo.matches(torch, read[n], st[n])] == [quantized[2]]


def test_transformers_loads_the_mxfp8_checkpoint_as_compressed_tensors(tmp_path, weights):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("compressed_tensors")
    st = storage(weights, "mxfp8")
    folder = ckpt.save(tmp_path / "model", st, format="compressed-tensors", config=demo.llama_config(1))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16)
    params = dict(model.named_parameters())
    for name, spec in st.items():
        if isinstance(spec, dict):  # held compressed: the FP8 bytes and E8M0 scales as written
            values, scales = demo._export(torch, spec)
            module = name[:-len(".weight")]
            assert torch.equal(params[name].view(torch.uint8), values.view(torch.uint8)), name
            assert torch.equal(params[module + ".weight_scale"].view(torch.uint8), scales), name
        else:
            assert torch.equal(params[name], spec), name


def test_files_and_configs_are_the_producers(tmp_path, weights):
    folder = save(tmp_path, weights, "mxfp8")
    config = json.loads((folder / "config.json").read_text())
    assert config["hidden_size"] == demo.HIDDEN  # the caller's config, kept
    q = config["quantization_config"]
    weights_args = {"dynamic": False, "group_size": 32, "num_bits": 8, "scale_dtype": "torch.uint8",
                    "strategy": "group", "symmetric": True, "type": "float"}
    assert q == {"config_groups": {"group_0": {"format": "mxfp8-quantized",
                                               "input_activations": dict(weights_args, dynamic=True),
                                               "output_activations": None, "targets": ["Linear"],
                                               "weights": weights_args}},
                 "format": "mxfp8-quantized", "global_compression_ratio": None,
                 "ignore": ["lm_head", "model.embed_tokens"], "kv_cache_scheme": None, "moe_sparsity_config": None,
                 "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
                 "transform_config": {}, "version": "0.20.1"}
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt"}
        w = f.get_tensor("model.layers.0.mlp.down_proj.weight")
        s = f.get_tensor("model.layers.0.mlp.down_proj.weight_scale")
    assert (w.dtype, tuple(w.shape), s.dtype, tuple(s.shape)) == (torch.float8_e4m3fn, (256, 512), torch.uint8,
                                                                  (256, 16))

    folder = ckpt.save(tmp_path / "nv", storage(weights, "nvfp4"), format="modelopt", config=demo.llama_config(1))
    hf = json.loads((folder / "hf_quant_config.json").read_text())
    assert hf == {"producer": {"name": "modelopt", "version": "0.47.0"},
                  "quantization": {"quant_algo": "W4A16_NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                   "exclude_modules": ["lm_head", "model.embed_tokens"]}}
    q = json.loads((folder / "config.json").read_text())["quantization_config"]
    assert q == {"config_groups": {"group_0": {"weights": {"dynamic": False, "num_bits": 4, "type": "float",
                                                           "group_size": 16}, "targets": ["Linear"]}},
                 "ignore": ["lm_head", "model.embed_tokens"], "quant_algo": "W4A16_NVFP4",
                 "producer": {"name": "modelopt", "version": "0.47.0"}, "quant_method": "modelopt"}
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        parts = {k: f.get_tensor("model.layers.0.mlp.down_proj." + k) for k in ("weight", "weight_scale", "weight_scale_2")}
        assert "model.layers.0.mlp.down_proj.input_scale" not in f.keys()
    assert [(t.dtype, tuple(t.shape)) for t in parts.values()] == [(torch.uint8, (256, 256)),
                                                                  (torch.float8_e4m3fn, (256, 32)), (torch.float32, ())]


def test_w4a4_takes_the_callers_input_scales(tmp_path, weights):
    st = storage(weights, "nvfp4")
    scales = {n: torch.tensor(0.5 + i, dtype=torch.float32) for i, n in enumerate(st) if isinstance(st[n], dict)}
    folder = ckpt.save(tmp_path / "model", st, format="modelopt", input_scales=scales)
    assert json.loads((folder / "hf_quant_config.json").read_text())["quantization"]["quant_algo"] == "NVFP4"
    group = json.loads((folder / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"]
    assert group["input_activations"] == {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "model.safetensors"))
    assert all(torch.equal(tensors[n[:-len("weight")] + "input_scale"], s) for n, s in scales.items())
    loaded = ckpt.load(folder).tensors  # the input scales come back too
    assert all(torch.equal(loaded[n[:-len("weight")] + "input_scale"], s) for n, s in scales.items())
    bad = dict(scales, **{next(iter(scales)): torch.tensor(float("nan"))})
    with pytest.raises(ValueError, match="must be finite and positive"):
        ckpt.save(tmp_path / "bad", st, format="modelopt", input_scales=bad)
    # NumPy's float32 numbers are numbers ("must be a float32 array of one element, got float32" before).
    import numpy as np

    as_numpy = {n: np.float32(s.item()) for n, s in scales.items()}
    folder = ckpt.save(tmp_path / "numpy", st, format="modelopt", input_scales=as_numpy)
    loaded = ckpt.load(folder).tensors
    assert all(torch.equal(loaded[n[:-len("weight")] + "input_scale"], s) for n, s in scales.items())


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_load_gives_back_the_exported_components_through_shards(tmp_path, weights, fmt):
    st = storage(weights, fmt)
    names = {n: n.replace("model.", "backbone.", 1) for n in st}  # a name map
    folder = ckpt.save(tmp_path / "model", st, format=FORMATS[fmt], name_map=names, max_shard_bytes=200_000)
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    assert len(files) > 3 and files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(files)
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size() for t in ckpt.load(folder).tensors.values() if not isinstance(t, tuple)) + sum(
        sum(p.numel() * p.element_size() for p in t) for t in ckpt.load(folder).tensors.values() if isinstance(t, tuple))
    loaded = ckpt.load(folder)
    assert loaded.format == FORMATS[fmt] and set(loaded.tensors) == set(names.values())
    config = json.loads((folder / "config.json").read_text())  # another scheme of the same producer is refused
    q = config["quantization_config"]
    q["format" if fmt == "mxfp8" else "quant_algo"] = "float-quantized" if fmt == "mxfp8" else "FP8"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="load reads"):
        ckpt.load(folder)
    for name, spec in st.items():
        got = loaded.tensors[names[name]]
        if isinstance(spec, dict):
            for a, b in zip(got, demo._export(torch, spec)):
                assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)), name
        else:
            assert torch.equal(got, spec)


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_tensors_that_share_memory_are_each_written(tmp_path, weights, fmt):
    # A tied embedding (lm_head.weight the embedding itself) and tensors that are views of one buffer made
    # safetensors refuse the file ("Some tensors share memory"): each is written as its own bytes.
    st = storage(weights, fmt)
    embedding = torch.randn(300, 64)
    flat = torch.randn(2, 40, 64)
    st.update({"model.embed_tokens.weight": embedding, "lm_head.weight": embedding,
               "extra.a": flat[0], "extra.b": flat[1], "extra.tail": flat[1, 1:]})
    loaded = ckpt.load(ckpt.save(tmp_path / "model", st, format=FORMATS[fmt]))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        assert torch.equal(loaded.tensors[name], embedding)
    assert torch.equal(loaded.tensors["extra.a"], flat[0]) and torch.equal(loaded.tensors["extra.b"], flat[1])
    assert torch.equal(loaded.tensors["extra.tail"], flat[1, 1:])
    for name, spec in st.items():  # the quantized Linears as before
        if isinstance(spec, dict):
            for a, b in zip(loaded.tensors[name], demo._export(torch, spec)):
                assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)), name


def test_refusals_name_the_tensor_and_leave_nothing_behind(tmp_path, weights):
    import numpy as np

    st = storage(weights, "mxfp8")
    cases = [
        (dict(tensors=st, format="compressed-tensors",
              name_map={"model.layers.0.self_attn.k_proj.weight": "model.layers.0.self_attn.q_proj.weight"}),
         ValueError, "both write the checkpoint tensor 'model.layers.0.self_attn.q_proj.weight'"),
        (dict(tensors=storage(weights, "nvfp4"), format="compressed-tensors"), ValueError, "is NVFP4"),
        (dict(tensors=st, format="modelopt"), ValueError, "is MXFP8"),
        (dict(tensors=st, format="safetensors"), ValueError, "format is 'safetensors'"),
        (dict(tensors=st, format="modelopt", scheme="NVFP4"), ValueError, "needs input_scales"),
        # "" was the default scheme; an empty input_scales was none, and refused as a missing entry
        (dict(tensors=st, format="compressed-tensors", scheme=""), ValueError, "scheme is ''"),
        (dict(tensors=st, format="compressed-tensors", input_scales={}), ValueError, "activations are dynamic"),
        (dict(tensors=storage(weights, "nvfp4"), format="modelopt", input_scales={}), ValueError,
         "input_scales has no entry for the quantized Linear"),
        (dict(tensors=storage(weights, "nvfp4"), format="modelopt", scheme="W4A16_NVFP4", input_scales={}),
         ValueError, "a weight-only checkpoint has no input scales"),
        (dict(tensors=st, format="modelopt", input_scales=[1.0]), TypeError, "input_scales must be a dict"),
        (dict(tensors=st, format="compressed-tensors", name_map=lambda n: n.replace(".weight", ".w")), ValueError,
         "does not end in '.weight'"),
    ]
    q = mxfp8.quantize(torch.randn(64, 48), scales="swizzled")  # K = 48: no whole group of 32
    cases.append((dict(tensors={"m.weight": {"data": q.rowwise_data, "scale_inv": q.rowwise_scale_inv,
                                             "swizzled": True}}, format="compressed-tensors"),
                  ValueError, "K a multiple of 32"))
    nv = storage(weights, "nvfp4")
    k = "model.layers.0.self_attn.k_proj.weight"
    nv[k] = dict(nv[k], amax=nv[k]["amax"] * 2)  # no longer the fused group's amax
    cases.append((dict(tensors=nv, format="modelopt"), ValueError, "fused by the engines .* different global scales"))
    spec = st["model.layers.0.mlp.down_proj.weight"]
    bad_specs = [  # (the spec, the error, its message)
        ({k: v for k, v in spec.items() if k != "swizzled"}, ValueError, "has no 'swizzled'"),
        (dict(spec, rows=(0, 32)), ValueError, "a checkpoint holds whole tensors"),
        (dict(spec, data=3), TypeError, r"\['data'\] must be an array"),
    ]
    for bad, error, match in bad_specs:
        cases.append((dict(tensors=dict(st, **{"model.layers.0.mlp.down_proj.weight": bad}),
                           format="compressed-tensors"), error, match))
    partial = dict(st, **{k: weights[k]})  # k_proj unquantized, q and v quantized
    cases.append((dict(tensors=partial, format="compressed-tensors"), ValueError, "only .* are quantized"))
    for amax in (float("nan"), -1.0, float("inf")):
        nv2 = storage(weights, "nvfp4")
        o = "model.layers.0.self_attn.o_proj.weight"
        nv2[o] = dict(nv2[o], amax=torch.tensor([amax]))
        cases.append((dict(tensors=nv2, format="modelopt"), ValueError, "must be finite and non-negative"))
    cases += [
        (dict(tensors=dict(st, junk=3), format="compressed-tensors"), TypeError, r"tensors\['junk'\] must be"),
        (dict(tensors=st, format="compressed-tensors", ignore="lm_head"), TypeError, "ignore must be a list"),
        (dict(tensors=st, format="compressed-tensors", ignore=["model.layers.0.self_attn.q_proj"]), ValueError,
         "a quantized Linear"),
        (dict(tensors=st, format="compressed-tensors", config=[1]), TypeError, "config must be a dict"),
        (dict(tensors=st, format="compressed-tensors", config={"x": float("nan")}), ValueError, "as JSON"),
        (dict(tensors=st, format="compressed-tensors", overwrite="no"), TypeError, "overwrite"),
        # a RuntimeError of torch's, half-way through the writing
        (dict(tensors=dict(st, reversed=np.arange(4.0)[::-1]), format="compressed-tensors"), ValueError,
         r"tensors\['reversed'\] cannot be written: torch cannot take it"),
        # refused by safetensors half-way through the writing (a KeyError, a NotImplementedError)
        (dict(tensors=dict(st, c=torch.ones(2, dtype=torch.complex128)), format="compressed-tensors"), ValueError,
         r"tensors\['c'\] is torch.complex128, which safetensors cannot store"),
        (dict(tensors=dict(st, m=torch.ones(2, device="meta")), format="compressed-tensors"), ValueError,
         r"tensors\['m'\] is a meta tensor"),
        # written, and then unreadable: safetensors' header has its own "__metadata__" key
        (dict(tensors=dict(st, __metadata__=torch.ones(2)), format="compressed-tensors"), ValueError,
         "'__metadata__' would write the checkpoint tensor '__metadata__'"),
        # plain arrays under the names load reads as a weight's scales: saved, then refused by load, read
        # back as a quantized Linear or dropped
        (dict(tensors={"a.weight": torch.randn(4, 64), "a.weight_scale": torch.randn(4, 2)},
              format="compressed-tensors"), ValueError, "'a.weight_scale', next to the weight 'a.weight'"),
        (dict(tensors={"a.weight": torch.zeros(4, 64, dtype=torch.float8_e4m3fn),
                       "a.weight_scale": torch.zeros(4, 2, dtype=torch.uint8)}, format="compressed-tensors"),
         ValueError, "next to the weight 'a.weight'"),
        (dict(tensors=dict(st, **{"model.layers.0.mlp.down_proj.weight_scale_2": torch.ones(())}),
              format="compressed-tensors"), ValueError, "'model.layers.0.mlp.down_proj.weight_scale_2', next to"),
    ]
    for kw, error, match in cases:
        with pytest.raises(error, match=match):
            ckpt.save(tmp_path / "model", **kw)
        assert not (tmp_path / "model").exists() and nothing_left(tmp_path), match


def _hand_written(folder, tensors, fmt, files=None):
    """A checkpoint folder written with safetensors alone (not save): `tensors` in model.safetensors, or
    `files` (file name -> tensors) under an index whose weight_map is given as files["index"]."""
    from safetensors.torch import save_file

    folder.mkdir()
    q = ({"quant_method": "compressed-tensors", "format": "mxfp8-quantized"} if fmt == "compressed-tensors"
         else {"quant_method": "modelopt", "quant_algo": "NVFP4"})
    (folder / "config.json").write_text(json.dumps({"quantization_config": q}))
    if files is None:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    for name, held in files.items():
        if name != "index":
            save_file(held, str(folder / name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": files["index"]}))
    return folder


def test_load_refuses_files_that_lie_about_a_linear(tmp_path):
    u8, e4m3, f32 = torch.uint8, torch.float8_e4m3fn, torch.float32
    mx = {"m.weight": torch.zeros(4, 64, dtype=e4m3), "m.weight_scale": torch.zeros(4, 2, dtype=u8)}
    nv = {"m.weight": torch.zeros(4, 32, dtype=u8), "m.weight_scale": torch.zeros(4, 4, dtype=e4m3),
          "m.weight_scale_2": torch.ones((), dtype=f32)}
    for i, (fmt, tensors) in enumerate([("compressed-tensors", mx), ("modelopt", nv)]):  # the good ones load
        loaded = ckpt.load(_hand_written(tmp_path / f"good{i}", tensors, fmt)).tensors["m.weight"]
        assert torch.equal(loaded[0], tensors["m.weight"])
    cases = [  # each came back as components (or a RuntimeError of a reshape) before
        ("compressed-tensors", dict(mx, **{"m.weight": torch.zeros(4, 64)}), "weight is torch.float32"),
        ("compressed-tensors", dict(mx, **{"m.weight_scale": torch.zeros(4, 2)}), "weight_scale torch.float32"),
        ("compressed-tensors", dict(mx, **{"m.weight_scale": torch.zeros(4, 3, dtype=u8)}),
         r"weight_scale has shape \(4, 3\): a weight of shape \(4, 64\) has \(4, 2\)"),
        ("compressed-tensors", dict(mx, **{"m.weight": torch.zeros(2, 4, 64, dtype=e4m3)}), "is 2-D"),
        # float32 scales viewed as bytes were four times as many scales as the weight has
        ("modelopt", dict(nv, **{"m.weight_scale": torch.zeros(4, 1)}), "weight_scale torch.float32"),
        ("modelopt", dict(nv, **{"m.weight_scale": torch.zeros(4, 2, dtype=e4m3)}), r"has \(4, 4\)"),
        ("modelopt", dict(nv, **{"m.weight_scale_2": torch.ones(3)}), "weight_scale_2 is torch.float32 of shape"),
        ("modelopt", dict(nv, **{"m.weight_scale_2": torch.ones((), dtype=torch.float16)}), "NVFP4's is one float32"),
        # a decoder multiplies by the global scale: save never writes one of these
        *[("modelopt", dict(nv, **{"m.weight_scale_2": torch.tensor(g)}), "must be finite and non-negative")
          for g in (float("nan"), -1.0, float("inf"))],
        # a weight without its scales came back as a bare weight, its weight_scale_2 dropped
        ("modelopt", {k: v for k, v in nv.items() if k != "m.weight_scale"}, "weight_scale_2 but no weight_scale"),
        ("modelopt", {k: v for k, v in nv.items() if k != "m.weight_scale_2"}, "a weight_scale but no weight_scale_2"),
        ("compressed-tensors", {"m.weight": mx["m.weight"]}, "float8_e4m3fn with no weight_scale"),
        # NVFP4's second-level scale in an MXFP8 file was dropped without a word
        ("compressed-tensors", dict(mx, **{"m.weight_scale_2": torch.ones(())}), "does not have"),
    ]
    for i, (fmt, tensors, match) in enumerate(cases):
        with pytest.raises(ValueError, match=match):
            ckpt.load(_hand_written(tmp_path / f"bad{i}", tensors, fmt))


def test_load_refuses_hostile_files_and_indexes(tmp_path):
    one = {"a": torch.ones(2)}
    cases = {  # folder -> the message; each raised a TypeError of Python's or a foreign error before
        "int": dict(files={"model.safetensors": one, "index": {"a": 1}}),
        "list": dict(files={"model.safetensors": one, "index": {"a": ["model.safetensors"]}}),
        "parent": dict(files={"model.safetensors": one, "index": {"a": ".."}}),
    }
    for name, kw in cases.items():
        with pytest.raises(ValueError, match="weight_map names .*, not a file of the checkpoint"):
            ckpt.load(_hand_written(tmp_path / name, None, "modelopt", **kw))
    # One tensor in two files: the last file's copy won, whatever the weight_map said.
    twice = _hand_written(tmp_path / "twice", None, "modelopt", files={
        "a.safetensors": one, "b.safetensors": {"a": torch.zeros(2), "b": torch.ones(1)},
        "index": {"a": "a.safetensors", "b": "b.safetensors"}})
    with pytest.raises(ValueError, match="'a' is in both a.safetensors and b.safetensors"):
        ckpt.load(twice)
    truncated = _hand_written(tmp_path / "truncated", one, "modelopt")
    data = (truncated / "model.safetensors").read_bytes()
    for cut in (len(data) - 4, 5):
        (truncated / "model.safetensors").write_bytes(data[:cut])
        with pytest.raises(ValueError, match="model.safetensors: cannot be read as safetensors"):
            ckpt.load(truncated)
    (truncated / "config.json").write_text("{}")  # no quantization_config: ModelOpt's older file is read
    for quantization in ("NVFP4", [1], None):
        (truncated / "hf_quant_config.json").write_text(json.dumps({"quantization": quantization}))
        with pytest.raises(ValueError, match="its 'quantization' is .*, not a dict"):
            ckpt.load(truncated)


def test_a_full_disk_or_an_unwritable_path_leaves_nothing_behind(tmp_path, weights, monkeypatch):
    import safetensors.torch

    st = storage(weights, "mxfp8")
    calls = []

    def full_disk(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)
        return real(tensors, filename, metadata=metadata)

    real = safetensors.torch.save_file
    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    with pytest.raises(OSError, match="No space left on device.*nothing was left behind"):
        ckpt.save(tmp_path / "model", st, format="compressed-tensors", max_shard_bytes=200_000)
    assert len(calls) == 2 and not (tmp_path / "model").exists() and nothing_left(tmp_path)
    monkeypatch.undo()

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(OSError):
        ckpt.save(tmp_path / "file" / "model", st, format="compressed-tensors")
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):  # overwrite replaces checkpoints only
        ckpt.save(tmp_path / "file", st, format="compressed-tensors", overwrite=True)
    assert (tmp_path / "file").read_text() == "not a folder"
    with pytest.raises(TypeError):  # refused before anything is made: no parent folders left either
        ckpt.save(tmp_path / "new1" / "new2" / "model", dict(st, junk=3), format="compressed-tensors")
    assert not (tmp_path / "new1").exists()
    existing = save(tmp_path, weights, "mxfp8")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save(tmp_path, weights, "mxfp8")
    before = sorted(p.name for p in existing.iterdir())
    real_replace, calls = os.replace, []

    def failing_last_rename(a, b):  # the new checkpoint cannot take the old one's place
        calls.append((a, b))
        if ".partial-" in str(a) and str(b) == str(existing):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(b))
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", failing_last_rename)
    with pytest.raises(OSError, match="nothing was left behind"):
        save(tmp_path, weights, "mxfp8", overwrite=True)
    monkeypatch.undo()
    assert sorted(p.name for p in existing.iterdir()) == before and nothing_left(tmp_path)  # the old one, in place
    save(tmp_path, weights, "mxfp8", overwrite=True, max_shard_bytes=300_000)  # replaced whole
    assert sorted(p.name for p in existing.iterdir()) != before and nothing_left(tmp_path)


def test_what_appears_at_the_target_during_a_save_is_not_replaced(tmp_path, weights):
    """The target was checked only before writing: a folder (or file) made there meanwhile, by another
    process's save or anyone, was replaced at the end even with overwrite=False."""
    st = storage(weights, "mxfp8")
    target = tmp_path / "model"

    def someone_else(kind):
        def name_map(name):  # called while the save plans, after its first look at the target
            if not target.exists() and not target.is_symlink():
                if kind == "folder":
                    target.mkdir()
                    (target / "precious.txt").write_text("x")
                elif kind == "checkpoint":
                    target.mkdir()
                    (target / "config.json").write_text("{}")
                else:
                    target.write_text("x")
            return name
        return name_map

    for kind, overwrite, match in [("folder", False, "overwrite=True"), ("file", False, "overwrite=True"),
                                   ("checkpoint", False, "overwrite=True"),
                                   ("folder", True, "not a checkpoint directory")]:
        with pytest.raises(FileExistsError, match=match):
            ckpt.save(target, st, format="compressed-tensors", name_map=someone_else(kind), overwrite=overwrite)
        if kind == "file":
            assert target.read_text() == "x"
            target.unlink()
        else:
            assert sorted(p.name for p in target.iterdir()) == (["config.json"] if kind == "checkpoint"
                                                                 else ["precious.txt"])
            for p in target.iterdir():
                p.unlink()
            target.rmdir()
        assert nothing_left(tmp_path)


def test_an_empty_folder_is_taken_and_one_filled_meanwhile_is_not(tmp_path, weights):
    import tempfile

    st = storage(weights, "mxfp8")
    empty = Path(tempfile.mkdtemp(dir=tmp_path))  # what a caller makes for a checkpoint: refused before
    assert ckpt.save(empty, st, format="compressed-tensors") == empty
    assert ckpt.load(empty).format == "compressed-tensors"
    other = tmp_path / "other"
    other.mkdir()

    def fills_it(name):  # another process writes into the empty folder during the save
        (other / "precious.txt").write_text("x")
        return name

    with pytest.raises(FileExistsError, match="overwrite=True"):
        ckpt.save(other, st, format="compressed-tensors", name_map=fills_it)
    assert [p.name for p in other.iterdir()] == ["precious.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([empty.name, "other"])


def test_a_long_legal_name_saves_and_a_failed_scratch_folder_leaves_no_parents(tmp_path, weights, monkeypatch):
    import tempfile

    st = storage(weights, "mxfp8")
    long_name = tmp_path / ("m" * 250)  # legal (255 bytes a name); ".<name>.partial-XXXXXXXX" was not
    ckpt.save(long_name, st, format="compressed-tensors")
    assert ckpt.load(long_name).format == "compressed-tensors"
    ckpt.save(long_name, st, format="compressed-tensors", overwrite=True)  # and its ".old-" sibling
    assert [p.name for p in tmp_path.iterdir()] == [long_name.name]

    def no_inodes(*args, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "mkdtemp", no_inodes)
    with pytest.raises(OSError, match="nothing was left behind"):
        ckpt.save(tmp_path / "new1" / "new2" / "model", st, format="compressed-tensors")
    monkeypatch.undo()
    assert not (tmp_path / "new1").exists()


def test_the_demo_command_writes_and_verifies_both_formats(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mxfp8", "checkpoint", "--demo", str(tmp_path / "demo"),
                          "--layers", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "checkpoint demo OK"
    assert (tmp_path / "demo" / "mxfp8-compressed-tensors" / "config.json").exists()
    assert (tmp_path / "demo" / "nvfp4-modelopt" / "hf_quant_config.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda,
                    reason="needs a CUDA device and the CUDA build")
@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_storage_on_the_gpu_saves_the_same_files_as_on_the_host(tmp_path, weights, fmt):
    host = storage(weights, fmt)
    cuda = storage({n: w.cuda() for n, w in weights.items()}, fmt)
    assert all(spec["data"].is_cuda for spec in cuda.values() if isinstance(spec, dict))
    a = ckpt.save(tmp_path / "host", host, format=FORMATS[fmt])
    b = ckpt.save(tmp_path / "cuda", cuda, format=FORMATS[fmt])
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
