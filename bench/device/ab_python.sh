#!/usr/bin/env bash
# A/B of the Python-side benchmarks on one machine: installs the package from each tree in turn (each in
# its own build folder, so a reinstall in a later round only copies) and runs this tree's bench/ scripts
# against it (the tree's own script where it has one: a script may use what only its tree's package has),
# round after round, so machine-to-machine spread cancels out.
#   OUT=dir [ROUNDS=2] [BENCHES="python_overhead engine_layouts"] [OWN_SCRIPTS=0] bash bench/device/ab_python.sh DIR...
# Each DIR is a repository root (e.g. `git archive <rev> | tar -x -C .ab/<rev>`, carried in the ignored
# folder .ab/). A bench may carry arguments after a colon, comma-separated: "refit_scale:--case,nvfp4".
# OWN_SCRIPTS=0 runs this tree's scripts against every tree's package (a case an older script lacks).
# Writes $OUT/ab-<i>-<round>-<bench>.json (i = the tree's position) and prints a summary of
# python_overhead's calls, engine_layouts' fractions of a copy and refit_scale's runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
ROUNDS=${ROUNDS:-2}
BENCHES=${BENCHES:-python_overhead engine_layouts}
here=$PWD
source bench/device/carried_deps.sh
for round in $(seq 1 "$ROUNDS"); do
  i=0
  for tree in "$@"; do
    i=$((i + 1))
    echo "=== round $round, tree $i ($tree) $(date +%T)"
    (cd "$tree" && CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps -q \
      -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -C build-dir=build-ab-py "${carried_pip_args[@]}" .) \
      >"/tmp/ab-pip-$i.log" 2>&1 || { echo "the package of $tree did not install:"; tail -5 "/tmp/ab-pip-$i.log"; exit 1; }
    for spec in $BENCHES; do
      b=${spec%%:*}
      args=()
      [ "$spec" = "$b" ] || IFS=, read -r -a args <<<"${spec#*:}"
      case $tree in /*) script="$tree/bench/$b.py" ;; *) script="$here/$tree/bench/$b.py" ;; esac
      [ -f "$script" ] && [ "${OWN_SCRIPTS:-1}" != 0 ] || script="$here/bench/$b.py"
      (cd /tmp && timeout 300 python3 "$script" "${args[@]}" --out "$OUT/ab-$i-$round-$b.json") >"/tmp/ab-$i-$round-$b.log" 2>&1 ||
        { echo "$b failed on $tree:"; tail -5 "/tmp/ab-$i-$round-$b.log"; }
    done
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, re, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ab-*.json"))):
    i, rnd, bench = re.match(r".*ab-(\d+)-(\d+)-(\w+)\.json", f).groups()
    r = json.load(open(f))
    if bench == "python_overhead":
        for name, c in r["python"]["calls"].items():
            rows.setdefault(f"python {name} us", {}).setdefault(i, []).append(c["us"])
    elif bench == "engine_layouts":
        for layout, e in r.items():
            if isinstance(e, dict) and "fraction_of_copy" in e:
                rows.setdefault(f"engine_layouts {layout} fraction_of_copy", {}).setdefault(i, []).append(e["fraction_of_copy"])
                for part, ms in e.get("device_parts", {}).items():
                    rows.setdefault(f"engine_layouts {layout} {part} ms", {}).setdefault(i, []).append(ms)
    elif bench == "refit_scale":
        for case, routes in r["cases"].items():
            for route, e in routes.items():
                for k in ("run_ms", "run_host_enqueue_ms", "run_fraction_of_copy", "immediate_ms"):
                    rows.setdefault(f"refit_scale {case} {route} {k}", {}).setdefault(i, []).append(e[k])
for name, by_tree in rows.items():
    print(name, {t: v for t, v in sorted(by_tree.items())})
PY
