"""mxfp8.vllm's weight-transfer engine through vLLM's own weight_transfer base classes, factory and config
(base.py, factory.py, config/weight_transfer.py, read unchanged from the files scripts/install_deps.sh keeps
of the vLLM wheel; the rest of vLLM is not installed): registered in vLLM's factories, made by them, and a
trainer and a worker engine round-tripping MXFP8 weights (partial last blocks, TE's swizzled scales at the
source) over a gloo group on the CPU into a model whose parameters start poisoned, byte for byte, two
steps. The few vLLM modules those files import that the tests do not exercise are stubs: the logger, the
@config decorator, ParallelConfig, and the layerwise-reload and MTP-check hooks (recorded). Skips without
the kept files."""
import base64
import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import pathlib
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

import mxfp8  # noqa: E402
import mxfp8.vllm  # noqa: E402
from conftest import POISON, VLLM_ORACLE, make_mxfp8, oracle_wheels  # noqa: E402

KEPT = ("vllm/distributed/weight_transfer/base.py", "vllm/distributed/weight_transfer/factory.py",
        "vllm/config/weight_transfer.py")
PACKAGES = ("vllm", "vllm.config", "vllm.distributed", "vllm.distributed.weight_transfer", "vllm.model_executor",
            "vllm.model_executor.model_loader")


class Reload:
    """Stands for vllm.model_executor.model_loader.reload: records the layerwise reload around an update."""

    def __init__(self):
        self.calls = []

    def initialize_layerwise_reload(self, model):
        self.calls.append(("initialize", model))

    def finalize_layerwise_reload(self, model, model_config):
        self.calls.append(("finalize", model, model_config))


@pytest.fixture(scope="module")
def vllm():
    """vLLM's weight_transfer modules, as its files define them, imported under their own names."""
    if sys.version_info < (3, 11):
        pytest.skip("vLLM 0.33 needs Python 3.11 (its base.py imports typing.Self)")
    root = oracle_wheels() / VLLM_ORACLE
    missing = [f for f in KEPT if not (root / f).exists()]
    if missing:
        pytest.skip(f"{root} lacks {missing} (scripts/install_deps.sh test keeps them from the vllm wheel)")
    saved = {name: module for name, module in sys.modules.items() if name == "vllm" or name.startswith("vllm.")}
    for name in saved:
        del sys.modules[name]
    reload = Reload()
    stubs = {
        "vllm.config.utils": {"config": dataclasses.dataclass},
        "vllm.config.parallel": {"ParallelConfig": type("ParallelConfig", (), {})},
        "vllm.logger": {"init_logger": logging.getLogger},
        "vllm.model_executor.model_loader.reload": {
            "initialize_layerwise_reload": reload.initialize_layerwise_reload,
            "finalize_layerwise_reload": reload.finalize_layerwise_reload},
        "vllm.model_executor.model_loader.mtp_validation": {"disable_mtp_completeness_check": contextlib.nullcontext},
    }
    try:
        for name in PACKAGES:  # namespaces over the kept folders: the real files load, the __init__s do not run
            package = types.ModuleType(name)
            package.__path__ = [str(root.joinpath(*name.split(".")))]
            sys.modules[name] = package
        for name, attributes in stubs.items():
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
        vllm = types.SimpleNamespace(
            base=importlib.import_module("vllm.distributed.weight_transfer.base"),
            factory=importlib.import_module("vllm.distributed.weight_transfer.factory"),
            config=importlib.import_module("vllm.config.weight_transfer"), reload=reload)
        assert vllm.base.__file__.startswith(str(root))
        mxfp8.vllm._classes.cache_clear()  # the engine classes made over these base classes
        mxfp8.vllm.register()
        yield vllm
    finally:
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]
        sys.modules.update(saved)
        mxfp8.vllm._classes.cache_clear()


class Model(torch.nn.Module):
    """An MXFP8 model as vLLM's MXFP8 linears hold it: `weight` float8_e4m3fn and `weight_scale` uint8 per
    layer, every byte poisoned; load_weights copies each pair in as vLLM's weight loaders do, refusing a
    name, shape or dtype it does not have."""

    def __init__(self, shapes):
        super().__init__()
        self.layers = torch.nn.ModuleDict()
        for name, shape in shapes.items():
            layer = torch.nn.Module()
            scales = (*shape[:-1], -(-shape[-1] // 32))
            layer.weight = torch.nn.Parameter(torch.full(shape, POISON, dtype=torch.uint8).view(torch.float8_e4m3fn),
                                              requires_grad=False)
            layer.weight_scale = torch.nn.Parameter(torch.full(scales, POISON, dtype=torch.uint8),
                                                    requires_grad=False)
            self.layers[name] = layer
        self.loads = []

    def load_weights(self, weights):
        params = dict(self.named_parameters())
        loaded = set()
        for name, tensor in weights:
            param = params[name]
            assert (param.dtype, param.shape) == (tensor.dtype, tensor.shape), name
            param.data.copy_(tensor)
            loaded.add(name)
        self.loads.append(sorted(loaded))
        return loaded


class Client:
    """vLLM's VLLMWeightSyncClient in process: each call runs what the worker's RPC of that name runs
    (gpu_worker.py: parse the dict, then the engine's method)."""

    def __init__(self, engine):
        self.engine = engine

    def init_weight_transfer_engine(self, init_info):
        self.engine.init_transfer_engine(self.engine.parse_init_info(init_info))

    def start_weight_update(self):
        self.engine.start_weight_update()

    def update_weights(self, update_info):
        self.engine.update_weights(json.loads(json.dumps(update_info)))  # as vLLM's HTTP route carries it

    def finish_weight_update(self, weight_version=None):
        self.engine.finish_weight_update()


SHAPES = {"l0": (64, 80), "l1": (33, 100), "l2": (2, 16, 48), "l3": (40, 32)}  # K % 32: 16, 4, 16, 0


def storage(seed):
    """TE-style MXFP8 storage (swizzled, padding poisoned) of SHAPES, and the bytes each parameter must end
    with: (values, compact scales), from the layout's definition."""
    specs, want = {}, {}
    for i, (name, shape) in enumerate(SHAPES.items()):
        data, buf, s = make_mxfp8(shape, "swizzled", seed=seed + i)
        specs[f"layers.{name}"] = {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf),
                                   "swizzled": True, "shape": shape}
        want[f"layers.{name}.weight"] = data
        want[f"layers.{name}.weight_scale"] = s.reshape(*shape[:-1], -1)
    return specs, want


def make_engine(vllm, model):
    config = types.SimpleNamespace(
        parallel_config=types.SimpleNamespace(rank=0, world_size=1, data_parallel_index=0),
        model_config=types.SimpleNamespace(name="model config"))
    return vllm.factory.WeightTransferEngineFactory.create_engine(
        vllm.config.WeightTransferConfig(backend="mxfp8"), config, torch.device("cpu"), model)


def test_registered_in_vllms_factories_and_made_by_them(vllm):
    factory = vllm.factory
    engine = make_engine(vllm, Model(SHAPES))
    assert isinstance(engine, vllm.base.WeightTransferEngine)
    assert type(engine) is mxfp8.vllm.MXFP8WeightTransferEngine
    assert issubclass(engine.init_info_cls, vllm.base.WeightTransferInitInfo)
    assert issubclass(engine.update_info_cls, vllm.base.WeightTransferUpdateInfo)
    assert issubclass(mxfp8.vllm.MXFP8TrainerInitInfo, vllm.base.TrainerInitInfo)
    fields = {cls: [f.name for f in dataclasses.fields(cls)] for cls in (
        engine.init_info_cls, engine.update_info_cls, mxfp8.vllm.MXFP8TrainerInitInfo)}
    assert fields == {  # backend is the trainer info's ClassVar (vLLM's factory key), not a field
        engine.init_info_cls: ["transport", "master_address", "master_port", "rank_offset", "world_size"],
        engine.update_info_cls: ["manifest", "bucket_bytes", "ipc_handles", "ipc_handles_pickled"],
        mxfp8.vllm.MXFP8TrainerInitInfo: ["rank", "transport", "master_address", "master_port", "world_size",
                                          "bucket_bytes"]}
    assert mxfp8.vllm.MXFP8TrainerInitInfo.backend == "mxfp8"
    assert factory.WeightTransferTrainerFactory._registry["mxfp8"]() is mxfp8.vllm.MXFP8TrainerWeightTransferEngine
    mxfp8.vllm.register()  # again: nothing happens (vLLM's own register_engine refuses a second one)
    with pytest.raises(ValueError, match="already registered"):
        factory.WeightTransferEngineFactory.register_engine("mxfp8", "mxfp8.vllm", "MXFP8WeightTransferEngine")
    assert isinstance(Client(engine), vllm.base.VLLMWeightSyncClient)
    # what vLLM's load_general_plugins runs in each of its processes
    plugins = {e.name: e for e in importlib.metadata.entry_points(group="vllm.general_plugins")}
    plugin = plugins["mxfp8"].load()
    assert plugin is mxfp8.vllm._plugin
    plugin()  # registered already: nothing happens
    assert factory.WeightTransferEngineFactory._registry["mxfp8"]() is mxfp8.vllm.MXFP8WeightTransferEngine


def test_the_plugin_leaves_a_vllm_without_weight_transfer_starting(monkeypatch, caplog):
    """vLLM runs its general plugins at startup and stops on one that raises: before 0.33 there is no
    weight-transfer framework, and the plugin only says so."""
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))  # a vLLM without the framework
    for name in [n for n in sys.modules if n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    with caplog.at_level(logging.WARNING, logger="mxfp8.vllm"):
        mxfp8.vllm._plugin()
    assert "no weight-transfer framework" in caplog.text
    with pytest.raises(ImportError):
        mxfp8.vllm.register()  # asked for by name, the missing framework is an error


def test_trainer_to_worker_round_trip_over_gloo_byte_for_byte(vllm):
    model = Model(SHAPES)
    engine = make_engine(vllm, model)
    client = Client(engine)
    specs, want = storage(seed=10)
    init = mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="gloo", master_address="127.0.0.1", master_port=0,
                                            world_size=2, bucket_bytes=4096)
    trainer = vllm.factory.WeightTransferTrainerFactory.trainer_init(init, client=client, source=specs)
    assert type(trainer) is mxfp8.vllm.MXFP8TrainerWeightTransferEngine and engine.transport == "gloo"
    assert len(trainer.plans) >= 2  # several buckets, several update_weights
    try:
        for step in range(2):
            if step:  # requantized in place, as a trainer's step does: new bytes at the same addresses
                specs2, want = storage(seed=20)
                for name, spec in specs.items():
                    spec["data"].copy_(specs2[name]["data"])
                    spec["scale_inv"].copy_(specs2[name]["scale_inv"])
            vllm.reload.calls.clear()
            model.loads.clear()
            trainer.send_weights()
            params = dict(model.named_parameters())
            assert sorted(params) == sorted(want)
            for name, expected in want.items():
                assert np.array_equal(params[name].data.view(torch.uint8).numpy(), expected), (step, name)
            assert len(model.loads) == len(trainer.plans)
            assert sorted(n for load in model.loads for n in load) == sorted(want)
            assert vllm.reload.calls == [("initialize", model), ("finalize", model, engine.model_config)]
    finally:
        trainer.shutdown()
        engine.shutdown()
    with pytest.raises(RuntimeError, match="call init_transfer_engine first"):
        engine.update_weights({"manifest": trainer.plans[0].manifest, "bucket_bytes": 4096})


def test_vllm_weights_are_views_under_vllms_names(vllm):
    specs, want = storage(seed=30)
    bucket, manifest = mxfp8.export_bucket({name + ".weight" if name.endswith("l1") else name: spec
                                            for name, spec in specs.items()})
    pairs = mxfp8.vllm.vllm_weights(bucket, iter(manifest))  # a manifest read once, as from a generator
    assert [n for n, _ in pairs] == [n for name in specs for n in (f"{name}.weight", f"{name}.weight_scale")]
    for name, tensor in pairs:
        assert tensor.dtype == (torch.float8_e4m3fn if name.endswith(".weight") else torch.uint8)
        assert np.array_equal(tensor.view(torch.uint8).numpy(), want[name]), name
        assert tensor.untyped_storage().data_ptr() == bucket.untyped_storage().data_ptr()  # no copy


def test_what_vllms_mxfp8_linears_cannot_load_is_refused(vllm):
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=3)
    spec = {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf), "swizzled": False}
    with pytest.raises(ValueError, match=r"'w' holds e5m2 values: vLLM's MXFP8 weights are float8_e4m3fn"):
        mxfp8.vllm.vllm_weights(*mxfp8.export_bucket({"w": dict(spec, fp8_dtype="e5m2")}))
    data, buf, _ = make_mxfp8((64, 64), "padded", direction="columnwise", seed=2)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf),
                                                  "swizzled": False}}, direction="columnwise")
    with pytest.raises(ValueError, match="'w' is columnwise"):
        mxfp8.vllm.vllm_weights(bucket, manifest)
    nvfp4, _ = __import__("test_nvfp4_bucket").nvfp4_source((64, 32), "compact", "rowwise", False, 448, seed=1)
    bucket, manifest = mxfp8.export_bucket({"w": {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                                                  for k, v in nvfp4.items()}})
    with pytest.raises(ValueError, match="'w' is NVFP4"):
        mxfp8.vllm.vllm_weights(bucket, manifest)
    bucket, manifest = mxfp8.export_bucket({"w": spec, "w.weight": spec})
    with pytest.raises(ValueError, match="gives 'w.weight' again"):
        mxfp8.vllm.vllm_weights(bucket, manifest)
    bucket, manifest = mxfp8.export_bucket({"w": spec})
    with pytest.raises(ValueError, match="does not describe this bucket"):  # the C library's check of the manifest
        mxfp8.vllm.vllm_weights(bucket, [dict(manifest[0], values_bytes=manifest[0]["values_bytes"] + 1)])
    with pytest.raises(TypeError, match="1-D uint8 torch tensor"):
        mxfp8.vllm.vllm_weights(bucket.numpy(), manifest)


def test_bad_init_and_update_info_are_refused(vllm, monkeypatch):
    engine = make_engine(vllm, Model(SHAPES))
    with pytest.raises(ValueError, match="transport must be one of"):
        engine.parse_init_info({"transport": "tcp"})
    with pytest.raises(ValueError, match="'nccl' needs master_address, master_port, world_size"):
        engine.parse_init_info({})
    with pytest.raises(ValueError, match="Invalid init_info"):  # vLLM's own wrapping of an unknown key
        engine.parse_init_info({"transport": "ipc", "packed": True})
    with pytest.raises(ValueError, match="non-empty list"):
        engine.parse_update_info({"manifest": [], "bucket_bytes": 256})
    for bad in (True, -1, 1.0):
        with pytest.raises(ValueError, match=r"must be an int >= 0"):
            engine.parse_update_info({"manifest": [{"name": "w"}], "bucket_bytes": bad})
    with pytest.raises(ValueError, match="Invalid update_info"):
        engine.parse_update_info({"manifest": [{"name": "w"}]})
    pickled = base64.b64encode(pickle.dumps({"GPU-0": (1, 2)})).decode()
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION", raising=False)
    with pytest.raises(ValueError, match="without VLLM_ALLOW_INSECURE_SERIALIZATION=1"):
        engine.parse_update_info({"manifest": [{"name": "w"}], "bucket_bytes": 256, "ipc_handles_pickled": pickled})
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # what vLLM's HTTP client sends, read back
    info = engine.parse_update_info({"manifest": [{"name": "w"}], "bucket_bytes": 256, "ipc_handles_pickled": pickled})
    assert info.ipc_handles == {"GPU-0": (1, 2)} and info.ipc_handles_pickled is None
    engine.init_transfer_engine(engine.parse_init_info({"transport": "ipc"}))
    with pytest.raises(ValueError, match="must carry the bucket's ipc_handle"):
        engine.update_weights({"manifest": [{"name": "w"}], "bucket_bytes": 256})
    with pytest.raises(TypeError, match="the MXFP8 storage"):
        mxfp8.vllm.MXFP8TrainerWeightTransferEngine.trainer_init(
            mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="ipc"), client=Client(engine), source=[("w", None)])
    with pytest.raises(ValueError, match="world_size counts the trainer"):
        mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="gloo", master_address="h", master_port=1, world_size=1)


def test_import_needs_no_vllm():
    code = ("import importlib.util, sys, mxfp8, mxfp8.vllm\n"
            "if importlib.util.find_spec('vllm'):\n    print('installed'); sys.exit()\n"
            "assert not any(n == 'vllm' or n.startswith('vllm.') for n in sys.modules)\n"
            "try:\n    mxfp8.vllm.MXFP8WeightTransferEngine\nexcept ImportError as e:\n    print(e.name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    if out.split() == ["installed"]:
        pytest.skip("vLLM is installed here")
    assert out.split() == ["vllm"]


def test_the_example_syncs_every_step_into_the_model(vllm, capsys):
    """examples/weight_sync/vllm_engine.py's sync, with the in-process worker instead of vLLM's HTTP client:
    after each step every parameter holds the bytes of the trainer's storage (requantized each step)."""
    spec = importlib.util.spec_from_file_location(
        "vllm_engine_example", pathlib.Path(__file__).resolve().parents[3] / "examples/weight_sync/vllm_engine.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    shapes = {"layers.a": (48, 96), "layers.b": (20, 72)}  # 72: a partial last block
    components = {name: mxfp8.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)))
                  for i, (name, shape) in enumerate(shapes.items())}
    storage = example.Storage({n: (q.rowwise_data, q.rowwise_scale_inv) for n, q in components.items()})
    model = Model({n.split(".")[1]: s for n, s in shapes.items()})
    engine = make_engine(vllm, model)
    before = {n: s["data"].view(torch.uint8).clone() for n, s in storage.specs.items()}
    checked = []

    def check(step):
        params = dict(model.named_parameters())
        for name, spec in storage.specs.items():
            assert torch.equal(params[f"{name}.weight"].data.view(torch.uint8), spec["data"].view(torch.uint8))
            assert torch.equal(params[f"{name}.weight_scale"].data, spec["scale_inv"])
        checked.append(step)

    init = mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="gloo", master_address="127.0.0.1", master_port=0,
                                            world_size=2, bucket_bytes=2048)
    example.sync(Client(engine), storage, init, steps=2, on_step=check)
    engine.shutdown()
    assert checked == [1, 2]
    assert any(not torch.equal(before[n], s["data"].view(torch.uint8)) for n, s in storage.specs.items())
    assert "step 2: 2 bucket(s)" in capsys.readouterr().out


class Recording(Client):
    """Client, recording the RPCs, and changing each update_info (as JSON) with `lie` before the worker gets it."""

    def __init__(self, engine, lie=None):
        super().__init__(engine)
        self.lie, self.calls = lie, []

    def start_weight_update(self):
        self.calls.append("start")
        super().start_weight_update()

    def update_weights(self, update_info):
        self.calls.append("update")
        info = json.loads(json.dumps(update_info))
        if self.lie is not None:
            self.lie(info)
        self.engine.update_weights(info)


def gloo_trainer(engine, client, specs, bucket_bytes=4096):
    init = mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="gloo", master_address="127.0.0.1", master_port=0,
                                            world_size=2, bucket_bytes=bucket_bytes)
    return mxfp8.vllm.MXFP8TrainerWeightTransferEngine.trainer_init(init, client=client, source=specs)


@pytest.mark.parametrize("lie", [1, -1, 1 << 62], ids=["larger", "smaller", "huge"])
def test_a_bucket_size_the_update_info_gets_wrong_is_refused_after_the_bytes(vllm, lie):
    """The worker sizes its receive from the trainer's own count, sent ahead of the bytes, and checks
    update_info['bucket_bytes'] against it after: a wrong size is a ValueError and the group stays in step
    (it was a gloo receive of the wrong length: an abort of the worker process for a smaller size, a hang for
    a huge one, a silent accept for a larger one; with NCCL, a collective of mismatched counts)."""
    model = Model(SHAPES)
    engine = make_engine(vllm, model)
    client = Recording(engine, lie=lambda info: info.update(bucket_bytes=info["bucket_bytes"] + lie))
    specs, want = storage(seed=40)
    trainer = gloo_trainer(engine, client, specs)
    try:
        with pytest.raises(ValueError, match=r"the trainer sent a bucket of \d+ bytes, update_info\['bucket_bytes'\] "
                                             r"says \d+"):
            trainer.send_weights()
        client.lie = None  # the same group, in step: the next update goes through, byte for byte
        trainer.send_weights()
        params = dict(model.named_parameters())
        for name, expected in want.items():
            assert np.array_equal(params[name].data.view(torch.uint8).numpy(), expected), name
    finally:
        trainer.shutdown()
        engine.shutdown()


def test_a_bucket_of_empty_tensors_only_is_sent(vllm):
    """prepare_buckets makes a bucket of 0 bytes for empty tensors that follow a full one (or for a model of
    empty tensors): the worker refused its update_info ("a positive int"), after start_weight_update, so
    every send failed with vLLM's layerwise reload left open. The second probe of the Python layer found it."""
    shapes = {"l0": (64, 80), "empty": (0, 64)}
    model = Model(shapes)
    engine = make_engine(vllm, model)
    specs, want = {}, {}
    for i, (name, shape) in enumerate(shapes.items()):
        data, buf, s = make_mxfp8(shape, "swizzled", seed=70 + i)
        specs[f"layers.{name}"] = {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf),
                                   "swizzled": True, "shape": shape}
        want[f"layers.{name}.weight"] = data
        want[f"layers.{name}.weight_scale"] = s.reshape(*shape[:-1], -(-shape[-1] // 32))
    trainer = gloo_trainer(engine, Recording(engine), specs, bucket_bytes=1024)  # l0 alone past 1024 bytes
    try:
        assert [p.buffer.numel() for p in trainer.plans][-1] == 0
        vllm.reload.calls.clear()
        trainer.send_weights()
        assert vllm.reload.calls == [("initialize", model), ("finalize", model, engine.model_config)]
        params = dict(model.named_parameters())
        for name, expected in want.items():
            assert np.array_equal(params[name].data.view(torch.uint8).numpy(), expected), name
        assert sorted(n for load in model.loads for n in load) == sorted(want)
        empty_manifest = trainer.plans[-1].manifest
    finally:
        trainer.shutdown()
        engine.shutdown()
    # Over CUDA IPC such a bucket has no memory to share: its update_info carries no handle.
    model.loads.clear()
    engine = make_engine(vllm, model)
    engine.init_transfer_engine(engine.parse_init_info({"transport": "ipc"}))
    engine.update_weights({"manifest": empty_manifest, "bucket_bytes": 0})
    assert model.loads == [["layers.empty.weight", "layers.empty.weight_scale"]]
    with pytest.raises(ValueError, match="must carry the bucket's ipc_handles"):
        engine.update_weights({"manifest": empty_manifest, "bucket_bytes": 1})


def test_a_trainer_shut_down_sends_nothing(vllm):
    """send_weights after shutdown refuses before any RPC (it opened the workers' update and left them in a
    broadcast no trainer joins: with NCCL, a hang)."""
    engine = make_engine(vllm, Model(SHAPES))
    client = Recording(engine)
    trainer = gloo_trainer(engine, client, storage(seed=50)[0])
    trainer.shutdown()
    trainer.shutdown()  # twice: nothing
    try:
        with pytest.raises(RuntimeError, match="shut down"):
            trainer.send_weights()
        assert client.calls == []
    finally:
        engine.shutdown()
        engine.shutdown()


GLOO = {"transport": "gloo", "master_address": "127.0.0.1", "master_port": 29500, "world_size": 2}


@pytest.mark.parametrize("bad", [{"rank_offset": "1"}, {"rank_offset": True}, {"rank_offset": 0}, {"rank_offset": -1},
                                 {"world_size": 2.0}, {"world_size": True}, {"master_port": "29500"},
                                 {"master_port": 0}, {"master_port": 1 << 16}, {"master_port": True},
                                 {"master_address": 127}], ids=repr)
def test_init_info_of_the_wrong_type_or_range_is_refused_when_parsed(vllm, bad):
    """What JSON can carry into the worker's init info: a string, a float or a bool for an int, a rank_offset
    that puts a worker on the trainer's rank 0, a port outside 1..65535, each refused by parse_init_info and
    naming the field (they were accepted, and failed later inside the rendezvous, or not at all)."""
    engine = make_engine(vllm, Model(SHAPES))
    field = next(iter(bad))
    with pytest.raises(ValueError, match=field):
        engine.parse_init_info(dict(GLOO, **bad))


def test_the_trainers_port_0_is_for_gloo_only(vllm):
    """Port 0 lets the trainer's own TCPStore (gloo) pick a port and tell the workers; vLLM's NCCL rendezvous
    would tell them 0."""
    mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="gloo", master_address="h", master_port=0, world_size=2)
    with pytest.raises(ValueError, match="master_port"):
        mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport="nccl", master_address="h", master_port=0, world_size=2)


def test_a_worker_rank_past_the_world_is_refused_before_the_rendezvous(vllm):
    """rank_offset + DP index * TP*PP + rank must be below world_size: a world_size that does not count every
    worker is said as such, before any connection (it was gloo's 'rank < size' enforce from inside the group,
    or for NCCL, vLLM's rendezvous waiting)."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    engine = make_engine(vllm, Model(SHAPES))
    with pytest.raises(ValueError, match=r"rank 2 .*world_size 2"):
        engine.init_transfer_engine(engine.parse_init_info(dict(GLOO, master_port=store.port, rank_offset=2)))
    assert engine.group is None and engine.transport is None


def test_entry_names_vllm_cannot_have_are_refused(vllm):
    """The C library's check takes any name; vLLM's parameter names are non-empty strings."""
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=5)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": torch.from_numpy(data), "scale_inv": torch.from_numpy(buf),
                                                  "swizzled": False}})
    for name in (5, None, b"w"):
        with pytest.raises(TypeError, match=r"manifest\[0\]\['name'\] must be a str"):
            mxfp8.vllm.vllm_weights(bucket, [dict(manifest[0], name=name)])
    for name in ("", ".weight"):
        with pytest.raises(ValueError, match="no module name"):
            mxfp8.vllm.vllm_weights(bucket, [dict(manifest[0], name=name)])


@pytest.mark.parametrize("args", [(1, 2), None, "not a tuple", [None] * 15], ids=["short", "None", "str", "Nones"])
def test_an_ipc_handle_that_is_not_reduce_tensors_args_is_refused(vllm, monkeypatch, args):
    """The handle of this worker's GPU must be torch's reduce_tensor args (rebuild_cuda_tensor's): anything
    else is a ValueError saying so (it was an IndexError at args[6] or a TypeError from inside torch). The GPU
    is stood in for: this runs on the CPU."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(uuid="GPU-0"))
    engine = make_engine(vllm, Model(SHAPES))
    engine.init_transfer_engine(engine.parse_init_info({"transport": "ipc"}))
    info = {"manifest": [{"name": "w"}], "bucket_bytes": 256}
    with pytest.raises(ValueError, match="GPU GPU-0 is not torch's reduce_tensor args"):
        engine.update_weights(dict(info, ipc_handles={"GPU-0": args}))
    with pytest.raises(ValueError, match=r"no IPC handle for this worker's GPU GPU-0; the handles are for \['GPU-1'\]"):
        engine.update_weights(dict(info, ipc_handles={"GPU-1": args}))
