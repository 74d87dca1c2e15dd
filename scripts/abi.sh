#!/usr/bin/env bash
# The ABI gate: what a program compiled against libmxfp8 relies on, compared with the baseline in abi/ by
# libabigail (Debian: abigail-tools).
#   abi/libmxfp8.so.0.abi  the library: its exported functions and every type of mxfp8.h and dlpack.h they
#                          reach (parameters, return types, struct layouts, the status values)
#   abi/mxfp8.h.abi        the header: every enum's values and every struct's layout, from a probe compiled
#                          from include/mxfp8/mxfp8.h (option fields hold enums as int32_t, so no function
#                          signature reaches most enums)
#
#   scripts/abi.sh check LIBRARY [DLPACK_INCLUDE_DIR]
#       Fails with abidiff's report when LIBRARY or the header changes or removes anything in the baseline:
#       a function removed or its signature changed, a field moved, resized or retyped, an enum value
#       changed. Additions pass: new functions, new types, new enum values (MXFP8_NUM_STATUS moves with
#       them), fields appended to a struct that opens with struct_size. LIBRARY must carry DWARF (-g:
#       RelWithDebInfo or Debug; without it, or without libabigail, the exit status is 77, "skipped").
#       abi/folded.suppr, when present, lists reviewed removals of EXPERIMENTAL functions since the
#       baseline (libabigail [suppress_function] entries, change_kind = deleted-function, one per name, and
#       one per abi_probe_<type> of a removed type): those pass, and nothing else they do not name.
#       Any configuration compares the same (CPU-only or CUDA, sanitizers): only exported functions and
#       public types are read.
#   scripts/abi.sh update [DLPACK_INCLUDE_DIR]
#       Regenerates both baseline files, for a release that adds to the ABI on purpose (or a new major
#       version): builds the library CPU-only, RelWithDebInfo, in build-abi/, and rewrites abi/*.abi.
#       Commit them with the release; the diff shows what was added.
#
# DLPACK_INCLUDE_DIR (the folder holding dlpack/dlpack.h) defaults to the one apache-tvm-ffi ships.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

dlpack_dir() { if [ -n "${1:-}" ]; then echo "$1"; else python3 -m tvm_ffi.config --dlpack-includedir; fi; }
# Every public header: the umbrella mxfp8.h and whatever it includes from its folder.
headers=("$root"/include/mxfp8/*.h)

# Only what a caller can see: the public headers decide which types are public (--headers-dir,
# --header-file; every other type is dropped), only exported symbols are read, and no source location,
# compilation folder or DT_NEEDED entry is written, so internal edits and build folders leave the file alone.
abidw_public() {
  local binary=$1 out=$2 dlpack=$3
  # (grep without -q reads all of readelf's output: with pipefail, -q's early exit could fail the pipe)
  if ! readelf -S "$binary" | grep '\.debug_info' >/dev/null; then
    echo "abi.sh: $binary has no debug information (build with -g: RelWithDebInfo or Debug); not checked" >&2
    exit 77
  fi
  abidw --headers-dir "$root/include/mxfp8" --header-file "$dlpack/dlpack/dlpack.h" \
    --drop-private-types --exported-interfaces-only --no-show-locs --no-corpus-path --no-comp-dir-path \
    --no-elf-needed --type-id-style hash --out-file "$out" "$binary"
  # Translation units by their path in the repository, so the file does not depend on the checkout's place.
  sed -i "s|path='$root/|path='|" "$out"
}

# The option fields hold enums as int32_t, so no library function reaches most enum types and the
# library's debug information need not describe them. The header probe does: one exported function per
# enum and struct of the header (found by its `typedef enum|struct mxfp8_x {` line, so a new type is covered
# without editing anything), compiled as C with -g. Its corpus pins every enumerator's value and every
# struct's layout as a C compiler sees them.
header_probe() {
  local out=$1 dlpack=$2 work
  work=$(mktemp -d)
  {
    echo '#include <mxfp8/mxfp8.h>'
    sed -nE 's/^typedef (enum|struct) (mxfp8_[a-z0-9_]+) \{.*/\2/p' "${headers[@]}" |
      while read -r type; do echo "void abi_probe_$type($type *p) { (void)p; }"; done
  } >"$work/probe.c"
  # Compiled from inside its folder, so the corpus names it probe.c and not a temporary path.
  (cd "$work" && cc -std=c99 -g -O0 -fPIC -shared -I"$root/include" -I"$dlpack" probe.c -o libmxfp8_header_probe.so)
  abidw_public "$work/libmxfp8_header_probe.so" "$out" "$dlpack"
  rm -rf "$work"
}

growable_structs() {
  awk '/^typedef struct mxfp8_[a-z0-9_]+ \{/ { name = $3; getline; if ($1 == "uint32_t" && $2 == "struct_size;") print name }' \
    "${headers[@]}"
}

# A struct that opens with `uint32_t struct_size` may grow at its end (the library reads struct_size; see
# the header's conventions). abidiff has no rule for "only appended" (its has_data_member_inserted_at
# suppression also hides changes to the old members), so the current corpus is cut back instead: each such
# struct that grew loses the members at or past its baseline size and takes its baseline size. abidiff then
# sees exactly the members an older caller knows, and reports any change among them.
cut_back_growth() {
  local baseline=$1 current=$2
  python3 - "$baseline" "$current" $(growable_structs) <<'PY'
import sys
import xml.etree.ElementTree as ET
baseline_path, current_path, growable = sys.argv[1], sys.argv[2], set(sys.argv[3:])
def structs(root):
    return [c for c in root.iter("class-decl") if c.get("name") in growable and c.get("size-in-bits")]
old_size = {c.get("name"): int(c.get("size-in-bits")) for c in structs(ET.parse(baseline_path).getroot())}
tree = ET.parse(current_path)
for struct in structs(tree.getroot()):
    size = old_size.get(struct.get("name"))
    if size is None or int(struct.get("size-in-bits")) <= size:
        continue
    for member in struct.findall("data-member"):
        if member.get("layout-offset-in-bits") is not None and int(member.get("layout-offset-in-bits")) >= size:
            struct.remove(member)
    struct.set("size-in-bits", str(size))
tree.write(current_path)
PY
}

# "One past the largest value" counters (MXFP8_NUM_STATUS) move when a value is added; nothing may store
# them, so their change is part of the addition.
counter_suppression() {
  local names
  names=$(grep -hoE '^ *MXFP8_NUM_[A-Z0-9_]+ *=' "${headers[@]}" | tr -d ' =' | paste -sd ',')
  [ -z "$names" ] || printf '[suppress_type]\n  label = counters\n  type_kind = enum\n  changed_enumerators = %s\n' "$names"
}

# abidiff's exit status is a bit set: 1 error, 2 usage, 4 an ABI change, 8 an incompatible one. Added
# functions are not reported and do not count; every other change does.
compare() {
  local what=$1 unit=$2 baseline=$3 current=$4 suppression=$5 rc=0 report before after
  cut_back_growth "$baseline" "$current"
  report=$(abidiff --no-added-syms --suppressions "$suppression" "$baseline" "$current") || rc=$?
  if [ $rc -ne 0 ]; then
    echo "$report"
    echo "abi.sh: $what differs from abi/$(basename "$baseline") (abidiff exit $rc, report above)." >&2
    return 1
  fi
  before=$(grep -c "<elf-symbol " "$baseline")
  after=$(grep -c "<elf-symbol " "$current")
  echo "ABI gate: $what keeps abi/$(basename "$baseline") ($before $unit unchanged, $((after - before)) added)"
}

# 77: ctest's SKIP_RETURN_CODE (tests/c/CMakeLists.txt); scripts/test.sh runs the gate where it cannot skip.
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
  echo "abi.sh: abidw and abidiff not found (Debian: apt-get install abigail-tools); not checked" >&2
  exit 77
fi

case "${1:-}" in
  check)
    [ $# -ge 2 ] || { echo "usage: $0 check LIBRARY [DLPACK_INCLUDE_DIR]" >&2; exit 2; }
    dlpack=$(dlpack_dir "${3:-}")
    work=$(mktemp -d)
    trap 'rm -f -r "$work"' EXIT
    {
      counter_suppression
      if [ -f "$root/abi/folded.suppr" ]; then echo; cat "$root/abi/folded.suppr"; fi
    } >"$work/gate.suppr"
    abidw_public "$2" "$work/library.abi" "$dlpack"
    header_probe "$work/header.abi" "$dlpack"
    status=0
    compare "$(basename "$2")" functions "$root/abi/libmxfp8.so.0.abi" "$work/library.abi" "$work/gate.suppr" || status=1
    compare mxfp8.h types "$root/abi/mxfp8.h.abi" "$work/header.abi" "$work/gate.suppr" || status=1
    if [ $status -ne 0 ]; then
      echo "abi.sh: the published ABI changed. Undo the change, or make it a new major version (a new SONAME)," >&2
      echo "        and regenerate the baseline with scripts/abi.sh update; see README, Stability." >&2
    fi
    exit $status
    ;;
  update)
    build="$root/build-abi"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMXFP8_CUDA=OFF -DMXFP8_BUILD_BENCH=OFF -DMXFP8_TVM_FFI=OFF -DMXFP8_JAX=OFF -DMXFP8_BUILD_TESTS=OFF \
      -DMXFP8_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build "$build" --target mxfp8 -j "$(nproc)" >/dev/null
    dlpack=$(dlpack_dir "${2:-}")
    abidw_public "$build/libmxfp8.so.0" "$root/abi/libmxfp8.so.0.abi" "$dlpack"
    header_probe "$root/abi/mxfp8.h.abi" "$dlpack"
    echo "wrote abi/libmxfp8.so.0.abi ($(grep -c '<elf-symbol ' "$root/abi/libmxfp8.so.0.abi") functions) and" \
      "abi/mxfp8.h.abi ($(grep -c '<elf-symbol ' "$root/abi/mxfp8.h.abi") types)"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
