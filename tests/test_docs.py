"""docs/policies.md's parameter tables are the policies' declarations (python/tierkit/_docs.py):
every policy with parameters has a table, and each table is what the declarations give
(`python -m tierkit._docs` rewrites them after a declaration changes)."""
from tierkit import _docs


def test_every_parameter_table_is_generated_from_the_declarations():
    text = _docs.DOC.read_text(encoding="utf-8")
    decl = _docs.declarations()
    assert {n for n, p in decl.items() if p["params"]} <= _docs.documented(text)
    assert _docs.render(text, decl) == text, "run python -m tierkit._docs"
    # each declared parameter is named in the docs (the tables hold all 200-odd)
    for name, p in decl.items():
        for q in p["params"]:
            assert f"| `{q['name']}` |" in text, (name, q["name"])


def test_nothing_cites_the_issue_tracker():
    """Comments, docs and messages cite papers and documentation: users cannot see the
    project's issue tracker, so a numbered issue tells them nothing."""
    import re

    root = _docs.DOC.parents[1]
    cite = re.compile(r"\bissues? \d+\b(?! instructions)", re.I)
    found = []
    for d in ("python", "crates", "docs", "tests", "fuzz/python", "fuzz/src", "fuzz/fuzz_targets", "bench", "experiments",
              "workloads", "testbed", "tracer", "data/recipes"):
        for p in (root / d).rglob("*"):
            if p.suffix in (".py", ".rs", ".md", ".c", ".h", ".cc", ".yaml", ".toml", ".sh") and "target" not in p.parts:
                for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                    if cite.search(line):
                        found.append(f"{p.relative_to(root)}:{n}: {line.strip()[:100]}")
    for p in (root / "README.md", root / "Makefile"):
        found += [f"{p.name}:{n}" for n, line in enumerate(p.read_text().splitlines(), 1) if cite.search(line)]
    assert not found, "\n".join(found[:20])
    from tierkit import _core

    assert not cite.search(_core.policies())
