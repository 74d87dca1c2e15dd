"""The command line (python -m mxfp8): per-command help, every option described, --version, errors, and
--help without NumPy."""
import argparse
import os
import subprocess
import sys
from importlib import metadata

import pytest

import mxfp8
from mxfp8 import _cli


def run(*args, block_numpy=False):
    """python -m mxfp8 ARGS in a fresh interpreter (numpy and ml_dtypes unimportable with block_numpy)."""
    code = "import runpy, sys\n"
    if block_numpy:
        code += "sys.modules['numpy'] = None\nsys.modules['ml_dtypes'] = None\n"
    code += "sys.argv = ['mxfp8'] + sys.argv[1:]\nrunpy.run_module('mxfp8', run_name='__main__', alter_sys=True)\n"
    env = dict(os.environ, COLUMNS="100")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_command_and_option_has_help():
    parser = _cli.build_parser()
    commands = subparsers(parser)
    assert {"demo", "info"} <= set(commands)
    sub_action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub_action._choices_actions}
    for name in commands:
        assert helps.get(name), f"command {name} has no one-line help"
    for name, sub in commands.items():
        assert sub.description, f"{name} --help has no description"
        for action in sub._actions:
            if action.option_strings:
                assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.option_strings} has no help"
    for action in parser._actions:
        if action.option_strings:
            assert action.help, f"{action.option_strings} has no help"


def test_top_help_lists_commands_and_differs_from_demo_help():
    top, demo = run("--help"), run("demo", "--help")
    assert top.returncode == 0 and demo.returncode == 0, top.stderr + demo.stderr
    assert "demo" in top.stdout and "info" in top.stdout and "--version" in top.stdout
    assert top.stdout != demo.stdout
    assert demo.stdout.startswith("usage: python -m mxfp8 demo")
    for option in ("--device", "--size", "--format", "auto", "cuda", "nvfp4", "default: auto", "default: mxfp8"):
        assert option in demo.stdout, option
    assert "Transformer Engine" in demo.stdout  # the description: what the demo does


def test_info_help():
    out = run("info", "--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m mxfp8 info"), out.stderr


def test_version():
    out = run("--version")
    assert out.returncode == 0, out.stderr
    v = mxfp8._mxfp8.version
    assert out.stdout.strip() == (f"mxfp8 {mxfp8.__version__} (libmxfp8 {v // 10000}.{v // 100 % 100}.{v % 100}, "
                                  f"{'CUDA and CPU paths' if mxfp8._mxfp8.with_cuda else 'CPU path only'})")


def test_no_command_is_a_usage_error():
    out = run()
    assert out.returncode == 2 and "usage: python -m mxfp8" in out.stderr and "demo" in out.stderr


@pytest.mark.parametrize("args", [["demo", "--device", "tpu"], ["demo", "--bogus"], ["nonsense"], ["demo", "--size"],
                                  ["checkpoint", "--demo", "OUT", "--layers", "0"],
                                  ["checkpoint", "--demo", "OUT", "--layers", "-1"],
                                  ["checkpoint", "--demo", "OUT", "--layers", "two"]])
def test_bad_arguments_are_usage_errors(args, tmp_path):
    out = run(*[str(tmp_path / a) if a == "OUT" else a for a in args])
    assert out.returncode == 2 and "error:" in out.stderr, (out.stdout, out.stderr)
    assert not (tmp_path / "OUT").exists()  # --layers -1 wrote a model of -1 layers (its config said so)


def test_a_checkpoint_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    # A file where the folder goes: the error in one line, exit 1, no traceback (it printed the whole
    # FileExistsError), and the caller's file untouched.
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    occupied = tmp_path / "a-file"
    occupied.write_text("mine")
    assert _cli.main(["checkpoint", "--demo", str(occupied), "--layers", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m mxfp8 checkpoint: error: ") and err.count("\n") == 1, err
    assert occupied.read_text() == "mine"


def test_help_and_version_need_no_numpy():
    for args in (["--help"], ["demo", "--help"], ["--version"]):
        out = run(*args, block_numpy=True)
        assert out.returncode == 0, (args, out.stderr)


def test_demo_without_numpy_names_it():
    out = run("demo", "--device", "cpu", block_numpy=True)
    assert out.returncode == 1
    assert "needs NumPy: pip install numpy" in out.stderr and "Traceback" not in out.stderr


def test_info(capsys):
    assert _cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"mxfp8 {mxfp8.__version__} ")
    assert "libmxfp8.so.0" in out and "numpy:" in out


def test_demo_runs_and_checks(capsys):
    assert _cli.main(["demo", "--device", "cpu", "--size", "small"]) == 0
    out = capsys.readouterr().out
    assert "11 weights, 43.3 M values" in out and "all bit-exact" in out and "MISMATCH" not in out


def test_demo_fails_when_a_check_fails(monkeypatch, capsys):
    from mxfp8 import _demo

    real = _demo.run_one

    def one_wrong(backend, name, shape):
        r = real(backend, name, shape)
        return dict(r, ok=False) if name == "lm_head.partial_blocks" else r

    monkeypatch.setattr(_demo, "run_one", one_wrong)
    monkeypatch.setattr(_demo, "weight_set", lambda big: [("o_proj", (256, 256)), ("lm_head.partial_blocks", (100, 100))])
    assert _cli.main(["demo", "--device", "cpu"]) == 1
    assert "MISMATCH in lm_head.partial_blocks" in capsys.readouterr().out


def test_declared_dependencies():
    """A wheel install brings what the command line needs (issue 34: --help failed on a bare install)."""
    try:
        requires = metadata.requires("mxfp8") or []
    except metadata.PackageNotFoundError:
        pytest.skip("mxfp8 is not installed as a distribution (run from a source tree)")
    names = {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for r in requires
             if "extra ==" not in r}
    assert {"numpy", "ml_dtypes"} <= names, requires


def test_a_reader_that_leaves_early_gets_no_traceback():
    # `python -m mxfp8 info | head -1`: once head exits, writing raises BrokenPipeError; the command ends
    # quietly (status 1), not with a traceback on stderr. The pipe here is closed before the command writes.
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([sys.executable, "-m", "mxfp8", "info"], stdout=write, stderr=subprocess.PIPE, text=True,
                             timeout=120)
    finally:
        os.close(write)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
