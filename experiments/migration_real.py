"""Dynamic migration on real programs (docs/experiments.md, "Dynamic migration on real
programs"): the tables of study 7 (experiments/migration/7-real.yaml).

    python experiments/migration_real.py [OUT]     (default target/experiments/migration/7-real)

For each trace × capacity × passes: every policy's runtime against the baseline (interleave
4/4, 001's no-migration setting), with the pauses/resumes of the adaptive policies, once with
the default MBQ (`mbq=window`) and once with `mbq=cumulative`. Then the goal: the default
`otf-adaptive` is never slower than both `otf` and no migration, and within 2% of the better
of the two. Exit status 2 if the sweep has not run, 1 if a cell failed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_results import read  # noqa: E402

BASE = "interleave:weights=4/4"
DEFAULT = "otf-adaptive:algorithm=3"
COMMON = ["first-touch", "otf", "hma-epoch", "mempod"]
MODES = {
    "window": ["otf-adaptive:algorithm=1", "otf-adaptive:algorithm=2", DEFAULT, "otf-reverse"],
    "cumulative": [
        "otf-adaptive:algorithm=1,mbq=cumulative",
        "otf-adaptive:algorithm=2,mbq=cumulative",
        "otf-adaptive:algorithm=3,mbq=cumulative",
        "otf-reverse:mbq=cumulative",
    ],
}
SHORT = {"otf-adaptive:algorithm=": "A", ",mbq=cumulative": "", "otf-reverse:mbq=cumulative": "otf-reverse"}


def short(p: str) -> str:
    for k, v in SHORT.items():
        p = p.replace(k, v)
    return p


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/experiments/migration/7-real")
    read(out, "experiments/migration/7-real.yaml")
    cells: dict[tuple, dict[str, tuple]] = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        c, res = r["config"], r["result"]
        pol = res.get("stats", {}).get("policy")
        n = pol.get("counters", {}) if isinstance(pol, dict) else {}
        key = (c["trace"].removesuffix(".gz").removesuffix(".tkt"), c["fast_capacity"], c["repeat"])
        cells.setdefault(key, {})[c["policy"]] = (res["runtime_ns"], res["migrations"], n.get("pauses"), n.get("resumes"))
    for mode, adaptive in MODES.items():
        pols = COMMON[:2] + adaptive + COMMON[2:]
        print(f"\n### MBQ = {mode}\n")
        print("| trace | HBM | passes | " + " | ".join(short(p) for p in pols) + " |")
        print("| --- | --- | --- |" + " --- |" * len(pols))
        for key in sorted(cells):
            d = cells[key]
            b = d[BASE][0]
            row = []
            for p in pols:
                t, _, pa, re = d[p]
                s = f"{100 * (t / b - 1):+.1f}%"
                if pa is not None and p not in ("otf", "hma-epoch", "mempod"):
                    s += f" ({pa}/{re})"
                row.append(s)
            print(f"| {key[0]} | {key[1]:.1%} | {key[2]} | " + " | ".join(row) + " |")
    other = [DEFAULT, "otf-adaptive:algorithm=3,probe=0", "otf-adaptive:algorithm=3,rule=listing", "otf-adaptive:algorithm=3,mbq=cumulative",
             "otf-adaptive:algorithm=3,rule=listing,mbq=cumulative"]
    print("\n### Algorithm 3: probes, rule and MBQ\n")
    print("| trace | HBM | passes | otf | " + " | ".join(p.removeprefix("otf-adaptive:algorithm=3").lstrip(",") or "default" for p in other) + " |")
    print("| --- | --- | --- | --- |" + " --- |" * len(other))
    for key in sorted(cells):
        d = cells[key]
        b = d[BASE][0]
        row = [f"{100 * (d['otf'][0] / b - 1):+.1f}%"]
        for p in other:
            t, _, pa, re = d[p]
            row.append(f"{100 * (t / b - 1):+.1f}% ({pa}/{re})")
        print(f"| {key[0]} | {key[1]:.1%} | {key[2]} | " + " | ".join(row) + " |")
    ok = within = 0
    for key, d in sorted(cells.items()):
        b, o, a = d[BASE][0], d["otf"][0], d[DEFAULT][0]
        best = min(b, o)
        ok += a <= max(b, o)
        within += a <= best * 1.02
    n = len(cells)
    print(f"\ndefault otf-adaptive: not slower than both otf and no migration in {ok} of {n} cells; "
          f"within 2% of the better of the two in {within} of {n}")


if __name__ == "__main__":
    main()
