"""Weight sync over torch.distributed: a trainer broadcasts buckets to receivers in the caller's own
process group (NCCL for CUDA tensors, gloo for CPU tensors; gloo moves CUDA tensors too).

    # the trainer (one rank)                          # every receiver (the other ranks)
    sender = mxfp8.distributed.Sender(storage,         receiver = mxfp8.distributed.Receiver(params,
                                      bucket_bytes=1 << 28)                                shards=my_shards)
    sender.connect(group)                              receiver.connect(group)
    for step in range(steps):                          while training:
        optimizer.step(); requantize(storage)              step = receiver.receive()
        sender.send()

`connect` sends the manifests once (a broadcast object) and every receiver checks its parameters against
them: a receiver whose model differs fails there, naming the first mismatched tensor, before any byte is
written, and the sender fails with it. Each `send` is then only bytes: bucket k+1 is filled (one launch,
prepare_buckets) while bucket k is on the wire (two buffers), and a commit (the step number) follows the last.

**An update is all or nothing per step.** A receiver takes a step's buckets into a staging buffer (the
model's bytes on the wire: the sum of the bucket sizes, on its device) and imports them into its
parameters (one prepared launch for the whole step, checked as one transfer: no two tensors of any buckets
may write the same bytes) only once the sender's commit for that step has arrived. A step cut short (a
rank killed, a link lost) raises SyncError on every live rank within the group's timeout, and every
receiver's parameters stay those of its last complete step (``receiver.step``); so does a step whose import
is refused before it writes (a parameter's storage resized since connect).

**Rejoining.** A torch.distributed group does not survive a lost rank: after a SyncError the ranks make a
new group (``dist.destroy_process_group()``, then ``init_process_group`` on a new store prefix, a
restarted receiver among them) and call ``connect(new_group)`` again; the sender goes on with its next
step, and a restarted receiver is current from its first ``receive``. A receiver hears of a lost rank only
when its own wait times out, up to the group's timeout after the sender heard of it: give the new group's
rendezvous longer than that (the test's ranks first meet on the store, for up to a minute). examples/weight_sync/dist_sync.py
shows it under torchrun; bindings/python/tests/test_distributed.py kills and restarts a receiver.

Ranks: the sender broadcasts from its own rank (``src``, a global rank, default 0); every rank of the group
other than ``src`` must be a Receiver. Tensor parallelism: every receiver gets whole buckets and imports
its own shard (``shards=``, as import_bucket takes it).
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Mapping, Optional

from ._import import prepare_import_bucket
from ._plan import prepare_buckets

PROTOCOL = 1  # the handshake's version; a receiver refuses another
_STAGING_ALIGNMENT = 256  # each bucket's place in a receiver's staging buffer (an NVFP4 amax reads as float32)


class SyncError(RuntimeError):
    """A weight sync that did not happen: a step cut short (the receivers keep their last complete step), or
    a receiver whose model does not match the sender's manifests (nothing was written)."""


def _dist():
    import torch.distributed as dist

    if not dist.is_initialized():
        raise SyncError("torch.distributed is not initialized: call dist.init_process_group first")
    return dist


def _torch():
    import torch

    return torch


def _group_of(dist, group: Any) -> Any:
    """The process group a call runs on: `group`, or the default group as it is now (a new object after
    destroy_process_group and init_process_group)."""
    return group if group is not None else dist.group.WORLD


def _check_group(dist, connected: Any, group: Any, who: str) -> None:
    """A sender or receiver runs only on the group it connected on (`connected`, a weak reference: holding
    the group would keep a destroyed one's connections open, and its peers would wait out the timeout for
    a close): a stale one's broadcasts on a new default group did not match its peers' handshake, and gloo
    aborted the peer's process."""
    if connected is None or connected() is not _group_of(dist, group):
        raise SyncError(f"{who}: the process group it connected on is gone (destroy_process_group, or a new "
                        "default group): connect again on the new one")


class Sender:
    """The trainer's side: `tensors` (name -> bucket spec, as prepare_buckets and iter_buckets take them: MXFP8
    or NVFP4 storage, torch tensors on the device the group moves) broadcast in buckets at every `send`.

    Args:
        tensors: name -> {"data", "scale_inv", "swizzled", ...} (export_bucket's specs), at fixed addresses:
            each step requantizes into the same storage (a new storage needs a new Sender).
        bucket_bytes: the largest bucket (a tensor larger than that travels alone).
        alignment: every part's offset in a bucket, a power of two.

    Holds two bucket buffers of the largest bucket's size: bucket k+1 is filled while bucket k is sent.
    """

    def __init__(self, tensors: Mapping[str, Mapping[str, Any]], *, bucket_bytes: int = 1 << 28,
                 alignment: int = 256):
        torch = _torch()
        # Two buffers, the same groups: plans[slot][k] fills bucket k into buffer `slot`.
        self._plans = [prepare_buckets(tensors, bucket_bytes=bucket_bytes, alignment=alignment) for _ in range(2)]
        if not isinstance(self._plans[0][0].buffer, torch.Tensor):
            raise TypeError("Sender's tensors must be torch tensors (torch.distributed moves torch tensors): wrap "
                            "NumPy storage with torch.from_numpy, which shares its memory")
        self.manifests: List[List[Dict[str, Any]]] = [plan.manifest for plan in self._plans[0]]
        self.sizes: List[int] = [int(plan.buffer.numel()) for plan in self._plans[0]]
        self.step = 0  # the last step sent whole
        self._group, self._src, self._connected = None, None, None

    def connect(self, group: Any = None) -> None:
        """Sends the manifests to every receiver of `group` (None: the default group) and waits for their
        verdicts: raises SyncError naming each receiver that refused and why (its first mismatched
        tensor). Call it again with a new group after a SyncError."""
        dist = _dist()
        self._src = None  # not connected until every receiver has agreed
        src = dist.get_rank()
        hello = {"protocol": PROTOCOL, "src": src, "step": self.step, "manifests": self.manifests,
                 "sizes": self.sizes}
        try:
            dist.broadcast_object_list([hello], src=src, group=group)
            verdicts = [None] * dist.get_world_size(group)
            dist.all_gather_object(verdicts, None, group=group)
        except Exception as err:  # the group broke under us
            raise SyncError(f"connect: the group failed during the handshake ({err})") from err
        refused = [v for v in verdicts if v is not None]
        if refused:
            raise SyncError("connect: " + "; ".join(refused))
        self._group, self._src, self._connected = group, src, weakref.ref(_group_of(dist, group))

    def send(self) -> int:
        """Broadcasts the storage as it is now, bucket by bucket, then the commit of step `self.step + 1`;
        returns that step. CUDA storage: the fills are queued on torch's current stream, which the
        broadcasts follow. Raises SyncError when the group fails (a receiver gone, the timeout hit): the
        step did not happen for anyone, and `self.step` stays."""
        if self._src is None:
            raise SyncError("send before connect: the receivers have not had the manifests")
        dist, torch = _dist(), _torch()
        _check_group(dist, self._connected, self._group, "send")
        step = self.step + 1
        pending = [None, None]  # the broadcast in flight from each buffer
        bucket = 0
        try:
            for bucket in range(len(self.sizes)):
                slot = bucket % 2
                if pending[slot] is not None:  # its buffer is still on the wire
                    pending[slot].wait()
                view = self._plans[slot][bucket].run()
                pending[slot] = dist.broadcast(view, src=self._src, group=self._group, async_op=True)
            for work in pending:
                if work is not None:
                    work.wait()
            bucket = len(self.sizes)
            commit = torch.tensor([step, len(self.sizes), PROTOCOL], dtype=torch.int64,
                                  device=self._plans[0][0].buffer.device)
            dist.broadcast(commit, src=self._src, group=self._group)
        except Exception as err:
            self._src = None  # the group is broken: connect again, on a new one
            where = f"bucket {bucket} of {len(self.sizes)}" if bucket < len(self.sizes) else "its commit"
            raise SyncError(f"step {step} failed at {where} ({err}); no receiver took it: they keep step "
                            f"{self.step}") from err
        self.step = step
        return step


def _check_hello(hello: Dict[str, Any]) -> Optional[str]:
    """What is wrong with the sender's handshake beyond its manifests' entries (the library checks those), or
    None: a bucket size per manifest (sizes one short left the last bucket's tensors out of every import,
    their parameters never updated without a word), each a non-negative int, and the sender's step an int."""
    manifests, sizes, step = hello.get("manifests"), hello.get("sizes"), hello.get("step")
    if not isinstance(manifests, list) or not all(isinstance(m, list) for m in manifests):
        return f"the sender's manifests are not a list of manifests: {manifests!r:.80}"
    if not isinstance(sizes, list) or len(sizes) != len(manifests):
        return f"the sender gives {len(manifests)} manifests but bucket sizes {sizes!r:.80}: one size per bucket"
    bad = [v for v in sizes + [step] if type(v) is not int or v < 0]
    if bad:
        return f"the sender's bucket sizes {sizes!r:.80} and step {step!r} must be non-negative ints (not {bad[0]!r})"
    return None


class Receiver:
    """An inference rank's side: every bucket of a step into a staging buffer, then, once the sender's
    commit arrives, into `params` (as import_bucket writes them: MXFP8 (values, scales[, layout]), NVFP4
    (values, scales, global_scale[, layout])), this rank's shard of each tensor when `shards` says so.

    Args:
        params: name -> the engine's parameter buffers; every tensor the sender sends, and no other.
            connect() prepares the import into these buffers: an entry replaced afterwards (params[name] =
            new tensors) is not written; connect again (on a new group) to write into the new ones.
        shards: name -> {"rows", "cols"}: this rank's shard of a tensor sent whole (tensor parallelism).
        layout, global_scale, zero_exponent_as_one: as import_bucket takes them.
        device: where the staging buffer lives: "cpu" for gloo on host memory, "cuda" (the current device)
            for NCCL; None: the device of the first parameter that is a torch tensor, else "cpu".
    """

    def __init__(self, params: Mapping[str, Any], *, shards: Optional[Mapping[str, Mapping[str, Any]]] = None,
                 layout: str = "compact", global_scale: str = "decode", zero_exponent_as_one: bool = False,
                 device: Any = None):
        self.params = params
        self.shards = shards or {}
        self._options = dict(layout=layout, global_scale=global_scale, zero_exponent_as_one=zero_exponent_as_one)
        self._device = device
        self.step = 0  # the step the parameters hold (0: none received yet)
        self._group, self._src, self._connected = None, None, None
        self._plan: Any = None

    def _staging_device(self):
        torch = _torch()
        if self._device is not None:
            return torch.device(self._device)
        for p in self.params.values():
            if isinstance(p[0], torch.Tensor):
                return p[0].device
        return torch.device("cpu")

    def _check_names(self, manifests: List[List[Dict[str, Any]]]) -> Optional[str]:
        if not isinstance(self.params, Mapping):
            return f"params must be a dict name -> parameter buffers, got {type(self.params).__name__}"
        sent = [e["name"] for manifest in manifests for e in manifest]
        for name in sent:
            if name not in self.params:
                return f"the sender's tensor {name!r} has no parameter here"
            p = self.params[name]
            if not isinstance(p, (tuple, list)) or not 2 <= len(p) <= 4:
                return (f"params[{name!r}] must be (values, scales[, layout]), or (values, scales, global_scale"
                        f"[, layout]) for NVFP4, got {type(p).__name__} of {len(p) if hasattr(p, '__len__') else '?'}")
        unsent = [name for name in self.params if name not in set(sent)]
        if unsent:
            return f"parameter {unsent[0]!r} is not among the sender's tensors (it would never be updated)"
        unknown = [name for name in self.shards if name not in set(sent)]
        if unknown:
            return f"shards names {unknown[0]!r}, which the sender does not send"
        return None

    @staticmethod
    def _placed(manifest: List[Dict[str, Any]], offset: int) -> List[Dict[str, Any]]:
        """`manifest`'s entries with their parts at their bytes in the staging buffer (bucket at `offset`):
        checked against their own bucket already, so each offset is an int."""
        keys = ("values_offset", "scales_offset", "amax_offset")
        return [dict(e, **{k: e[k] + offset for k in keys if k in e}) for e in manifest]

    def _prepare(self, bucket: Any, manifest: List[Dict[str, Any]]) -> Any:
        shards = {e["name"]: self.shards[e["name"]] for e in manifest if e["name"] in self.shards} or None
        return prepare_import_bucket(bucket, manifest, self.params, shards=shards, **self._options)

    def _first_refusal(self, bucket: Any, manifest: List[Dict[str, Any]], err: Exception) -> str:
        """The library refused a bucket's import; its message counts entries of that bucket. Each entry is
        tried alone (a manifest of one entry over the same bytes) to name the first tensor refused."""
        for entry in manifest:
            try:
                self._prepare(bucket, [entry])
            except Exception as alone:
                return f"tensor {entry['name']!r}: {type(alone).__name__}: {alone}"
        return f"{type(err).__name__}: {err}"

    def connect(self, group: Any = None, src: int = 0) -> None:
        """Receives the manifests from the sender (global rank `src`) of `group`, checks every parameter
        against them and prepares the imports (nothing is written), and reports to the sender. Raises
        SyncError naming the first mismatched tensor, on this rank and on the sender."""
        dist, torch = _dist(), _torch()
        self._src = None  # not connected until the handshake has passed
        hello = [None]
        try:
            dist.broadcast_object_list(hello, src=src, group=group)
        except Exception as err:
            raise SyncError(f"connect: the group failed during the handshake ({err})") from err
        hello = hello[0]
        plan, staging, offsets = None, None, []
        try:  # every failure here becomes this rank's verdict: the other ranks hear it instead of timing out
            verdict = None
            if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL:
                verdict = (f"the sender speaks protocol {hello.get('protocol') if isinstance(hello, dict) else hello!r}, "
                           f"this receiver {PROTOCOL}")
            else:
                verdict = _check_hello(hello) or self._check_names(hello["manifests"])
            if verdict is None:
                sizes = hello["sizes"]
                at = 0
                for size in sizes:
                    at = -(-at // _STAGING_ALIGNMENT) * _STAGING_ALIGNMENT
                    offsets.append(at)
                    at += size
                staging = torch.empty(at, dtype=torch.uint8, device=self._staging_device())
                for manifest, offset, size in zip(hello["manifests"], offsets, sizes):
                    try:  # each bucket's manifest against its own bytes (the library's checks of a bucket)
                        self._prepare(staging[offset:offset + size], manifest)
                    except Exception as err:  # the library's check, said of the tensor that fails it
                        verdict = self._first_refusal(staging[offset:offset + size], manifest, err)
                        break
                if verdict is None:
                    # Then the whole step as one transfer over the staging buffer: the checks across buckets
                    # (two tensors written into the same parameter bytes), and one run that writes nothing
                    # unless it can write everything.
                    step = [e for manifest, offset in zip(hello["manifests"], offsets)
                            for e in self._placed(manifest, offset)]
                    try:
                        plan = self._prepare(staging, step)
                    except Exception as err:  # its message names the entries (import_bucket's)
                        verdict = f"{type(err).__name__}: {err}"
        except Exception as err:
            verdict = f"{type(err).__name__}: {err}"
        if verdict is not None:
            verdict = f"rank {dist.get_rank()} refused the sender's manifests: {verdict}"
        try:
            verdicts = [None] * dist.get_world_size(group)
            dist.all_gather_object(verdicts, verdict, group=group)
        except Exception as err:
            raise SyncError(f"connect: the group failed during the handshake ({err})") from err
        if verdict is not None:
            raise SyncError(verdict + "; nothing was written")
        refused = [v for v in verdicts if v is not None]
        if refused:  # another rank refused: the sender will not send
            raise SyncError("connect: " + "; ".join(refused))
        self._group, self._src, self._connected = group, src, weakref.ref(_group_of(dist, group))
        self._plan, self._staging, self._offsets, self._sizes = plan, staging, offsets, hello["sizes"]
        self._sender_step = hello["step"]

    def _receive_bucket(self, index: int) -> Any:
        """Starts the receipt of bucket `index` into its staging slot; returns the pending work."""
        view = self._staging[self._offsets[index]:self._offsets[index] + self._sizes[index]]
        return _dist().broadcast(view, src=self._src, group=self._group, async_op=True)

    def receive(self) -> int:
        """Receives one step: every bucket, then the commit, then the import of all of them into the
        parameters (queued on torch's current stream for CUDA parameters). Returns the step now held.
        Raises SyncError when the step is cut short: the parameters keep `self.step`."""
        if self._src is None:
            raise SyncError("receive before connect: this receiver has not had the sender's manifests")
        dist, torch = _dist(), _torch()
        _check_group(dist, self._connected, self._group, "receive")
        bucket = 0
        try:
            pending = []
            for bucket in range(len(self._sizes)):
                pending.append(self._receive_bucket(bucket))
            for bucket, work in enumerate(pending):
                work.wait()
            bucket = len(self._sizes)
            commit = torch.empty(3, dtype=torch.int64, device=self._staging.device)
            dist.broadcast(commit, src=self._src, group=self._group)
            step, count, protocol = (int(v) for v in commit.tolist())
        except Exception as err:
            self._src = None  # the group is broken: connect again, on a new one
            where = f"bucket {bucket} of {len(self._sizes)}" if bucket < len(self._sizes) else "the commit"
            raise SyncError(f"step {self._sender_step + 1} was cut short at {where} ({err}); the parameters "
                            f"keep step {self.step}") from err
        if count != len(self._sizes) or protocol != PROTOCOL or step != self._sender_step + 1:
            self._src = None  # out of step with the sender: connect again
            raise SyncError(f"the commit says step {step} of {count} buckets (protocol {protocol}), this receiver "
                            f"expected step {self._sender_step + 1} of {len(self._sizes)}: the parameters keep "
                            f"step {self.step}; connect again")
        self._sender_step = step  # taken off the wire, whatever its import does
        try:
            self._plan.run()  # checks every parameter's storage before it writes any
        except Exception as err:
            self._src = None  # the plan is of parameters that moved: connect again (a new plan)
            raise SyncError(f"step {step} arrived but its import was refused ({type(err).__name__}: {err}); the "
                            f"parameters keep step {self.step}; connect again") from err
        self.step = step
        return step
