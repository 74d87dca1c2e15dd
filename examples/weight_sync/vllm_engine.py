"""The trainer's side of vLLM's weight transfer with the "mxfp8" engine (mxfp8.vllm).

vLLM serves an MXFP8 checkpoint (compressed-tensors mxfp8-quantized, e.g. one mxfp8.checkpoint.save wrote,
or ModelOpt MXFP8) with the engine; the mxfp8 package installed next to vLLM registers it in every vLLM
process (its vllm.general_plugins entry point calls mxfp8.vllm.register):

    vllm serve ./ckpt --weight-transfer-config '{"backend": "mxfp8"}'

The trainer holds the same weights as MXFP8 storage at fixed addresses (here the checkpoint's own, read with
mxfp8.checkpoint.load; a "step" adds noise to their float32 values and requantizes into that storage),
opens the transfer group through vLLM's HTTP client and pushes each step: start_weight_update, one
update_weights per bucket (its manifest; the bytes over NCCL), finish_weight_update:

    python examples/weight_sync/vllm_engine.py --url http://localhost:8000 --checkpoint ./ckpt \\
        --transport nccl --master-address 127.0.0.1 --master-port 29600 --world-size 2 --steps 3

--world-size is 1 + the number of vLLM workers (TP x PP x DP). --transport ipc when the trainer shares the
GPU with vLLM (vLLM's HTTP client pickles the IPC handles: start the server with
VLLM_ALLOW_INSECURE_SERIALIZATION=1). bindings/python/tests/test_vllm_engine.py runs `sync` on the CPU: a
gloo group, a worker engine made by vLLM's factory in the same process, its model checked byte for byte.
"""
import argparse
import time

import torch

import mxfp8
import mxfp8.vllm


class Storage:
    """MXFP8 storage (values, compact scales) at fixed addresses and the float32 weights it quantizes."""

    def __init__(self, components, device="cpu"):
        self.specs, self.masters = {}, {}
        for name, (values, scales) in components.items():
            values, scales = values.to(device), scales.to(device)
            self.specs[name] = {"data": values, "scale_inv": scales, "swizzled": False}
            self.masters[name] = mxfp8.dequantize(values, scales, swizzled=False)

    def step(self, generator, scale=1e-3):
        """An optimizer step stand-in: noise on every weight, requantized into the same storage."""
        for name, master in self.masters.items():
            noise = torch.randn(master.shape, generator=generator).to(master.device)
            master += scale * master.abs().mean() * noise
            q = mxfp8.quantize(master)  # TE's numerics, compact scales
            self.specs[name]["data"].copy_(q.rowwise_data)
            self.specs[name]["scale_inv"].copy_(q.rowwise_scale_inv)


def sync(client, storage, init_info, steps, seed=0, on_step=None):
    """Opens the transfer (vLLM's trainer factory makes the mxfp8 engine, which initializes the workers'
    engines through `client`), then `steps` times: a step, then send_weights. on_step(step) runs after each."""
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

    mxfp8.vllm.register()
    trainer = WeightTransferTrainerFactory.trainer_init(init_info, client=client, source=storage.specs)
    generator = torch.Generator().manual_seed(seed)
    try:
        for step in range(1, steps + 1):
            storage.step(generator)
            start = time.perf_counter()
            trainer.send_weights()
            size = sum(int(plan.buffer.numel()) for plan in trainer.plans)
            print(f"step {step}: {len(trainer.plans)} bucket(s), {size / 2**20:.1f} MiB in "
                  f"{(time.perf_counter() - start) * 1e3:.1f} ms", flush=True)
            if on_step is not None:
                on_step(step)
    finally:
        trainer.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the vLLM server (its RLHF weight-sync routes)")
    parser.add_argument("--checkpoint", required=True, help="the MXFP8 checkpoint vLLM serves")
    parser.add_argument("--transport", choices=mxfp8.vllm.TRANSPORTS, default="nccl")
    parser.add_argument("--master-address", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29600)
    parser.add_argument("--world-size", type=int, default=2, help="1 + vLLM's workers")
    parser.add_argument("--bucket-mb", type=float, default=256)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    from vllm.distributed.weight_transfer import HTTPVLLMWeightSyncClient

    import mxfp8.checkpoint

    loaded = mxfp8.checkpoint.load(args.checkpoint)
    components = {name[:-len(".weight")]: parts for name, parts in loaded.tensors.items()
                  if isinstance(parts, mxfp8.Components)}
    storage = Storage(components, "cuda" if torch.cuda.is_available() else "cpu")
    rendezvous = {} if args.transport == "ipc" else dict(
        master_address=args.master_address, master_port=args.master_port, world_size=args.world_size)
    init_info = mxfp8.vllm.MXFP8TrainerInitInfo(rank=0, transport=args.transport,
                                                bucket_bytes=int(args.bucket_mb * 2**20), **rendezvous)
    sync(HTTPVLLMWeightSyncClient(args.url), storage, init_info, args.steps)


if __name__ == "__main__":
    main()
