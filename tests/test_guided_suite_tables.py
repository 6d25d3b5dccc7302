"""experiments/guided_suite.py (docs/experiments.md, "Guidance on real programs"): every figure
is a share of all-fast's gain, and the capacity a "best" column reports is the one that did
best on the run it scores (an oracle, and labelled so)."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


def load():
    spec = importlib.util.spec_from_file_location("guided_suite", ROOT / "experiments" / "guided_suite.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_shares_of_all_fast_gain_and_the_oracle_capacity():
    gs = load()
    rows = []

    def add(grid, policy, rt, platform="hbm-ddr3", pages=100):
        rows.append({"trace": "p-ref", "grid": grid, "platform": platform, "policy": policy, "runtime_ns": rt, "pages": pages})

    # first-touch 100, all-fast 80: a policy at 100 - 20 * s captures the share s
    for grid, plat in (("ref", "hbm-ddr3"), ("dram-pmem", "dram-pmem"), ("fast50", "hbm-ddr3")):
        add(grid, "first-touch", 100.0, plat)
        add(grid, "all-fast", 80.0, plat)
    share = {"thermos": 0.5, "hotset": 0.25, "knapsack": 0.0}
    for s, v in share.items():
        for c in gs.CAPS:
            bonus = 0.25 if (s == "knapsack" and c == 0.5) else 0.0  # knapsack is best at 50%
            add("ref", f"guided:strategy={s},capacity={c}", 100 - 20 * (v + bonus), pages=90)
            add("train", f"guided:strategy={s},capacity={c}", 100 - 20 * v / 2)
        add("dram-pmem", f"guided:strategy={s},capacity=0.125", 100 - 20 * v, "dram-pmem")
        add("fast50", f"guided:strategy={s},capacity=0.5", 100 - 20 * v / 5)
        if s != "knapsack":
            for d in gs.DEPTHS:
                add("context", f"guided:strategy={s},capacity=0.125,context={d}", 100 - 20 * min(1.0, v + d / 10))
            add("phases", f"guided:strategy={s},capacity=0.125,mode=per-phase", 110.0)
    t, detail = gs.tables(pd.DataFrame(rows))
    r = t.iloc[0]
    assert r["program"] == "p" and r["all-fast gain"] == pytest.approx(0.2)
    assert (r["thermos"], r["hotset"], r["knapsack"]) == pytest.approx((0.5, 0.25, 0.0))
    assert r["knapsack best (oracle)"] == pytest.approx(0.25) and r["knapsack best cap"] == 0.5
    assert r["thermos train"] == pytest.approx(0.25)
    assert r["thermos ctx8"] == pytest.approx(1.0) and r["hotset ctx2"] == pytest.approx(0.45)
    assert r["thermos per-phase"] == pytest.approx(-0.5), "slower than first touch: a negative share"
    assert (r["pages guided (min)"], r["pages first-touch"]) == (90, 100)
    assert detail["p"]["knapsack"]["ref"][0.5] == pytest.approx(0.25)
    assert r["fast50 thermos"] == pytest.approx(0.1) and r["fast50 thermos vs first-touch"] == pytest.approx(0.02)
    assert r["thermos vs first-touch"] == pytest.approx(0.1)
    # 000's comparison: best knapsack (95) against best hotset (95): a tie here
    assert r["knapsack best runtime (oracle)"] == pytest.approx(95.0) == r["hotset best runtime (oracle)"]
    md = gs.markdown(t)
    assert "oracle" in md and "| p | 20.0% | 50.0% | 25.0% | 0.0% |" in md
    # a missing cell is an error naming it, never a silent gap
    with pytest.raises(SystemExit, match="0 cells"):
        gs.tables(pd.DataFrame(rows[1:]))
