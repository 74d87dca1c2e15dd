"""The trainer's side of an MXFP8 weight update into a running SGLang server (mxfp8.sglang).

SGLang serves an MXFP8 checkpoint (its Fp8LinearMethod with MXFP8: `weight` float8 [N, K] and
`weight_scale_inv` uint8 [N, K/32]); the trainer, on the same node, holds the same weights as MXFP8 storage
at fixed addresses and pushes each step through SGLang's own entry point, `POST /update_weights_from_tensor`
with `load_format="flattened_bucket"`: per bucket of mxfp8.iter_buckets (one launch fills it with many
tensors' values and compact E8M0 scales), the bucket itself and SGLang's FlattenedTensorMetadata for every
part (mxfp8.sglang.flattened_bucket: no copy), serialized once per TP rank by SGLang's
MultiprocessingSerializer (a CUDA tensor travels as an IPC handle, so the server must share the node):

    python -m sglang.launch_server --model-path ./ckpt --port 30000
    python examples/weight_sync/sglang_bucket.py --url http://localhost:30000 --checkpoint ./ckpt --tp 1 --steps 3

Each POST returns once SGLang loaded the bucket, so the next bucket may reuse its memory. The cache is
flushed after the last bucket of a step only. bindings/python/tests/test_sglang.py runs `sync` on the CPU,
each payload rebuilt by SGLang's own FlattenedTensorBucket and checked byte for byte.
"""
import argparse
import json
import time
import urllib.request

import torch

import mxfp8
import mxfp8.sglang


def sync(storage, post, metadata_type, serialize, tp_size=1, bucket_bytes=1 << 28):
    """One update: every bucket of `storage` (name -> MXFP8 spec, as iter_buckets takes it) posted as SGLang's
    flattened-bucket request body, post(route, body) returning once the server has loaded it (iter_buckets
    refills one buffer: the next bucket waits for that), then the cache flushed. Returns (buckets, bytes)."""
    count = sent = 0
    for bucket, manifest in mxfp8.iter_buckets(storage, bucket_bytes=bucket_bytes):
        payload = mxfp8.sglang.flattened_bucket(bucket, manifest, metadata_type)
        if bucket.is_cuda:
            torch.cuda.current_stream().synchronize()  # filled before the server reads it over IPC
        post("/update_weights_from_tensor",
             {"serialized_named_tensors": [serialize(payload, output_str=True) for _ in range(tp_size)],
              "load_format": "flattened_bucket", "flush_cache": False})
        count, sent = count + 1, sent + int(bucket.numel())
    post("/flush_cache", {})
    return count, sent


def http_post(url):
    """post(route, body) against an SGLang server; raises with the server's message on a refusal."""
    def post(route, body):
        request = urllib.request.Request(url + route, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            reply = response.read().decode()
        if route == "/update_weights_from_tensor" and not json.loads(reply).get("success"):
            raise RuntimeError(f"SGLang refused the update: {reply}")
    return post


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the SGLang server")
    parser.add_argument("--checkpoint", required=True, help="the MXFP8 checkpoint SGLang serves")
    parser.add_argument("--tp", type=int, default=1, help="SGLang's tensor-parallel size (one payload per rank)")
    parser.add_argument("--bucket-mb", type=float, default=256)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    from sglang.srt.utils.common import MultiprocessingSerializer
    from sglang.srt.weight_sync.tensor_bucket import FlattenedTensorMetadata

    import mxfp8.checkpoint

    loaded = mxfp8.checkpoint.load(args.checkpoint)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    storage = {name[:-len(".weight")]: {"data": parts.values.to(device), "scale_inv": parts.scales.to(device),
                                          "swizzled": False}
               for name, parts in loaded.tensors.items() if isinstance(parts, mxfp8.Components)}
    post = http_post(args.url)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()  # a trainer's step would requantize into `storage` here
        count, sent = sync(storage, post, FlattenedTensorMetadata, MultiprocessingSerializer.serialize, args.tp,
                           int(args.bucket_mb * 2**20))
        print(f"step {step}: {count} bucket(s), {sent / 2**20:.1f} MiB in {(time.perf_counter() - start) * 1e3:.1f} ms",
              flush=True)


if __name__ == "__main__":
    main()
