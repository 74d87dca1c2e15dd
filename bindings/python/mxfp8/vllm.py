"""A vLLM weight-transfer engine ("mxfp8") that moves MXFP8 buckets from a trainer into vLLM's workers.

vLLM (0.33) plugs weight transports in through ``vllm/distributed/weight_transfer/``: a worker-side
``WeightTransferEngine`` (``init_transfer_engine(init_info)``, ``start_weight_update()``,
``update_weights(update_info)`` -> ``receive_weights(typed_info)``, ``finish_weight_update()``,
``shutdown()``, with ``init_info_cls`` / ``update_info_cls`` dataclasses built from the dicts the worker's
``init_weight_transfer_engine`` / ``update_weights`` RPCs carry), created by
``WeightTransferEngineFactory.create_engine`` from ``WeightTransferConfig(backend=...)``; and a trainer-side
``TrainerWeightTransferEngine`` (``trainer_init(init_info, client=, source=)``, ``send_weights()``) whose
``TrainerInitInfo`` names the backend. This module implements both over the buckets of
``mxfp8.prepare_buckets`` (one launch fills a bucket with many tensors' values and compact E8M0 scales):

    # every vLLM process: ``register()`` (the package's "vllm.general_plugins" entry point calls it), then
    #   LLM(..., weight_transfer_config=WeightTransferConfig(backend="mxfp8"))
    # the trainer (storage: name -> MXFP8 spec, as mxfp8.prepare_buckets takes it)
    from mxfp8.vllm import MXFP8TrainerInitInfo, MXFP8TrainerWeightTransferEngine
    trainer = MXFP8TrainerWeightTransferEngine.trainer_init(
        MXFP8TrainerInitInfo(rank=0, transport="nccl", master_address=addr, master_port=port, world_size=1 + n),
        client=client, source=storage)          # client: vLLM's VLLMWeightSyncClient (HTTP, Ray, in-process)
    for step in range(steps):
        optimizer.step(); requantize(storage)
        trainer.send_weights()                  # start_weight_update, one update_weights per bucket, finish

Each bucket travels whole, as the trainer's plan filled it: over ``transport="nccl"`` (vLLM's own
PyNcclCommunicator, made by its ``nccl_common`` helpers as its "nccl" engine makes it: the trainer is
rank 0, the workers from ``rank_offset``), ``"gloo"`` (a torch.distributed ProcessGroupGloo on a TCPStore of
its own: host memory, or for tests) or ``"ipc"`` (one CUDA IPC handle per bucket, per GPU UUID, as vLLM's
"ipc" engine sends them; the worker copies the bucket, so the trainer may refill it once update_weights
returned). The update info of a bucket is its manifest and size; over "nccl" / "gloo" the trainer broadcasts
the bucket's byte count (one int64) before the bytes, so the worker receives the length sent and refuses a
size the update info got wrong after it, the group still in step. The worker checks the manifest against the
bytes (the C library's check) and hands ``model.load_weights`` views of the bucket:

    X.weight        float8_e4m3fn, the entry's shape ([N, K] for a linear)
    X.weight_scale  uint8 E8M0, compact: [N, ceil(K/32)] ((*lead, ceil(K/32)) for more dimensions)

for every manifest entry ``X`` (or ``X.weight``). These are the names and dtypes vLLM 0.33's MXFP8 linears
register for a serialized MXFP8 checkpoint: ModelOpt MXFP8 (``KMxfp8Static`` in quantization/modelopt.py) and
compressed-tensors (``CompressedTensorsW8A8Mxfp8``) both hold ``weight`` float8_e4m3fn [N, K] and
``weight_scale`` uint8 [N, K // 32], and need K % 32 == 0 (a partial last block is handed over as it is, and
their loaders refuse it). Not vLLM's online MXFP8 (quantization/online/mxfp8.py, ``Mxfp8OnlineLinearMethod``):
it loads the checkpoint's bf16/fp16 ``weight`` and quantizes it after loading, so it has no ``weight_scale``
to load and its ``weight`` is not float8. The names are checkpoint names
(``q_proj``, not the fused ``qkv_proj``): the weights go through ``model.load_weights`` inside vLLM's
layerwise reload (``initialize_layerwise_reload`` at start, ``finalize_layerwise_reload`` at finish, as
vLLM's nccl and ipc engines do), so the kernel's own post-processing (the scale swizzle, a transpose) runs
again on the new bytes. ``GPUModelRunner.reload_weights(is_checkpoint_format=False)`` is not used: it copies
into the parameters as they are after that processing ("kernel format"), which for MXFP8 depends on the
kernel vLLM picked (FlashInfer's swizzled scales, a transposed weight), not compact scales.

Refused, with the entry named: NVFP4 entries (vLLM's ModelOpt NVFP4 also wants input scales), E5M2 values
(vLLM's MXFP8 is E4M3), columnwise buckets. vLLM is imported only when the engine classes are first used:
``import mxfp8`` and ``import mxfp8.vllm`` do not need it.

Limits (as of vLLM 0.33): one trainer rank sends, so ``"ipc"`` serves the one worker on the trainer's GPU (a
worker on another GPU is refused with its GPU named; use "nccl" for TP > 1). As in vLLM's own nccl engine, a
worker that refuses an update before its broadcast (bad update info) leaves the trainer in the collective
(gloo gives up after its timeout, NCCL never), and a refused init leaves it in the rendezvous until the
store's 10-minute timeout; vLLM then holds the update open, and its layerwise reload keeps layers not yet
loaded unusable until an update resends every weight.
"""
from __future__ import annotations

import base64
import datetime
import functools
import inspect
import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple  # module level: dataclasses reads
# ClassVar in the string annotations (from __future__ import annotations) through this module's namespace

from ._bucket import unpack_bucket
from ._engine_bucket import engine_entries

BACKEND = "mxfp8"  # the name the engines register under (WeightTransferConfig(backend=BACKEND))
TRANSPORTS = ("nccl", "gloo", "ipc")
_CLASSES = ("MXFP8WeightTransferInitInfo", "MXFP8WeightTransferUpdateInfo", "MXFP8WeightTransferEngine",
            "MXFP8TrainerInitInfo", "MXFP8TrainerWeightTransferEngine")
_STORE_TIMEOUT = datetime.timedelta(minutes=10)


def vllm_weights(bucket: Any, manifest: List[Mapping[str, Any]]) -> List[Tuple[str, Any]]:
    """The (name, tensor) pairs vLLM's MXFP8 linears load from one bucket (a 1-D uint8 torch tensor of
    mxfp8.iter_buckets / prepare_buckets, rowwise, compact scales): ``X.weight`` float8_e4m3fn and
    ``X.weight_scale`` uint8 compact E8M0 for every entry ``X`` / ``X.weight``, views of the bucket (no copy).

    The manifest is checked against the bucket first (mxfp8.unpack_bucket: the C library's check)."""
    entries = engine_entries(bucket, manifest, "vLLM", ".weight_scale",
                             "this engine hands vLLM MXFP8 linears (weight, weight_scale); vLLM's ModelOpt NVFP4 "
                             "layers also want input scales, which a bucket does not carry")
    parts = unpack_bucket(bucket, [entry for entry, _ in entries])  # views of the bucket
    pairs = []
    for entry, module in entries:
        if entry["fp8_dtype"] != "e4m3":
            raise ValueError(f"manifest entry {entry['name']!r} holds {entry['fp8_dtype']} values: vLLM's MXFP8 "
                             "weights are float8_e4m3fn")
        part = parts[entry["name"]]
        pairs += [(f"{module}.weight", part.values), (f"{module}.weight_scale", part.scales)]
    return pairs


def register() -> None:
    """Registers the "mxfp8" engines in vLLM's WeightTransferEngineFactory and WeightTransferTrainerFactory
    (by module path: the classes load when an engine is made). Call it in every vLLM process before the
    engine is created; the package's ``vllm.general_plugins`` entry point does, in all of them. A second call
    does nothing."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    for factory, class_name in ((WeightTransferEngineFactory, "MXFP8WeightTransferEngine"),
                                (WeightTransferTrainerFactory, "MXFP8TrainerWeightTransferEngine")):
        if BACKEND not in factory._registry:
            factory.register_engine(BACKEND, __name__, class_name)


def _plugin() -> None:
    """The package's ``vllm.general_plugins`` entry point: vLLM calls it in every process at startup, and a
    plugin that raises stops vLLM. So a vLLM without the weight-transfer framework (before 0.33) only says
    why the "mxfp8" backend is not there, and starts."""
    try:
        import vllm.distributed.weight_transfer.factory  # noqa: F401
    except ImportError as e:
        import logging

        logging.getLogger(__name__).warning("mxfp8: this vLLM has no weight-transfer framework (%s); the "
                                            "\"mxfp8\" backend is not registered", e)
        return
    register()


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _gloo_group(address: str, port: int, rank: int, world_size: int, store: Any = None) -> Any:
    """A ProcessGroupGloo of its own (not torch.distributed's default group, which vLLM's workers use),
    rank 0 hosting the TCPStore."""
    import torch.distributed as dist

    if store is None:
        store = dist.TCPStore(address, port, world_size, is_master=False, timeout=_STORE_TIMEOUT)
    return dist.ProcessGroupGloo(store, rank, world_size)


def _broadcast(group: Any, transport: str, tensor: Any) -> None:
    """`tensor` from rank 0 of `group` (vLLM's PyNcclCommunicator, or a ProcessGroupGloo)."""
    import torch

    if transport == "nccl":
        group.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
    else:
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = 0
        group.broadcast([tensor], options).wait()


def _check_int(where: str, info: Any, field: str, low: int, high: Optional[int] = None, why: str = "") -> None:
    value = getattr(info, field)
    if type(value) is not int:  # JSON may carry a string, a float or a bool here
        raise ValueError(f"{where}: {field} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ValueError(f"{where}: {field} must be {bounds}{why}, got {value}")


def _check_rendezvous(where: str, info: Any, worker: bool) -> None:
    if info.transport not in TRANSPORTS:
        raise ValueError(f"{where}: transport must be one of {TRANSPORTS}, got {info.transport!r}")
    if worker:
        _check_int(where, info, "rank_offset", 1, why=" (the trainer is rank 0)")
    if info.transport != "ipc":
        missing = [f for f in ("master_address", "master_port", "world_size") if getattr(info, f) is None]
        if missing:
            raise ValueError(f"{where}: transport {info.transport!r} needs {', '.join(missing)}")
        if not isinstance(info.master_address, str):
            raise ValueError(f"{where}: master_address must be a str, got {info.master_address!r}")
        # port 0: the trainer's own TCPStore (gloo) picks one and tells the workers; a worker is told that one
        _check_int(where, info, "master_port", 0 if info.transport == "gloo" and not worker else 1, 65535)
        _check_int(where, info, "world_size", 2, why=" (world_size counts the trainer and every worker)")


@functools.lru_cache(maxsize=None)
def _classes() -> Dict[str, type]:
    """The engine classes, made on first use over vLLM's base classes (imported here, not at import)."""
    from dataclasses import dataclass

    import torch

    from vllm.distributed.weight_transfer.base import (TrainerInitInfo, TrainerWeightTransferEngine,
                                                       WeightTransferEngine, WeightTransferInitInfo,
                                                       WeightTransferUpdateInfo)

    @dataclass(kw_only=True)
    class MXFP8WeightTransferInitInfo(WeightTransferInitInfo):
        """Worker-side init info: the transport and, for "nccl" / "gloo", the trainer's rendezvous (the
        trainer is rank 0; this worker's rank is rank_offset + its data-parallel index * TP*PP + its rank,
        as vLLM's nccl engine counts)."""

        transport: str = "nccl"
        master_address: Optional[str] = None
        master_port: Optional[int] = None
        rank_offset: int = 1
        world_size: Optional[int] = None

        def __post_init__(self) -> None:
            _check_rendezvous("MXFP8WeightTransferInitInfo", self, worker=True)

    @dataclass
    class MXFP8WeightTransferUpdateInfo(WeightTransferUpdateInfo):
        """One bucket: its manifest (a prepare_buckets plan's / iter_buckets'), its size in bytes, and for
        "ipc" its CUDA IPC handle per GPU UUID (torch's reduce_tensor args), under vLLM's ipc engine's keys:
        ``ipc_handles``, or ``ipc_handles_pickled`` (base64 of their pickle, what vLLM's HTTP client sends;
        read only with VLLM_ALLOW_INSECURE_SERIALIZATION=1, as vLLM's ipc engine reads it)."""

        manifest: List[Dict[str, Any]]
        bucket_bytes: int
        ipc_handles: Optional[Dict[str, tuple]] = None
        ipc_handles_pickled: Optional[str] = None

        def __post_init__(self) -> None:
            if not isinstance(self.manifest, list) or not self.manifest:
                raise ValueError("update_info['manifest'] must be the bucket's manifest, a non-empty list of "
                                 f"entries, got {self.manifest!r:.80}")
            # 0: a bucket of empty tensors only, which prepare_buckets makes (it travels with no IPC handle)
            if type(self.bucket_bytes) is not int or self.bucket_bytes < 0:
                raise ValueError(f"update_info['bucket_bytes'] must be an int >= 0, got {self.bucket_bytes!r}")
            if self.ipc_handles_pickled is not None:
                if self.ipc_handles is not None:
                    raise ValueError("update_info gives both ipc_handles and ipc_handles_pickled")
                if not int(os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION", "0")):  # vLLM's envs.py reading
                    raise ValueError("refusing to unpickle ipc_handles_pickled without "
                                     "VLLM_ALLOW_INSECURE_SERIALIZATION=1")
                self.ipc_handles = pickle.loads(base64.b64decode(self.ipc_handles_pickled))
                self.ipc_handles_pickled = None
            if self.ipc_handles is not None and not isinstance(self.ipc_handles, dict):
                raise ValueError("update_info['ipc_handles'] must map GPU UUIDs to rebuild_cuda_tensor args")

    class MXFP8WeightTransferEngine(WeightTransferEngine[MXFP8WeightTransferInitInfo,
                                                         MXFP8WeightTransferUpdateInfo]):
        """vLLM's worker side: each update_weights receives one bucket and loads its MXFP8 weights."""

        init_info_cls = MXFP8WeightTransferInitInfo
        update_info_cls = MXFP8WeightTransferUpdateInfo

        def __init__(self, config: Any, vllm_config: Any, device: Any, model: Any) -> None:
            super().__init__(config, vllm_config, device, model)
            self.transport: Optional[str] = None
            self.group: Any = None

        def init_transfer_engine(self, init_info: MXFP8WeightTransferInitInfo) -> None:
            self.shutdown()
            if init_info.transport != "ipc":  # as vLLM's nccl_common._worker_group_rank counts
                pc = self.parallel_config
                rank = init_info.rank_offset + pc.data_parallel_index * pc.world_size + pc.rank
                if rank >= init_info.world_size:
                    raise ValueError(
                        f"this worker is rank {rank} of the transfer group (rank_offset {init_info.rank_offset} + "
                        f"data-parallel index {pc.data_parallel_index} * TP*PP {pc.world_size} + rank {pc.rank}), "
                        f"past world_size {init_info.world_size}: world_size counts the trainer and every worker")
            if init_info.transport == "nccl":
                from vllm.distributed.weight_transfer.nccl_common import (NCCLWeightTransferInitInfo,
                                                                          worker_init_process_group)

                self.group = worker_init_process_group(NCCLWeightTransferInitInfo(
                    master_address=init_info.master_address, master_port=init_info.master_port,
                    rank_offset=init_info.rank_offset, world_size=init_info.world_size), self.parallel_config)
            elif init_info.transport == "gloo":
                self.group = _gloo_group(init_info.master_address, init_info.master_port, rank,
                                         init_info.world_size)
            self.transport = init_info.transport

        def start_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

            initialize_layerwise_reload(self.model)

        def finish_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

            finalize_layerwise_reload(self.model, self.model_config)

        def update_weights(self, update_info: Dict[str, Any]) -> None:
            """The base class's, with its final device synchronize only where there is an accelerator (the
            base calls torch.accelerator.synchronize(), which raises on a CPU-only host)."""
            self.receive_weights(self.parse_update_info(update_info))
            if torch.accelerator.is_available():
                torch.accelerator.synchronize()

        def _receive_bucket(self, info: MXFP8WeightTransferUpdateInfo) -> Any:
            if self.transport is None:
                raise RuntimeError("mxfp8 weight transfer not initialized: call init_transfer_engine first")
            if self.transport != "ipc":
                if info.ipc_handles is not None:
                    raise ValueError(f"update_info carries an IPC handle, but the transport is {self.transport!r}")
                # the trainer's own count first: the receive is the length the trainer sends whatever the
                # update info says (a collective of another length aborts gloo, and leaves NCCL hung or out
                # of step), and a wrong bucket_bytes is refused after it, the group still in step
                count = torch.empty(1, dtype=torch.int64, device=self.device)
                _broadcast(self.group, self.transport, count)
                sent = int(count.item())
                bucket = torch.empty(sent, dtype=torch.uint8, device=self.device)
                _broadcast(self.group, self.transport, bucket)
                if sent != info.bucket_bytes:
                    raise ValueError(f"the trainer sent a bucket of {sent} bytes, update_info['bucket_bytes'] "
                                     f"says {info.bucket_bytes}")
                return bucket
            if info.bucket_bytes == 0 and info.ipc_handles is None:  # no memory to share (CUDA IPC has none of 0 bytes)
                return torch.empty(0, dtype=torch.uint8, device=self.device)
            if info.ipc_handles is None:
                raise ValueError("transport 'ipc': update_info must carry the bucket's ipc_handles")
            from torch.multiprocessing.reductions import rebuild_cuda_tensor

            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            uuid = str(torch.cuda.get_device_properties(index).uuid)
            if uuid not in info.ipc_handles:
                raise ValueError(f"no IPC handle for this worker's GPU {uuid}; the handles are for "
                                 f"{list(info.ipc_handles)}")
            args = info.ipc_handles[uuid]
            wrong = ValueError(f"the IPC handle for this worker's GPU {uuid} is not torch's reduce_tensor args "
                               f"(rebuild_cuda_tensor's): {args!r:.80}")
            arity = len(inspect.signature(rebuild_cuda_tensor).parameters)
            if not isinstance(args, (list, tuple)) or len(args) != arity:
                raise wrong
            args = list(args)
            args[6] = index  # reduce_tensor's device index, the receiver's here (as vLLM's ipc engine does)
            try:
                shared = rebuild_cuda_tensor(*args)
            except TypeError as e:
                raise wrong from e
            if shared.dtype != torch.uint8 or shared.dim() != 1 or shared.numel() != info.bucket_bytes:
                raise ValueError(f"the IPC handle is a {shared.dtype} tensor of shape {tuple(shared.shape)}, "
                                 f"not the bucket of {info.bucket_bytes} bytes")
            return shared.clone()  # the trainer may refill its buffer once update_weights returned

        def receive_weights(self, update_info: MXFP8WeightTransferUpdateInfo) -> None:
            bucket = self._receive_bucket(update_info)
            weights = vllm_weights(bucket, update_info.manifest)
            from vllm.model_executor.model_loader.mtp_validation import disable_mtp_completeness_check

            with disable_mtp_completeness_check():
                self.model.load_weights(weights)

        def shutdown(self) -> None:
            group, self.group, self.transport = self.group, None, None
            if group is not None and hasattr(group, "destroy"):
                group.destroy()  # vLLM's PyNcclCommunicator; a ProcessGroupGloo goes with its last reference

    @dataclass
    class MXFP8TrainerInitInfo(TrainerInitInfo):
        """Trainer-side init info; the trainer is rank 0 of the transfer group (world_size: 1 + every
        worker). master_port 0 with "gloo": the trainer's TCPStore picks a free port and tells the workers."""

        backend: ClassVar[str] = BACKEND
        transport: str = "nccl"
        master_address: Optional[str] = None
        master_port: Optional[int] = None
        world_size: Optional[int] = None
        bucket_bytes: int = 1 << 28

        def __post_init__(self) -> None:
            _check_rendezvous("MXFP8TrainerInitInfo", self, worker=False)

    class MXFP8TrainerWeightTransferEngine(TrainerWeightTransferEngine[MXFP8TrainerInitInfo]):
        """The trainer side. ``source`` is the MXFP8 storage, name -> spec as mxfp8.prepare_buckets takes
        it (TE's data and scale_inv...), at fixed addresses; not a vLLM WeightSource, whose pairs are plain
        tensors. Only the sender (rank 0) holds the storage and sends; other trainer ranks do nothing."""

        init_info_cls = MXFP8TrainerInitInfo

        def __init__(self, *, client: Any, source: Any, is_sender: bool = True, rank: int = 0,
                     transport: str = "nccl", bucket_bytes: int = 1 << 28) -> None:
            super().__init__(client=client, source=None, is_sender=is_sender, rank=rank)
            from . import prepare_buckets

            self.transport, self.group = transport, None
            self.plans = prepare_buckets(source, bucket_bytes=bucket_bytes) if is_sender else []

        @classmethod
        def trainer_init(cls, init_info: MXFP8TrainerInitInfo, *, client: Any, source: Any = None
                         ) -> "MXFP8TrainerWeightTransferEngine":
            if not isinstance(source, Mapping):
                raise TypeError("the mxfp8 trainer engine's source is the MXFP8 storage, name -> spec as "
                                f"mxfp8.prepare_buckets takes it, got {type(source).__name__}")
            engine = cls(client=client, source=source, is_sender=init_info.is_sender, rank=init_info.rank,
                         transport=init_info.transport, bucket_bytes=init_info.bucket_bytes)
            if not engine.is_sender:
                return engine
            payload = {"transport": init_info.transport}
            if init_info.transport == "ipc":
                client.init_weight_transfer_engine(payload)
                return engine
            store = None
            if init_info.transport == "gloo":  # the store first: the workers connect to a listening port
                import torch.distributed as dist

                store = dist.TCPStore(init_info.master_address, init_info.master_port, init_info.world_size,
                                      is_master=True, wait_for_workers=False, timeout=_STORE_TIMEOUT)
            payload.update(master_address=init_info.master_address, world_size=init_info.world_size,
                           master_port=store.port if store is not None else init_info.master_port)
            with ThreadPoolExecutor(max_workers=1) as rpc:  # the workers join while the trainer does
                future = rpc.submit(client.init_weight_transfer_engine, payload)
                if store is not None:
                    engine.group = _gloo_group(init_info.master_address, store.port, 0, init_info.world_size, store)
                else:
                    from vllm.distributed.weight_transfer.nccl_common import trainer_init

                    engine.group = trainer_init(init_info)
                future.result()
            return engine

        def send_weights(self) -> None:
            """One update: start_weight_update, every bucket (filled by its plan, sent while the workers'
            update_weights receives it), finish_weight_update."""
            if not self.is_sender:
                return
            if self.transport != "ipc" and self.group is None:  # before any RPC: no worker waits on a broadcast
                raise RuntimeError("this mxfp8 trainer engine is shut down: make a new one with trainer_init")
            self.client.start_weight_update()
            for plan in self.plans:
                bucket = plan.run()  # on torch's current stream, which NCCL's broadcast follows
                info = {"manifest": plan.manifest, "bucket_bytes": int(bucket.numel())}
                if bucket.is_cuda and self.transport != "nccl":
                    torch.cuda.current_stream().synchronize()  # filled before gloo or another process reads it
                if self.transport == "ipc":
                    from torch.multiprocessing.reductions import reduce_tensor

                    if bucket.numel():  # a bucket of empty tensors only has no memory to share
                        uuid = str(torch.cuda.get_device_properties(bucket.device.index).uuid)
                        info["ipc_handles"] = {uuid: reduce_tensor(bucket)[1]}
                    self.client.update_weights(info)
                    continue
                rpc = ThreadPoolExecutor(max_workers=1)
                try:  # the workers' receive and this broadcast meet in the same collective
                    future = rpc.submit(self.client.update_weights, info)
                    if future.done():
                        future.result()  # refused before any collective: say so instead of hanging
                    count = torch.tensor([bucket.numel()], dtype=torch.int64, device=bucket.device)
                    _broadcast(self.group, self.transport, count)  # what the worker receives next
                    _broadcast(self.group, self.transport, bucket)
                    future.result()
                finally:
                    rpc.shutdown(wait=False)  # a failed broadcast leaves the worker in its collective
            self.client.finish_weight_update()

        def shutdown(self) -> None:
            group, self.group = self.group, None
            if group is not None and hasattr(group, "destroy"):
                group.destroy()

    classes = dict(locals())
    made = {}
    for name in _CLASSES:
        cls = classes[name]
        cls.__module__, cls.__qualname__ = __name__, name  # pickled by reference: mxfp8.vllm.<name>
        made[name] = cls
    return made
