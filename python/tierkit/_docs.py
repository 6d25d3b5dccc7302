"""docs/policies.md's parameter tables, generated from the policies' declarations (the
`ParamSpec`s in crates/tierkit-core/src/policy/, as `tierkit policies --json` gives them), so
that the docs say what the code takes: every parameter, its type, unit, default and source.

    python -m tierkit._docs            # rewrite the tables in docs/policies.md
    python -m tierkit._docs --check    # exit 1 if a table differs (tests/test_docs.py)

A table is the text between `<!-- parameters: NAME[,NAME...] -->` and
`<!-- end of parameters -->`; the policies named share one table (a `policies` column says
which has a parameter when they differ)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
BLOCK = re.compile(r"(<!-- parameters: ([a-z0-9,-]+) -->\n)(.*?)(<!-- end of parameters -->)", re.S)


def _type(t: dict) -> str:
    k = t["type"]
    if k == "int":
        lo, hi = t["min"], t["max"]
        return f"integer {lo}–{hi}" if hi < 1 << 40 else f"integer ≥ {lo}"
    if k == "float":
        lo, hi = t["min"], t["max"]
        return f"number {lo:g}–{hi:g}" if hi < 1e15 else f"number ≥ {lo:g}"
    if k == "choice":
        return " / ".join(f"`{o}`" for o in t["options"])
    return {"bool": "true / false", "period": "period", "bytes": "size", "text": "text"}[k]


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def table(policies: list[str], decl: dict[str, dict]) -> str:
    """The markdown table of ``policies``' parameters (one row per parameter name)."""
    rows: dict[str, list[tuple[str, dict]]] = {}
    for p in policies:
        for q in decl[p]["params"]:
            rows.setdefault(q["name"], []).append((p, q))
    shared = len(policies) > 1
    head = ["parameter"] + (["policies"] if shared else []) + ["type", "unit", "default", "what it does", "source"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, qs in rows.items():
        q = qs[0][1]
        defaults = {p: x["default"] for p, x in qs}
        if len(set(defaults.values())) == 1:
            default = f"`{q['default']}`" if q["default"] != "" else "(none)"
        else:
            default = "; ".join(f"{p}: `{d}`" for p, d in defaults.items())
        cells = [f"`{name}`"]
        if shared:
            cells.append("all" if len(qs) == len(policies) else ", ".join(f"`{p}`" for p, _ in qs))
        helps = list(dict.fromkeys(x["help"] for _, x in qs))
        sources = list(dict.fromkeys(x["source"] for _, x in qs))
        cells += [_type(q["ty"]), q["unit"] or "—", default, " / ".join(helps), " / ".join(sources)]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n"


def declarations() -> dict[str, dict]:
    from . import _core

    return {p["name"]: p for p in json.loads(_core.policies())}


def render(text: str, decl: dict[str, dict]) -> str:
    def one(m: re.Match) -> str:
        names = m.group(2).split(",")
        unknown = [n for n in names if n not in decl]
        if unknown:
            raise SystemExit(f"docs/policies.md: parameters of unknown policy {unknown[0]!r}")
        return m.group(1) + table(names, decl) + m.group(4)

    return BLOCK.sub(one, text)


def documented(text: str) -> set[str]:
    """The policies whose parameters have a generated table."""
    return {n for m in BLOCK.finditer(text) for n in m.group(2).split(",")}


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    decl = declarations()
    new = render(text, decl)
    missing = [n for n, p in decl.items() if p["params"] and n not in documented(text)]
    if "--check" in argv:
        bad = new != text or missing
        if missing:
            print(f"docs/policies.md: no parameter table for {', '.join(missing)}", file=sys.stderr)
        if new != text:
            print("docs/policies.md: a parameter table differs from the declarations: run python -m tierkit._docs",
                  file=sys.stderr)
        return 1 if bad else 0
    DOC.write_text(new, encoding="utf-8")
    if missing:
        print(f"docs/policies.md: no parameter table for {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
