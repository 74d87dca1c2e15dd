"""The type stub of the extension (the repository's mxfp8/_mxfp8.pyi) names what the installed extension has:
every function and class of _mxfp8, and every public method of its classes, and nothing else."""
import ast
import pathlib

from mxfp8 import _mxfp8

STUB = pathlib.Path(__file__).resolve().parents[1] / "mxfp8" / "_mxfp8.pyi"


def stub_names():
    tree = ast.parse(STUB.read_text())
    names, methods = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            methods[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return names, methods


def public(names):
    return {n for n in names if not n.startswith("_") or n in ("__init__", "__dlpack__", "__dlpack_device__")}


def test_the_stub_names_every_function_and_class_of_the_extension():
    names, _ = stub_names()
    assert names == public(set(dir(_mxfp8)) - {"__doc__", "__file__", "__loader__", "__name__", "__package__",
                                               "__spec__"})


def test_the_stub_names_every_method_of_each_class():
    _, methods = stub_names()
    for cls, stubbed in methods.items():
        real = public(set(vars(getattr(_mxfp8, cls))))
        real.discard("__init__")  # pybind11 classes without a constructor still have one (raising TypeError)
        assert public(stubbed) - {"__init__"} == real, cls


def test_the_entry_signature_matches_the_call_the_python_layer_makes():
    tree = ast.parse(STUB.read_text())
    (entry,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "export_components"]
    assert [a.arg for a in entry.args.posonlyargs] == ["data", "scale_inv", "shape", "fp8_dtype", "swizzled", "direction",
                                                       "values_dtype", "scales_dtype", "contiguous", "block", "stream",
                                                       "rows", "cols"]
    assert _mxfp8.export_components.__text_signature__ == (
        "(data, scale_inv, shape, fp8_dtype, swizzled, direction, values_dtype, scales_dtype, contiguous, block, stream, "
        "rows, cols)")
    # and the Python function passes its own parameters, in this order
    import inspect

    import mxfp8

    assert list(inspect.signature(mxfp8.export_components).parameters) == [a.arg for a in entry.args.posonlyargs]
