#!/usr/bin/env python3
"""Runs every fenced code block of README.md and docs/*.md as written, so that no snippet can rot.

  python3 scripts/test_docs.py [--build-dir build] [--python .venv/bin/python] [--gpu] [--no-rust] [FILE...]

Per block, by its fence's language:
  python      run with --python (the installed mxfp8 package) on the CPU (CUDA_VISIBLE_DEVICES empty),
              from an empty temporary folder;
  c           compiled as C99 with -Wall -Wextra -Werror against include/ and the dlpack header, linked
              with the build tree's libmxfp8 (rpath set), and run;
  rust        a binary of a temporary crate with the bindings/rust crates as path dependencies, built
              with cargo --offline (MXFP8_LIB_DIR = the build tree) and run; one target folder serves
              every block, so the crates compile once;
  anything else (sh, text, cmake, toml, no language): not run (shell and text).
A comment on the line right before a fence changes that:
  <!-- docs-test: skip REASON -->   never run (a fragment; say why)
  <!-- docs-test: gpu -->           needs a CUDA device: run only with --gpu
  <!-- docs-test: torch -->         needs PyTorch: skipped when --python cannot import torch
  <!-- docs-test: compile -->       C / Rust: build only, do not run
Each block is reported as FILE:LINE LANG pass / fail / skip; the exit status is 1 when any failed.

Also checks that the list of experimental functions in docs/api.md (between the lines
`<!-- experimental-list: begin -->` and `<!-- experimental-list: end -->`, every `mxfp8_*` name in
backticks) is exactly the set of functions the public headers declare in sections marked
[EXPERIMENTAL].
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
MARKER = re.compile(r"<!--\s*docs-test:\s*(\w[\w-]*)\s*(.*?)\s*-->")
RUN_LANGS = {"python": "python", "py": "python", "c": "c", "rust": "rust", "rs": "rust"}


class Block:
    def __init__(self, path, line, lang, code, marker, reason):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.marker, self.reason = marker, reason

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def blocks_of(path):
    """Every fenced block of a Markdown file, with the docs-test marker on the line before its fence."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        marker, reason = None, ""
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mm = MARKER.search(lines[j]) if j >= 0 else None
        if mm:
            marker, reason = mm.group(1), mm.group(2)
        out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", marker, reason))
    return out


def run(cmd, cwd, env=None, timeout=600):
    t = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout, time.time() - t
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or "") + f"\n(timed out after {timeout} s)", time.time() - t
    except FileNotFoundError as e:
        return 127, f"{cmd[0]}: not found ({e})", time.time() - t


class Runner:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.tmp = tempfile.mkdtemp(prefix="mxfp8-docs-")
        self._torch = None
        self.dlpack = args.dlpack_include or self._dlpack_include()
        self.rust_target = os.path.join(self.build, "docs-test-rust-target")

    def _dlpack_include(self):
        cache = os.path.join(self.build, "CMakeCache.txt")
        if os.path.exists(cache):
            for line in open(cache, encoding="utf-8", errors="replace"):
                if line.startswith("DLPACK_INCLUDE_DIR:") and "NOTFOUND" not in line:
                    return line.split("=", 1)[1].strip()
        code, out, _ = run([self.args.python, "-m", "tvm_ffi.config", "--dlpack-includedir"], ROOT)
        return out.strip() if code == 0 else None

    def has_torch(self):
        if self._torch is None:
            self._torch = run([self.args.python, "-c", "import torch"], self.tmp)[0] == 0
        return self._torch

    def skip_reason(self, b):
        if b.lang not in RUN_LANGS:
            return f"{b.lang or 'text'} block (not run)"
        if b.marker == "skip":
            return b.reason or "marked skip"
        if b.marker == "gpu" and not self.args.gpu:
            return "needs a GPU (--gpu runs it)"
        if b.marker == "torch" and not self.has_torch():
            return "needs torch, which --python cannot import"
        if b.marker not in (None, "gpu", "torch", "compile", "skip"):
            return None  # an unknown marker fails below
        if RUN_LANGS[b.lang] == "rust" and self.args.no_rust:
            return "--no-rust"
        return None

    def python(self, b, d):
        path = os.path.join(d, "block.py")
        open(path, "w").write(b.code)
        env = dict(os.environ)
        if b.marker != "gpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.pop("PYTHONPATH", None)
        return run([self.args.python, path], d, env)

    def c(self, b, d):
        if not self.dlpack:
            return 1, "no dlpack include folder: pass --dlpack-include", 0
        src, exe = os.path.join(d, "block.c"), os.path.join(d, "block")
        open(src, "w").write(b.code)
        cc = os.environ.get("CC", "cc")
        code, out, t = run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"),
                            "-I", self.dlpack, src, "-o", exe, "-L", self.build, "-lmxfp8",
                            f"-Wl,-rpath,{self.build}"], d)
        if code or b.marker == "compile":
            return code, out, t
        code2, out2, t2 = run([exe], d)
        return code2, out + out2, t + t2

    def rust(self, b, d):
        crate = os.path.join(d, "crate")
        os.makedirs(os.path.join(crate, "src"))
        rust_dir = os.path.join(ROOT, "bindings", "rust")
        open(os.path.join(crate, "Cargo.toml"), "w").write(
            '[package]\nname = "docs_block"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
            f'[dependencies]\nmxfp8 = {{ path = "{rust_dir}/mxfp8" }}\n\n[workspace]\n')
        open(os.path.join(crate, "src", "main.rs"), "w").write(b.code)
        lock = os.path.join(rust_dir, "Cargo.lock")
        if os.path.exists(lock):
            shutil.copy(lock, os.path.join(crate, "Cargo.lock"))
        env = dict(os.environ, MXFP8_LIB_DIR=self.build, MXFP8_INCLUDE_DIR=os.path.join(ROOT, "include"),
                   CARGO_TARGET_DIR=self.rust_target)
        env["LD_LIBRARY_PATH"] = self.build + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        verb = "build" if b.marker == "compile" else "run"
        return run(["cargo", verb, "--offline", "--quiet"], crate, env)

    def block(self, b):
        d = tempfile.mkdtemp(dir=self.tmp)
        return getattr(self, RUN_LANGS[b.lang])(b, d)


def header_experimental():
    """Functions the public headers declare (MXFP8_API ... name(...)) in sections marked [EXPERIMENTAL].

    A section opens with a banner comment between two rows of '=' whose text carries [STABLE] or
    [EXPERIMENTAL]; a declaration belongs to the last banner above it."""
    banner = re.compile(r"/\* =+\n(.*?)\n \* =+ \*/", re.S)
    decl = re.compile(r"MXFP8_API\s+[^;(]*?\b(mxfp8_\w+)\s*\(")
    experimental = set()
    for h in sorted(glob.glob(os.path.join(ROOT, "include", "**", "*.h"), recursive=True)):
        text = open(h, encoding="utf-8").read()
        marks = [(m.start(), "[EXPERIMENTAL]" in m.group(1)) for m in banner.finditer(text)]
        for m in decl.finditer(text):
            inside = [exp for start, exp in marks if start < m.start()]
            if inside and inside[-1]:
                experimental.add(m.group(1))
    return experimental


def documented_experimental(api_md):
    text = open(api_md, encoding="utf-8").read()
    m = re.search(r"<!--\s*experimental-list:\s*begin\s*-->(.*?)<!--\s*experimental-list:\s*end\s*-->", text, re.S)
    if not m:
        return None
    return set(re.findall(r"`(mxfp8_\w+)`", m.group(1)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/*.md)")
    p.add_argument("--build-dir", default="build", help="the CMake build tree holding libmxfp8.so (default build)")
    p.add_argument("--python", default=sys.executable, help="the Python with mxfp8 installed (default: this one)")
    p.add_argument("--dlpack-include", help="folder holding dlpack/dlpack.h (default: the build's, or tvm_ffi's)")
    p.add_argument("--gpu", action="store_true", help="also run the blocks marked gpu")
    p.add_argument("--no-rust", action="store_true", help="skip the Rust blocks")
    p.add_argument("-v", "--verbose", action="store_true", help="print every block's output")
    args = p.parse_args()
    if os.sep in args.python:  # blocks run from a temporary folder: a relative path would not resolve there
        args.python = os.path.abspath(args.python)
    os.chdir(ROOT)
    files = args.files or ["README.md"] + sorted(glob.glob("docs/*.md"))
    runner = Runner(args)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    try:
        for f in files:
            for b in blocks_of(os.path.abspath(f)):
                why = runner.skip_reason(b)
                if why:
                    counts["skip"] += 1
                    print(f"{b.where:28} {b.lang or 'text':7} skip  {why}")
                    continue
                if b.marker not in (None, "gpu", "torch", "compile"):
                    code, out, t = 1, f"unknown docs-test marker {b.marker!r}", 0
                else:
                    code, out, t = runner.block(b)
                ok = code == 0
                counts["pass" if ok else "fail"] += 1
                print(f"{b.where:28} {b.lang:7} {'pass' if ok else 'FAIL'}  {t:.1f} s", flush=True)
                if not ok:
                    out = out.rstrip() + f"\n(exit status {code})"
                if not ok or args.verbose:
                    print("    " + "\n    ".join(out.rstrip().splitlines()[-40:]))
        api = os.path.join(ROOT, "docs", "api.md")
        if os.path.exists(api):
            header = header_experimental()
            listed = documented_experimental(api)
            if listed is None:
                counts["fail"] += 1
                print("docs/api.md: FAIL  no experimental list (<!-- experimental-list: begin --> ... end)")
            elif listed != header:
                counts["fail"] += 1
                print("docs/api.md: FAIL  the experimental list differs from the header's [EXPERIMENTAL] sections")
                for n in sorted(header - listed):
                    print(f"    missing from docs/api.md: {n}")
                for n in sorted(listed - header):
                    print(f"    listed but not experimental in the header: {n}")
            else:
                counts["pass"] += 1
                print(f"docs/api.md: pass  the experimental list matches the header ({len(header)} functions)")
    finally:
        shutil.rmtree(runner.tmp, ignore_errors=True)
    print(f"docs test: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
