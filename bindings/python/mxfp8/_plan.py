"""Prepared exports: a fixed set of tensors checked once and exported every step, as compact scales
(ExportPlan) or as buckets (BucketPlan)."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Tuple

from . import _args, _mxfp8
from ._api import _DIRECTIONS, _choice
from ._bucket import (_bucket_bytes, _bucket_groups, _compact_scales_shapes, _plan_bucket, _prepare_fill,
                      _spec_handle, _spec_inputs, _specs)


class Plan:
    """A prepared transfer: the C library's mxfp8_plan (every check done once) and what it writes. Each
    ``run`` is one launch with no Python work per tensor, no allocation and no synchronization (capturable
    in a CUDA graph). The plan holds its sources and destinations: their addresses must not change while
    it is used (a producer that reallocates a source makes a new plan).

    Made by mxfp8.prepare_import_tensors and mxfp8.prepare_import_bucket (into the engine's parameters)."""

    __slots__ = ("_core", "_cuda")

    def __init__(self, core: Any, cuda: bool):
        self._core, self._cuda = core, cuda

    def run(self, stream: Any = None) -> None:
        """Runs the transfer, as the sources hold them now, on `stream` (default: the framework's current
        stream for torch tensors, else the legacy default stream); the call does not wait. Threads may
        share a plan: its runs are serialised (the C library forbids overlapping runs of one plan)."""
        self._core.run(None if stream is None else _args.stream_pointer(stream, None, None, self._cuda))


def _new_bytes(inputs, specs, nbytes: int, what: str) -> Any:
    """A new uint8 buffer of `nbytes` where the tensors are: torch.empty for torch inputs, numpy.empty for
    host memory; other CUDA inputs must bring their own (`what` says which argument)."""
    if inputs.torch is not None:
        return inputs.torch.empty(nbytes, dtype=inputs.torch.uint8, device=specs[0].data.device)
    if not inputs.cuda:
        import numpy

        return numpy.empty(nbytes, dtype=numpy.uint8)
    raise ValueError(f"pass {what} {nbytes} bytes (no torch to allocate one)")


class ExportPlan:
    """The compact scales of many MXFP8 tensors, checked once and written at every step in one launch.

    A trainer exports the same weights from the same buffers at every refit (Megatron keeps MXFP8
    storage at fixed addresses for its CUDA graphs). ExportPlan does every check of the export when it is
    made; `export()` is then one launch with no Python work per tensor, no allocation and no
    synchronization, so it can run inside a captured CUDA graph.

        plan = mxfp8.ExportPlan({"w1": {"data": d1, "scale_inv": s1, "swizzled": True}, ...})
        views = plan.views()     # once: name -> compact scales (a view of plan.out)
        for step in range(steps):
            optimizer.step()
            plan.export()        # every step: views[...] now hold this step's scales

    Args:
        tensors: name -> {"data", "scale_inv", and optionally "fp8_dtype", "swizzled", "shape"}, as
            export_bucket takes them.
        direction: "rowwise" or "columnwise", for every tensor.
        out: a contiguous, writeable uint8 buffer of `scales_bytes` on the tensors' device that receives
            every tensor's compact scales back to back, in the order of `tensors`; None: a new one
            (torch.empty for torch inputs, numpy.empty for host memory).

    The contract: the plan holds the sources (a reference on each tensor's buffers, so their memory can
    never be freed under it) and `out`. A producer that reallocates a source (a new storage for a
    parameter) must make a new plan: this one would go on exporting the old storage it keeps alive.
    """

    def __init__(self, tensors: Mapping[str, Mapping[str, Any]], *, direction: str = "rowwise", out: Any = None):
        specs = _specs(tensors)
        if not specs:
            raise ValueError("tensors is empty: nothing to export")
        dir_code = _choice("direction", direction, _DIRECTIONS)
        for spec in specs:
            if spec.nvfp4:
                raise ValueError(f"tensors[{spec.name!r}] is NVFP4: ExportPlan exports MXFP8 scales; an NVFP4 tensor "
                                 "travels in a bucket (BucketPlan, iter_buckets) or through mxfp8.nvfp4.export_components")
            if spec.shard is not None:
                raise ValueError(f"tensors[{spec.name!r}] has 'rows' / 'cols': ExportPlan exports whole tensors' "
                                 "scales; a shard travels in a bucket (BucketPlan, iter_buckets)")
        inputs = _spec_inputs(specs, None)
        if out is not None:
            inputs.check_output("out", out)
        handles, self._shapes, offsets = [], {}, {}
        at = 0
        for spec in specs:
            handles.append(_spec_handle(spec, dir_code, inputs))
            shape = _compact_scales_shapes(spec.shape)[dir_code]
            self._shapes[spec.name] = shape
            offsets[spec.name] = at
            at += _args.numel(shape)
        self.scales_bytes = at
        if out is None:
            out = _new_bytes(inputs, specs, at, "out=: a CUDA buffer of")
        elif _bucket_bytes(out, "out") < at:  # said of `out`, not of the slices of it the library sees
            raise ValueError(f"out holds {_bucket_bytes(out)} bytes but the compact scales of these tensors "
                             f"take {at} (ExportPlan.scales_bytes)")
        self.out = out
        self._offsets = offsets
        self._stream_of = lambda stream: _args.stream_pointer(stream, inputs.torch, out, inputs.cuda)
        ends = {s.name: offsets[s.name] + _args.numel(self._shapes[s.name]) for s in specs}
        destinations = [out[offsets[s.name]:ends[s.name]] for s in specs]
        names = [f"out[{offsets[s.name]}:{ends[s.name]}] (the scales of {s.where})" for s in specs]
        self._plan = _mxfp8.prepare_export(handles, destinations, direction=dir_code,
                                           dlpack_stream=inputs.dlpack_stream, names=names)

    def export(self, stream: Any = None) -> Any:
        """Writes every tensor's compact scales into `out`, as the sources hold them now. CUDA: queued on
        `stream` (default: the framework's current stream for torch inputs, else the legacy default
        stream), the call does not wait. Returns `out`."""
        self._plan.run(None if stream is None else self._stream_of(stream))
        return self.out

    def views(self) -> Dict[str, Any]:
        """name -> that tensor's compact scales, (*shape[:-1], ceil(K/32)) rowwise or (ceil(M/32), K)
        columnwise: views of `out`, valid for the plan's life and rewritten by every export()."""
        return {name: self.out[at:at + _args.numel(shape)].reshape(shape) for name, (at, shape) in
                ((n, (self._offsets[n], s)) for n, s in self._shapes.items())}


class BucketPlan:
    """iter_buckets checked once: the same groups of tensors filled into the same buffer at every step,
    each fill one launch with no Python work per tensor, no allocation and no synchronization (so a
    fill can be captured in a CUDA graph).

    A trainer sends the same weights from the same storage at every refit, and the receiver can prepare
    its side once too (mxfp8.prepare_import_bucket of each manifest, into its parameters):

        plan = mxfp8.BucketPlan(tensors, bucket_bytes=1 << 30, buffer=ipc_buffer)
        send(plan.manifests)                           # once: the receiver prepares one import per bucket
        for step in range(steps):
            optimizer.step()
            for i in range(len(plan)):
                plan.fill(i)                           # bucket i in buffer[:plan.sizes[i]]
                stream.synchronize(); send(i); wait()  # the receiver runs its import plan i

    Args:
        tensors, bucket_bytes, direction, alignment: as iter_buckets takes them (a spec with "rows" /
            "cols" fills its shard, mxfp8_transfer_prepare with the shards); the groups are the ones iter_buckets
            yields, and `manifests[i]` is what it yields with bucket i.
        buffer: the 1-D byte buffer every bucket is filled into, at least as large as the largest
            bucket (`max(plan.sizes)`); None: a new one of that size (torch.empty for torch inputs,
            numpy.empty for host memory).

    The contract is ExportPlan's: the plan holds the sources and `buffer`; a producer that reallocates
    a source must make a new plan.
    """

    def __init__(self, tensors: Mapping[str, Mapping[str, Any]], *, bucket_bytes: int, direction: str = "rowwise",
                 alignment: int = 256, buffer: Any = None):
        specs = _specs(tensors)
        if not specs:
            raise ValueError("tensors is empty: nothing to export")
        dir_code = _choice("direction", direction, _DIRECTIONS)
        alignment = _args.power_of_two("alignment", alignment)
        bucket_bytes = _args.integer("bucket_bytes", bucket_bytes, 1)
        inputs = _spec_inputs(specs, None)
        if buffer is not None:
            inputs.check_output("buffer", buffer)
        planned = [_plan_bucket(group, direction, dir_code, alignment, inputs)
                   for group in _bucket_groups(specs, dir_code, alignment, bucket_bytes)]
        self.manifests: List[List[Dict[str, Any]]] = [manifest for _, manifest, _, _, _ in planned]
        self.sizes: List[int] = [total for _, _, _, total, _ in planned]
        largest = max(self.sizes)
        if buffer is None:
            buffer = _new_bytes(inputs, specs, largest, "buffer=: a CUDA buffer of at least")
        elif _args.numel(buffer.shape) < largest:
            raise ValueError(f"buffer holds {_args.numel(buffer.shape)} bytes, the largest bucket needs {largest}: "
                             "make it at least bucket_bytes and as large as the largest tensor")
        self.buffer = buffer
        self._stream_of = lambda stream: _args.stream_pointer(stream, inputs.torch, buffer, inputs.cuda)
        self._fills = [_prepare_fill(handles, entries, buffer[:total], dir_code, inputs, "buffer", shards)
                       for handles, _, entries, total, shards in planned]

    def __len__(self) -> int:
        return len(self._fills)

    def fill(self, index: int, stream: Any = None) -> Any:
        """Fills bucket `index` (values and compact scales of its tensors, as the sources hold them now)
        into buffer[:sizes[index]] and returns that view. CUDA: queued on `stream` (default: the
        framework's current stream for torch inputs, else the legacy default stream), the call does not
        wait: order the reader after it."""
        if not isinstance(index, int) or isinstance(index, bool) or not -len(self) <= index < len(self):
            raise IndexError(f"bucket index {index!r} is out of range: the plan has {len(self)} buckets")
        self._fills[index].run(None if stream is None else self._stream_of(stream))
        return self.buffer[:self.sizes[index]]

    def __iter__(self) -> Iterator[Tuple[Any, List[Dict[str, Any]]]]:
        """(bucket, manifest) for each bucket in turn, filled as it is reached (as iter_buckets does):
        send or copy each before asking for the next."""
        for i, manifest in enumerate(self.manifests):
            yield self.fill(i), manifest
