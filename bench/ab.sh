#!/usr/bin/env bash
# A/B of the scale kernels on one machine: builds bench_scales from two source trees and runs them
# alternately, so machine-to-machine spread (larger than run-to-run, see README) cancels out.
#   OUT=dir bash bench/ab.sh A_DIR B_DIR [ROUNDS]
# A_DIR / B_DIR: repository roots (e.g. `git archive <rev> | tar -x -C .ab/base`, carried to the device
# in an ignored folder). Writes $OUT/ab-{a,b}-<round>.json (bench_scales' JSON) and prints a summary.
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
: "${OUT:?set OUT}"
dl=()
[ -d "$PWD/.carry/dlpack" ] && dl=(-DDLPACK_INCLUDE_DIR="$PWD/.carry/dlpack")
for side in a b; do
  src=$([ $side = a ] && echo "$a" || echo "$b")
  cmake -S "$src" -B "/tmp/ab-build-$side" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXFP8_BUILD_TESTS=OFF \
    -DMXFP8_BUILD_EXAMPLES=OFF "${dl[@]}" >/dev/null
  cmake --build "/tmp/ab-build-$side" -j "$(nproc)" --target bench_scales | tail -1
done
for r in $(seq 1 "$rounds"); do
  for side in a b; do "/tmp/ab-build-$side/bench/bench_scales" >"$OUT/ab-$side-$r.json"; done
done
python3 - "$OUT" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for side in "ab":
    runs = [json.load(open(f"{out}/ab-{side}-{r}.json")) for r in range(1, rounds + 1)]
    big = [s["unswizzle_ms"] / s["copy_ms"] for r in runs for k, s in r["shapes"].items()]
    print(side, "model ms", [r["whole_model"]["ms"] for r in runs], "copy", [r["whole_model"]["copy_ms"] for r in runs])
    print(side, "moe ms", [r["moe"]["ms"] for r in runs], "copy", [r["moe"]["copy_ms"] for r in runs])
    for part in ("whole_model", "moe"):
        if "gpu_ms" in runs[0][part]:
            print(side, part, "gpu ms", [r[part]["gpu_ms"] for r in runs], "host us", [r[part]["host_us"] for r in runs])
    for k in runs[0]["shapes"]:
        print(side, k, "fraction of copy", [round(r["shapes"][k]["copy_ms"] / r["shapes"][k]["unswizzle_ms"], 3) for r in runs])
PY
