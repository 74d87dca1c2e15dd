#!/usr/bin/env bash
# The release packages: cpack makes the tarball and the .deb from a configured build folder; the tarball
# must hold exactly what `cmake --install` installs, and a consumer must build against the unpacked tarball
# alone (plus the dlpack header it documents): this folder's find_package project and the C example through
# pkg-config, both run against the unpacked library without LD_LIBRARY_PATH (RPATH).
# Usage: tests/install/test_package.sh [BUILD_DIR]   (default build/; the library must be built)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$work" && cpack --config "$build/CPackConfig.cmake" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail cpack; }
tarball=$(ls "$work"/mxfp8-*.tar.gz)
deb=$(ls "$work"/mxfp8-*.deb)
echo "cpack: $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB), $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

mkdir "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked"
prefix="$work/unpacked/$(basename "$tarball" .tar.gz)"
[ -d "$prefix" ] || fail "the tarball does not unpack into $(basename "$prefix")/"

# The same tree as cmake --install: every file and link, by path.
cmake --install "$build" --prefix "$work/installed" >/dev/null
diff <(cd "$work/installed" && find . ! -type d | sort) <(cd "$prefix" && find . ! -type d | sort) ||
  fail "the tarball's tree differs from cmake --install's (< install, > tarball)"
echo "tarball tree == cmake --install tree: $(cd "$prefix" && find . ! -type d | sort | paste -sd ' ')"

# The consumer brings its own dlpack.h (the tarball never ships it), in a folder the build never saw.
mkdir -p "$work/dlpack/dlpack"
cp "$(python3 -m tvm_ffi.config --dlpack-includedir)/dlpack/dlpack.h" "$work/dlpack/dlpack/"

# find_package from the unpacked tree only (no package registry, no build folder).
cmake -S "$root/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DDLPACK_INCLUDE_DIR="$work/dlpack" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "configuring the consumer against the tarball"; }
grep -q "^mxfp8_DIR:PATH=$prefix/" "$work/consumer/CMakeCache.txt" || fail "find_package(mxfp8) did not use the tarball"
cmake --build "$work/consumer" >/dev/null
ldd_line=$(env -u LD_LIBRARY_PATH ldd "$work/consumer/consumer" | grep libmxfp8)
[[ $ldd_line == *"$prefix/lib/libmxfp8.so.0"* ]] || fail "the consumer loads $ldd_line"
env -u LD_LIBRARY_PATH "$work/consumer/consumer" | tail -1

# pkg-config from the unpacked tree.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c99 -I"$work/dlpack" "$root/examples/c/export_te_layout.c" -o "$work/consumer_pc" $(pkg-config --cflags --libs mxfp8)
env -u LD_LIBRARY_PATH "$work/consumer_pc" | tail -1

# The .deb holds the same files under /usr, and says what it depends on.
dpkg-deb --contents "$deb" | awk '{print $6}' | sed '/\/$/d; s|^\./usr/||' | sort >"$work/deb.files"
diff <(cd "$prefix" && find . ! -type d | sed 's|^\./||' | sort) "$work/deb.files" ||
  fail "the .deb's files differ from the tarball's (< tarball, > .deb under /usr)"
echo "$(basename "$deb"): the same files under /usr; $(dpkg-deb --field "$deb" Package Depends | paste -sd ';')"
