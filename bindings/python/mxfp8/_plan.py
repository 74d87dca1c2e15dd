"""Prepared exports: the compact scales of a fixed set of tensors, checked once, exported every step."""
from __future__ import annotations

from typing import Any, Dict, Mapping

from . import _args, _mxfp8
from ._api import _DIRECTIONS, _choice
from ._bucket import _compact_scales_shapes, _numel, _spec_handle, _spec_inputs, _specs


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
            at += _numel(shape)
        self.scales_bytes = at
        if out is None:
            if inputs.torch is not None:
                out = inputs.torch.empty(at, dtype=inputs.torch.uint8, device=specs[0].data.device)
            elif not inputs.cuda:
                import numpy

                out = numpy.empty(at, dtype=numpy.uint8)
            else:
                raise ValueError(f"pass out=: a CUDA buffer of {at} bytes (no torch to allocate one)")
        self.out = out
        self._offsets = offsets
        self._stream_of = lambda stream: _args.stream_pointer(stream, inputs.torch, out, inputs.cuda)
        destinations = [out[offsets[s.name]:offsets[s.name] + _numel(self._shapes[s.name])] for s in specs]
        self._plan = _mxfp8.PreparedExport(handles, destinations, direction=dir_code, dlpack_stream=inputs.dlpack_stream)

    def export(self, stream: Any = None) -> Any:
        """Writes every tensor's compact scales into `out`, as the sources hold them now. CUDA: queued on
        `stream` (default: the framework's current stream for torch inputs, else the legacy default
        stream), the call does not wait. Returns `out`."""
        self._plan.run(None if stream is None else self._stream_of(stream))
        return self.out

    def views(self) -> Dict[str, Any]:
        """name -> that tensor's compact scales, (*shape[:-1], ceil(K/32)) rowwise or (ceil(M/32), K)
        columnwise: views of `out`, valid for the plan's life and rewritten by every export()."""
        return {name: self.out[at:at + _numel(shape)].reshape(shape) for name, (at, shape) in
                ((n, (self._offsets[n], s)) for n, s in self._shapes.items())}
