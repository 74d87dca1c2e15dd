#!/usr/bin/env bash
# A/B (or bisection) of the scale kernels on one machine: builds bench_scales from several source trees
# and runs them in turn, round after round, so machine-to-machine spread (larger than run-to-run, see
# README) cancels out. bench_scales also times the NVFP4 quantize ("nvfp4_quantize"), summarized last.
#   OUT=dir [ROUNDS=2] [PATHS="smem registers"] bash bench/device/ab.sh DIR...
# Each DIR is a repository root (e.g. `git archive <rev> | tar -x -C .ab/<rev>`, carried to the device in
# the ignored folder .ab/; copy the current bench/bench_scales.cu into old trees so all report the same
# fields). Writes $OUT/ab-<i>-<round>.json (bench_scales' JSON, i = the tree's position) and a summary.
# PATHS: run each tree's bench_scales once per value of MXFP8_UNSWIZZLE_PATH (read once a process, so one
# run a value) in every round, into $OUT/ab-<i>-<path>-<round>.json: the scale unswizzle through shared
# memory and in registers, per shape, from one build (a tree older than the knob ignores it; a value a
# tree refuses leaves no results for it).
# BUILD_DIR=dir (one tree): time that tree's existing build (e.g. device_session.sh's build-gpu), no build.
set -euo pipefail
: "${OUT:?set OUT}"
rounds=${ROUNDS:-2}
source bench/device/carried_deps.sh
i=0
[ -z "${BUILD_DIR:-}" ] || { [ "$#" = 1 ] || { echo "BUILD_DIR takes one tree"; exit 1; }; ln -sfn "$PWD/$BUILD_DIR" /tmp/ab-build-1; }
for src in "$@"; do
  [ -z "${BUILD_DIR:-}" ] || break
  i=$((i + 1))
  if ! { cmake -S "$src" -B "/tmp/ab-build-$i" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMXFP8_BUILD_TESTS=OFF \
          -DMXFP8_BUILD_EXAMPLES=OFF "${carried_cmake_args[@]}" && cmake --build "/tmp/ab-build-$i" -j "$(nproc)" --target bench_scales; } \
       >"$OUT/ab-build-$i.log" 2>&1; then
    echo "$src: build failed (skipped); the end of $OUT/ab-build-$i.log:"; tail -15 "$OUT/ab-build-$i.log"
  fi
done
paths=${PATHS:-}
for r in $(seq 1 "$rounds"); do
  for t in $(seq 1 "$#"); do
    bin="/tmp/ab-build-$t/bench/bench_scales"
    [ -x "$bin" ] || continue
    if [ -z "$paths" ]; then "$bin" >"$OUT/ab-$t-$r.json"; fi
    for p in $paths; do
      MXFP8_UNSWIZZLE_PATH=$p "$bin" >"$OUT/ab-$t-$p-$r.json" ||
        { echo "tree $t refused MXFP8_UNSWIZZLE_PATH=$p (older than it?): no results" >&2; rm -f "$OUT/ab-$t-$p-$r.json"; }
    done
  done
done
python3 - "$OUT" "$rounds" "$paths" "$@" <<'PY'
import json, os, sys
out, rounds, paths, trees = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
for t, tree in enumerate(trees, 1):
    for p in paths or [None]:
        name = f"{t}-{p}" if p else f"{t}"
        if not os.path.exists(f"{out}/ab-{name}-1.json"):
            continue
        runs = [json.load(open(f"{out}/ab-{name}-{r}.json")) for r in range(1, rounds + 1)]
        print(f"== {t}: {tree}" + (f" MXFP8_UNSWIZZLE_PATH={p}" if p else ""))
        for part in ("whole_model", "moe"):
            print(" ", part, "ms", [r[part]["ms"] for r in runs], "copy", [r[part]["copy_ms"] for r in runs],
                  {k: [r[part][k] for r in runs] for k in runs[0][part] if k.startswith(("gpu", "host"))})
        for k in runs[0]["shapes"]:
            print(" ", k, "fraction of copy: unswizzle", [round(r["shapes"][k]["copy_ms"] / r["shapes"][k]["unswizzle_ms"], 3) for r in runs],
                  "swizzle", [round(r["shapes"][k]["copy_ms"] / r["shapes"][k]["swizzle_ms"], 3) for r in runs if "swizzle_ms" in r["shapes"][k]])
        if "nvfp4_export" in runs[0]:
            print("  nvfp4 export fraction of copy", [round(r["nvfp4_export"]["copy_ms"] / r["nvfp4_export"]["ms"], 3) for r in runs],
                  "its unswizzle alone", [round(r["nvfp4_export"]["copy_ms"] / r["nvfp4_export"]["unswizzle_ms"], 3) for r in runs])
        if "nvfp4_quantize" in runs[0]:  # bench/LOG.md, "NVFP4 quantize": what each fraction is against
            f = [r["nvfp4_quantize"] for r in runs]
            print("  nvfp4 quantize ms (amax computed)", [x["ms"] for x in f], "given amax", [x["given_amax_ms"] for x in f])
            print("    amax given / copy of its bytes", [round(x["copy_ms"] / x["given_amax_ms"], 3) for x in f],
                  "amax computed / copy of the single-pass bytes", [round(x["copy_ms"] / x["ms"], 3) for x in f],
                  "/ copy of all bytes (input read twice)", [round(x["all_bytes_copy_ms"] / x["ms"], 3) for x in f])
PY
