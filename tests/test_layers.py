"""The Python package's layers (docs/architecture.md): no module imports another that imports
it back, at the top or inside a function, and the feature modules sit on the engine's front
(`tierkit._engine`), never on `tierkit.api`, which sits on them."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "python" / "tierkit"
#: what api.py is made of: they must not import it
FEATURES = ("_engine", "cori", "learned", "learned.lstm", "profiling", "guidance", "replaying", "report", "untrusted", "output")


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        mod = ".".join(parts[:-1] if is_init else parts) or "__init__"
        pkg = parts[:-1] if is_init else parts[:-1]
        deps = set()
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.ImportFrom) and n.level >= 1:
                base = pkg[: len(pkg) - (n.level - 1)]
                if n.module:
                    deps.add(".".join(base + [n.module]))
                else:
                    deps |= {".".join(base + [a.name]) for a in n.names}
        graph[mod] = deps
    return {m: {d for d in ds if d in graph and d != m} for m, ds in graph.items()}


def test_no_module_imports_in_a_circle():
    g = imports()
    g.pop("__init__", None)  # the package's face imports everything; nothing imports it back

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for d in g.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    circles = sorted(m for m in g if m in reach(m))
    assert not circles, f"modules in an import circle: {circles}"


def test_the_features_sit_below_the_api():
    g = imports()
    for m in FEATURES:
        assert "api" not in g.get(m, set()), f"{m} imports tierkit.api (import tierkit._engine instead)"
