"""The command line: python -m mxfp8 {demo,info} [options]; python -m mxfp8 COMMAND --help for each."""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Optional, Sequence

import mxfp8

_EPILOG = """\
examples:
  python -m mxfp8 demo                     the whole hand-off, checked bit for bit (GPU when one is visible)
  python -m mxfp8 demo --format nvfp4      the same for NVFP4
  python -m mxfp8 demo --device cpu --size small
  python -m mxfp8 checkpoint --demo OUT    MXFP8 and NVFP4 checkpoints engines load, verified by their readers
  python -m mxfp8 info                     what this install is: versions, library, CUDA path

python -m mxfp8 COMMAND --help describes a command and its options."""


def _dotted(v: int) -> str:
    """MAJOR*10000 + MINOR*100 + PATCH as MAJOR.MINOR.PATCH."""
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def _version_line() -> str:
    return (f"mxfp8 {mxfp8.__version__} (libmxfp8 {_dotted(mxfp8._mxfp8.version)}, "
            f"{'CUDA and CPU paths' if mxfp8._mxfp8.with_cuda else 'CPU path only'})")


def _module_doc(name: str) -> str:
    """A module's docstring, read from its source: importing _demo would need NumPy, and --help must not."""
    path = Path(__file__).with_name(name + ".py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _positive(text: str) -> int:
    """An argparse type: an int of at least 1 (a model of -1 decoder layers was written, its config saying so)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mxfp8",
        description="mxfp8: MXFP8 and NVFP4 weights from Transformer Engine's layout to compact FP8 values\n"
                    "and scales, as DLPack tensors; quantize bit-exact with Transformer Engine.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version_line(),
                        help="print the package's and the C library's versions and whether the CUDA path is built, "
                             "then exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    demo = commands.add_parser(
        "demo", help="quantize a built-in weight set into Transformer Engine's layout, export it, and check every "
                     "byte", description=_module_doc("_demo"), formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                      help="where the weights live and the work runs: cuda (needs PyTorch with a CUDA device and a "
                           "CUDA build of mxfp8), cpu (NumPy), or auto: cuda when both are there, else cpu "
                           "(default: %(default)s)")
    demo.add_argument("--size", choices=["auto", "small", "large"], default="auto",
                      help="the weight set: small (hidden size 1024, 43 M values), large (hidden size 4096, "
                           "0.8 G values); auto: large on a GPU, small on the CPU and for nvfp4, whose checks "
                           "in NumPy are heavier (default: %(default)s)")
    demo.add_argument("--format", choices=["mxfp8", "nvfp4"], default="mxfp8",
                      help="mxfp8 (E4M3 values, one E8M0 scale per 32) or nvfp4 (E2M1 values, one E4M3 scale "
                           "per 16 and a per-tensor amax); both quantized by the library, bit-exact with "
                           "Transformer Engine's quantizer, into its layout with swizzled scales "
                           "(default: %(default)s)")
    demo.set_defaults(run=_run_demo)

    checkpoint = commands.add_parser(
        "checkpoint", help="write checkpoints engines load (compressed-tensors MXFP8, ModelOpt NVFP4) from trainer "
                           "storage; --demo writes and verifies a small model in each",
        description=_module_doc("_checkpoint_demo") + "\n\nmxfp8.checkpoint.save and .load are the API; this command "
                    "runs their demo.", formatter_class=argparse.RawDescriptionHelpFormatter)
    checkpoint.add_argument("--demo", metavar="OUT", required=True,
                            help="the folder to write the demo checkpoints into (created; its two checkpoint "
                                 "folders are replaced)")
    checkpoint.add_argument("--layers", type=_positive, default=2, help="decoder layers of the demo model (default: "
                                                                  "%(default)s)")
    checkpoint.set_defaults(run=_run_checkpoint)

    info = commands.add_parser(
        "info", help="print what this install is: versions, where the library loads from, the CUDA path",
        description="Prints the mxfp8 and libmxfp8 versions, the files the package and the C library load from, "
                    "whether the CUDA path is built, whether the tvm-ffi adapter is there, and the versions of "
                    "the optional packages mxfp8 works with (NumPy, ml_dtypes, PyTorch, JAX, CuPy). Worth "
                    "pasting into a bug report.")
    info.set_defaults(run=_run_info)
    return parser


def _run_demo(args: argparse.Namespace) -> int:
    try:
        import numpy
    except ImportError:
        print("python -m mxfp8 demo needs NumPy: pip install numpy (a dependency of the mxfp8 package; "
              "was it installed with --no-deps?)", file=sys.stderr)
        return 1
    del numpy  # only its presence mattered here
    from . import _demo

    return _demo.run(device=args.device, size=args.size, fmt=args.format)


def _run_checkpoint(args: argparse.Namespace) -> int:
    from . import _checkpoint_demo

    try:
        return _checkpoint_demo.run(args.demo, layers=args.layers)
    except OSError as err:  # the folder given: a file, no parent, not a checkpoint to overwrite, no room
        print(f"python -m mxfp8 checkpoint: error: {err}", file=sys.stderr)
        return 1


def _run_info(args: argparse.Namespace) -> int:
    from importlib import metadata

    print(_version_line())
    print(f"package:        {mxfp8.__file__.rsplit('/', 1)[0]}")
    try:
        with open("/proc/self/maps") as maps:
            loaded = sorted({line.split()[-1] for line in maps if "libmxfp8.so" in line})
    except OSError:
        loaded = []
    print(f"libmxfp8:       {', '.join(loaded) or 'unknown'}")
    print(f"header:         mxfp8.h {_dotted(mxfp8._mxfp8.header_version)} (what the extension was compiled against)")
    try:
        print(f"tvm-ffi:        {mxfp8.tvm_ffi_library_path()}")
    except FileNotFoundError:
        print("tvm-ffi:        not built into this install (needs apache-tvm-ffi at build time)")
    print(f"python:         {sys.version.split()[0]} ({sys.executable})")
    for name in ("numpy", "ml_dtypes", "torch", "jax", "cupy", "apache-tvm-ffi"):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "not installed"
        print(f"{name + ':':<15} {version}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)
