"""mxfp8.Plan, every prepared transfer: a fixed set of tensors checked once and moved at every step (into
compact scales, into buckets, into an engine's parameters), and the functions that make plans of exports."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from . import _args, _mxfp8
from ._api import _DIRECTIONS, _choice
from ._bucket import (_bucket_bytes, _compact_scales_shapes, _new_bucket, _planned_buckets, _prepare_fill,
                      _spec_handle, _spec_inputs, _specs, unpack_bucket)


class Plan:
    """A prepared transfer: the C library's mxfp8_plan (every check done once) and what it writes. Each
    ``run`` is one launch with no Python work per tensor, no allocation and no synchronization (capturable
    in a CUDA graph), moving the sources as they are at that moment.

    Made by prepare_export (compact scales), prepare_buckets (one plan per bucket), prepare_import_tensors
    and prepare_import_bucket (into the engine's parameters).

        plan = mxfp8.prepare_export(specs)         # checked once
        views = plan.views()                       # name -> compact scales, views of plan.buffer
        for step in range(steps):
            optimizer.step()
            plan.run()                             # every step: views[...] hold this step's scales

    The contract: the plan holds its sources (a reference on each tensor's buffers, so their memory can
    never be freed under it) and what it writes; their addresses must not change while it is used. A
    producer that reallocates a source (a new storage for a parameter) makes a new plan: this one would go
    on moving the old storage it keeps alive (it holds each torch tensor's storage, so ``t.data = x`` or
    ``t.set_(...)`` leaves the plan the old storage). A storage resized in place (torch's
    ``t.resize_`` past its size, ``t.untyped_storage().resize_(n)``) frees its old memory whoever holds it:
    ``run`` then raises a ValueError (each run compares the storages' addresses and sizes with the
    prepared ones: a storage resized away and back can return to its old address, smaller) and moves
    nothing; make a new plan.

    Attributes:
        buffer: what each run writes and returns: an export's `out`, a bucket's bytes (a view of the
            buffer the plans of prepare_buckets share); None for an import (it writes the caller's params).
        manifest: a bucket's manifest (the receiver's import_bucket / prepare_import_bucket take it), else
            None.
    """

    __slots__ = ("_core", "_cuda", "buffer", "manifest", "_views")

    def __init__(self, core: Any, cuda: bool, buffer: Any = None, manifest: Optional[List[Dict[str, Any]]] = None,
                 views: Optional[Dict[str, Any]] = None):
        self._core, self._cuda, self.buffer, self.manifest, self._views = core, cuda, buffer, manifest, views

    def run(self, stream: Any = None) -> Any:
        """Runs the transfer on `stream` (default: the framework's current stream for torch tensors, else
        the legacy default stream); the call does not wait: order the reader after it. Returns `buffer`.
        Threads may share a plan: this binding serialises its runs (overlapping runs of one plan would race
        on the same outputs; the C library leaves ordering them to the caller)."""
        self._core.run(None if stream is None else _args.stream_pointer(stream, None, None, self._cuda))
        return self.buffer

    def views(self) -> Dict[str, Any]:
        """name -> views of what each run writes, valid for the plan's life: an export's compact scales
        ((*shape[:-1], ceil(K/32)) rowwise, (ceil(M/32), K) columnwise), a bucket's unpack_bucket parts;
        an import's are the caller's own parameters ({}). A ValueError, as run() raises it, once a torch
        storage the plan writes was resized (the views would show freed memory)."""
        self._core.check_storages()
        if self._views is not None:
            return dict(self._views)
        return unpack_bucket(self.buffer, self.manifest) if self.manifest is not None else {}


def prepare_export(tensors: Mapping[str, Mapping[str, Any]], *, direction: str = "rowwise", out: Any = None) -> Plan:
    """The compact scales of many MXFP8 tensors, checked once: ``plan.run()`` writes them all in one launch
    into ``plan.buffer`` (`out`), back to back in the order of `tensors`; ``plan.views()`` gives each.

    Args:
        tensors: name -> {"data", "scale_inv", "swizzled", and optionally "fp8_dtype", "shape"}, as
            export_bucket takes them (whole MXFP8 tensors: a shard or an NVFP4 tensor travels in a bucket).
        direction: "rowwise" or "columnwise", for every tensor.
        out: a contiguous, writeable 1-D uint8 buffer on the tensors' device, at least the scales' size;
            None: a new one of exactly that size (torch.empty for torch inputs, numpy.empty for host memory).
    """
    specs = _specs(tensors, "export")
    dir_code = _choice("direction", direction, _DIRECTIONS)
    for spec in specs:
        if spec.nvfp4:
            raise ValueError(f"tensors[{spec.name!r}] is NVFP4: prepare_export exports MXFP8 scales; an NVFP4 tensor "
                             "travels in a bucket (prepare_buckets, iter_buckets) or through "
                             "mxfp8.nvfp4.export_components")
        if spec.shard is not None:
            raise ValueError(f"tensors[{spec.name!r}] has 'rows' / 'cols': prepare_export exports whole tensors' "
                             "scales; a shard travels in a bucket (prepare_buckets, iter_buckets)")
    inputs = _spec_inputs(specs, None)
    if out is not None:
        inputs.check_output("out", out)
    handles, shapes, offsets, at = [], [], [], 0
    for spec in specs:
        handles.append(_spec_handle(spec, dir_code, inputs, plan=True))
        shapes.append(_compact_scales_shapes(spec.shape)[dir_code])
        offsets.append(at)
        at += _args.numel(shapes[-1])
    if out is None:
        out = _new_bucket(inputs, specs, at, "out=: a CUDA buffer of")
    elif _bucket_bytes(out, "out") < at:  # said of `out`, not of the slices of it the library sees
        raise ValueError(f"out holds {_bucket_bytes(out)} bytes but the compact scales of these tensors take {at}")
    ends = [o + _args.numel(shape) for o, shape in zip(offsets, shapes)]
    core = _mxfp8.prepare_export(handles, [out[o:e] for o, e in zip(offsets, ends)], direction=dir_code,
                                 dlpack_stream=inputs.dlpack_stream,
                                 names=[f"out[{o}:{e}] (the scales of {s.where})" for o, e, s in zip(offsets, ends, specs)])
    views = {s.name: out[o:e].reshape(shape) for s, o, e, shape in zip(specs, offsets, ends, shapes)}
    return Plan(core, inputs.cuda, out, views=views)


def prepare_buckets(tensors: Mapping[str, Mapping[str, Any]], *, bucket_bytes: int, direction: str = "rowwise",
                    alignment: int = 256, buffer: Any = None) -> List[Plan]:
    """iter_buckets checked once: one Plan per bucket, each filling its group of tensors into the same
    `buffer` (``plans[i].buffer`` is ``buffer[:size of bucket i]``, ``plans[i].manifest`` what iter_buckets
    yields with it). A trainer sends the same weights from the same storage at every refit, and the
    receiver can prepare its side once too (mxfp8.prepare_import_bucket of each manifest):

        plans = mxfp8.prepare_buckets(tensors, bucket_bytes=1 << 30, buffer=ipc_buffer)
        send([p.manifest for p in plans])      # once: the receiver prepares one import per bucket
        for step in range(steps):
            optimizer.step()
            for plan in plans:
                plan.run()                     # this bucket in plan.buffer
                stream.synchronize(); send(); wait()

    Args:
        tensors, bucket_bytes, direction, alignment: as iter_buckets takes them (a spec with "rows" /
            "cols" fills its shard); the groups are the ones iter_buckets yields.
        buffer: the 1-D byte buffer every bucket is filled into, at least as large as the largest bucket;
            None: a new one of that size (torch.empty for torch inputs, numpy.empty for host memory).
    """
    specs = _specs(tensors, "export")
    dir_code = _choice("direction", direction, _DIRECTIONS)
    alignment = _args.power_of_two("alignment", alignment)
    bucket_bytes = _args.integer("bucket_bytes", bucket_bytes, 1)
    inputs = _spec_inputs(specs, None)
    if buffer is not None:
        inputs.check_output("buffer", buffer)
        _bucket_bytes(buffer, "buffer")  # 1-D bytes: each bucket is buffer[:total]
    planned = _planned_buckets(specs, direction, dir_code, alignment, bucket_bytes, inputs, plan=True)
    largest = max(total for _, _, _, total, _ in planned)
    if buffer is None:
        buffer = _new_bucket(inputs, specs, largest, "buffer=: a CUDA buffer of at least")
    elif _bucket_bytes(buffer) < largest:
        raise ValueError(f"buffer holds {_bucket_bytes(buffer)} bytes, the largest bucket needs {largest}: "
                         "make it at least bucket_bytes and as large as the largest tensor")
    return [Plan(_prepare_fill(handles, parts, total, buffer[:total], dir_code, inputs, "buffer", shards), inputs.cuda,
                 buffer[:total], manifest)
            for handles, manifest, parts, total, shards in planned]
