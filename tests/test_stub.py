"""python/tierkit/_core.pyi says what the compiled extension takes: every function of the
extension is in the stub with the same parameters, in the same order, with the same defaults
(mypy checks the Python side against the stub in make lint, so a stale stub hides bugs)."""
import ast
import inspect
from pathlib import Path

from tierkit import _core

STUB = Path(__file__).resolve().parents[1] / "python" / "tierkit" / "_core.pyi"


def stub_functions():
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            names = [x.arg for x in a.args]
            defaults = [ast.literal_eval(d) for d in a.defaults]
            out[node.name] = (names, dict(zip(names[len(names) - len(defaults):], defaults)))
    return out


def extension_functions():
    out = {}
    for name in dir(_core):
        f = getattr(_core, name)
        if callable(f) and not isinstance(f, type) and not name.startswith("_"):
            sig = inspect.signature(f)
            out[name] = ([p for p in sig.parameters],
                         {p: v.default for p, v in sig.parameters.items() if v.default is not inspect.Parameter.empty})
    return out


def test_the_stub_has_every_function_of_the_extension_as_it_is():
    stub, ext = stub_functions(), extension_functions()
    assert sorted(stub) == sorted(ext)
    for name, (params, defaults) in ext.items():
        assert stub[name][0] == params, name
        assert stub[name][1] == defaults, name
