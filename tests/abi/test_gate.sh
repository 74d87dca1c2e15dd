#!/usr/bin/env bash
# Shows that the ABI gate (scripts/abi.sh) can fail, and that it lets additions through: two small CPU-only
# builds of a scratch copy of the sources, one with additions to the header and one with breaking changes.
#   additions: a status value (MXFP8_NUM_STATUS moves), an enum type, a function, a field appended to a
#              struct that opens with struct_size                                   -> the gate passes
#   breaking:  a field's type (mxfp8_grouped_desc.cols int64_t -> int32_t), an enum value
#              (MXFP8_FORMAT_E5M2 2 -> 3), and a size-prefixed struct that grew while an old field changed
#              type                                                                 -> abidiff reports each
#   removal:   an EXPERIMENTAL function of the baseline renamed (mxfp8_grouped_expert) -> fails, then passes
#              with abi/folded.suppr naming it (the fold of issue 32 removes functions this way)
# Usage: tests/abi/test_gate.sh (about a minute on two cores; needs abigail-tools).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Rewrites one file with a perl substitution and fails unless the file changed (the header moved on).
edit() {
  local file=$1 expression=$2
  cp "$file" "$file.before"
  perl -0pi -e "$expression" "$file"
  ! cmp -s "$file" "$file.before" || fail "the edit '$expression' no longer applies to $file; update this test"
  rm "$file.before"
}

# A fresh copy of what the library is built from, with this checkout's baseline.
copy_sources() {
  rm -rf "$scratch/src"
  mkdir -p "$scratch/src"
  cp -r "$root"/{CMakeLists.txt,LICENSE,README.md,CHANGELOG.md,cmake,include,src,scripts,abi} "$scratch/src/"
}

# CPU-only, -g, only the library; the switch and initializer warnings an added enum value or field raise in
# the library's own sources stay warnings (this build is not for running).
build() {
  cmake -S "$scratch/src" -B "$scratch/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMXFP8_CUDA=OFF \
    -DMXFP8_BUILD_TESTS=OFF -DMXFP8_BUILD_EXAMPLES=OFF -DMXFP8_BUILD_BENCH=OFF -DMXFP8_TVM_FFI=OFF -DMXFP8_JAX=OFF \
    -DCMAKE_CXX_FLAGS="-Wno-error=switch -Wno-error=missing-field-initializers" >/dev/null
  cmake --build "$scratch/build" --target mxfp8 -j 2 >"$scratch/build.log" 2>&1 || { cat "$scratch/build.log"; fail "scratch build"; }
}

# The types each edit touches live in these headers (the umbrella, and the domain headers it includes).
header=include/mxfp8/mxfp8.h tensor=include/mxfp8/tensor.h quantize=include/mxfp8/quantize.h

echo "--- additions: the gate must pass"
copy_sources
cd "$scratch/src"
# The baseline of this very tree first (what main has added since the release is not the test's business),
# so that the report must show exactly the one function and the one enum type added below.
scripts/abi.sh update >/dev/null
edit $header 's/(\n  MXFP8_ERROR_INTERNAL = 6,\n)/$1  MXFP8_ERROR_GATE_TEST = 7,\n/'
edit $header 's/MXFP8_NUM_STATUS = 7\b/MXFP8_NUM_STATUS = 8/'
edit $header 's/(MXFP8_API uint32_t mxfp8_version\(void\);\n)/$1typedef enum mxfp8_gate_test { MXFP8_GATE_TEST_A = 1 } mxfp8_gate_test;\nMXFP8_API uint32_t mxfp8_gate_test_added(mxfp8_gate_test kind);\n/'
edit $quantize 's/(typedef struct mxfp8_dequantize_options \{.*?)(\n\} mxfp8_dequantize_options;)/$1\n  int64_t gate_test_added;$2/s'
printf '\nextern "C" MXFP8_API uint32_t mxfp8_gate_test_added(mxfp8_gate_test kind) { return (uint32_t)kind; }\n' >>src/api/status.cpp
build
scripts/abi.sh check "$scratch/build/libmxfp8.so.0" >"$scratch/additions.log" 2>&1 || { cat "$scratch/additions.log"; fail "the gate rejected additions"; }
cat "$scratch/additions.log"
grep -q "functions unchanged, 1 added" "$scratch/additions.log" || fail "the added function was not seen"
grep -q "types unchanged, 1 added" "$scratch/additions.log" || fail "the added enum type was not seen"

echo "--- breaking changes: the gate must fail and name each"
copy_sources
cd "$scratch/src"
edit $tensor 's/\bint64_t cols;(\s+\/\* K, shared)/int32_t cols;$1/'
edit $tensor 's/MXFP8_FORMAT_E5M2 = 2\b/MXFP8_FORMAT_E5M2 = 3/'
edit $quantize 's/(typedef struct mxfp8_dequantize_options \{\n  uint32_t struct_size;[^\n]*\n  )int32_t direction;(.*?)(\n\} mxfp8_dequantize_options;)/$1int64_t direction;$2\n  int64_t gate_test_added;$3/s'
build
rc=0
scripts/abi.sh check "$scratch/build/libmxfp8.so.0" >"$scratch/breaking.log" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$scratch/breaking.log"; fail "the gate passed (exit $rc) a changed field type, enum value and struct"; }
for expected in "type of 'int64_t cols' changed" "'mxfp8_format::MXFP8_FORMAT_E5M2' from value '2' to '3'" \
    "type of 'int32_t direction' changed"; do
  grep -qF "$expected" "$scratch/breaking.log" || { cat "$scratch/breaking.log"; fail "abidiff did not report: $expected"; }
  echo "reported: $expected"
done
echo "--- a reviewed removal: an EXPERIMENTAL function gone fails the gate until abi/folded.suppr names it"
copy_sources
cd "$scratch/src"
scripts/abi.sh update >/dev/null  # this tree's baseline, as above
edit include/mxfp8/tensor.h 's/\bmxfp8_grouped_expert\(/mxfp8_grouped_expert_folded(/'
edit src/api/grouped.cpp 's/\bmxfp8_grouped_expert\(/mxfp8_grouped_expert_folded(/'
build
rc=0
scripts/abi.sh check "$scratch/build/libmxfp8.so.0" >"$scratch/removal.log" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$scratch/removal.log"; fail "the gate passed (exit $rc) an unreviewed removal"; }
grep -qF "mxfp8_grouped_expert" "$scratch/removal.log" || { cat "$scratch/removal.log"; fail "the removal was not named"; }
echo "refused without abi/folded.suppr: mxfp8_grouped_expert removed"
printf '[suppress_function]\n  label = folded\n  change_kind = deleted-function\n  name = mxfp8_grouped_expert\n' \
  >abi/folded.suppr
scripts/abi.sh check "$scratch/build/libmxfp8.so.0" >"$scratch/removal.log" 2>&1 || { cat "$scratch/removal.log"; fail "the gate refused a removal abi/folded.suppr names"; }
cat "$scratch/removal.log"

echo "ABI gate test: additions pass, a changed field type, enum value and grown-and-changed struct fail, and an"
echo "EXPERIMENTAL function's removal passes only once abi/folded.suppr names it"
