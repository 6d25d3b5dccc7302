"""A property test of the CLI's argument and file handling (docs/limits.md, "Error lines": half the
user-facing errors are raised in Python). Generated options (sizes, times, capacities, policy specs,
platform names and files, cache specs) and paths (odd characters, missing, a directory, an
existing output without --force) go through the CLI in-process: every run ends with status 0,
or with status 2 and exactly one line on stderr, ``tierkit: error: ...``, of at most 200
characters. Never a traceback, never status 1 or 3.

Deterministic and short: derandomized, a fixed number of examples, no example database."""
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tierkit  # noqa: E402
from tierkit import _core, api, report  # noqa: E402
from tierkit.cli import main  # noqa: E402

#: TIERKIT_FUZZ_EXAMPLES=N TIERKIT_FUZZ_SEED=random runs more, randomized examples (a longer hunt)
SCALE = int(os.environ.get("TIERKIT_FUZZ_EXAMPLES", "0")) / 60 or 1
FUZZ = settings(derandomize=os.environ.get("TIERKIT_FUZZ_SEED") != "random", database=None, deadline=None,
                max_examples=int(60 * SCALE),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

# the learned policies train models (seconds each): their argument handling is in test_learned_sched.py
POLICIES = {p["name"]: p for p in json.loads(_core.policies()) if p["name"] not in ("kleio", "kleoniki")}
PRESETS = [p["name"] for p in json.loads(_core.platforms())]


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("fuzz") / "small.tkt"
    tierkit.synth("zipf", p, accesses=3_000, pages=300, seed=7, write_ratio=0.3, progress=False)
    return p


def run(argv):
    """``tierkit ARGV`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:  # must not happen: main returns its status
            rc = f"SystemExit({e.code})"
    return rc, out.getvalue(), err.getvalue()


def check(argv):
    rc, out, err = run(argv)
    if os.environ.get("TIERKIT_FUZZ_LOG"):
        with open(os.environ["TIERKIT_FUZZ_LOG"], "a") as f:
            f.write(json.dumps([rc, [str(a) for a in argv], err.strip()[:300]]) + "\n")
    lines = [l for l in err.splitlines() if l.strip()]
    # (a Python traceback's first line: a drawn argument may itself be the word "Traceback",
    # which the one-line error then quotes)
    assert "Traceback (most recent call last)" not in err, (argv, err)
    if rc == 0:
        return rc, out, err
    assert rc == 2, (argv, rc, err)
    assert len(lines) == 1 and lines[0].startswith("tierkit: error: "), (argv, err)
    assert len(lines[0]) <= 480, (argv, len(lines[0]), lines[0])
    return rc, out, err


def no_temporaries(root):
    """No ``.partial`` file left (but one the user named so: odd_names gives 'name.partial')."""
    return [p for p in root.rglob("*.partial") if p.name != "name.partial"] == []


# ------------------------------------------------------------------------------ values

numbers = st.one_of(
    st.integers(-(2 ** 70), 2 ** 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-0", "1e308", "-1", "nan", "inf", "0x10", "1_000", "", " ", "1.", ".5", "1e-400"]),
)
sizes = st.one_of(
    numbers,
    st.builds(lambda n, u: f"{n}{u}", st.integers(-3, 5000),
              st.sampled_from(["", "K", "M", "G", "T", "P", "E", "Z", "k", "KiB", "MB", "B", "x", "K8"])),
)
times = st.builds(lambda n, u: f"{n}{u}", st.one_of(st.integers(-5, 10 ** 6).map(str), st.sampled_from(["0.5", "1e9", "nan", ""])),
                  st.sampled_from(["", "ns", "us", "ms", "s", "-insn", "min", "h", "µs"]))
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
fractions = st.one_of(st.floats(-1, 2).map(lambda v: f"{v:.3g}"), sizes)


def mostly(good, odd):
    """``good`` three times in four, else ``odd``: runs that get past the options too."""
    # hypothesis leans to small draws: 0..2 are the good ones
    return st.integers(0, 3).flatmap(lambda i: odd if i == 3 else good)


@st.composite
def policy_specs(draw):
    name = draw(mostly(st.sampled_from(sorted(POLICIES)), words))
    params = POLICIES.get(name, {"params": []})["params"]
    kv = []
    for _ in range(draw(st.integers(0, 2))):
        key = draw(mostly(st.sampled_from([a["name"] for a in params]), words) if params else words)
        kv.append(f"{key}={draw(st.one_of(numbers, times, sizes, words))}")
    sep = draw(st.sampled_from([",", ", ", ",,", ";"]))
    return name + (":" + sep.join(kv) if kv else draw(mostly(st.just(""), st.sampled_from([":", ":=", ":k"]))))


cache_specs = st.one_of(
    st.sampled_from(["none", "default", "small", "knl", "skylake-sp", "L1:32K:8", "L1:32K:8,L2:1M:16", "L1:1T:16", "L9",
                     "L1:0:8", "L1:64:0", "L1:32K:3", ":::", "L1:32K:8,"]),
    st.builds(lambda a, b, c: f"L1:{a}:{b}{c}", sizes, numbers, st.sampled_from(["", ",L2:1M:16", ":x"])),
)


@st.composite
def odd_names(draw):
    """File names users can give: spaces, unicode, leading dashes, dots, very long."""
    return draw(st.one_of(
        st.sampled_from(["out put.csv", "ünï©ødé.png", "-dash.csv", ".hidden", "..", ".", "a" * 300, "x\ty.csv",
                         "new\nline.csv", "semi;colon|pipe.png", "quote'\"s.csv", "name.partial"]),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="/\x00"), min_size=1, max_size=40),
    ))


@st.composite
def out_paths(draw, root):
    """An output path under ``root``: new, existing (a file or a directory), in a missing or
    a read-only-file parent."""
    name = draw(odd_names())
    kind = draw(st.sampled_from(["new", "new", "existing", "directory", "missing-parent", "file-parent"]))
    p = root / name
    try:
        if kind == "existing":
            p.write_bytes(b"precious")
        elif kind == "directory":
            p.mkdir(exist_ok=True)
        elif kind == "missing-parent":
            p = root / "no-such-dir" / name
        elif kind == "file-parent":
            (root / "plain-file").write_bytes(b"x")
            p = root / "plain-file" / name
    except OSError:
        pass  # the name itself is refused by the file system: still a path to give the CLI
    return p


@st.composite
def in_paths(draw, root, trace):
    kind = draw(st.sampled_from(["trace"] * 6 + ["missing", "directory", "empty", "garbage", "text"]))
    if kind == "trace":
        return trace
    p = root / f"in-{kind}"
    if kind == "directory":
        p.mkdir(exist_ok=True)
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "garbage":
        p.write_bytes(draw(st.binary(max_size=200)))
    elif kind == "text":
        p.write_text(draw(st.text(max_size=200)))
    return p


@st.composite
def platform_args(draw, root):
    kind = draw(st.sampled_from(["preset", "preset", "preset", "preset", "word", "file"]))
    if kind == "preset":
        return draw(st.sampled_from(PRESETS))
    if kind == "word":
        return draw(words.filter(lambda w: not w.startswith("-")))
    ext = draw(st.sampled_from([".toml", ".yaml", ".json", ".txt"]))
    p = root / f"plat{ext}"
    tier = lambda n: (f'[[tiers]]\nname = "{n}"\nread_latency_ns = {draw(numbers) or 1}\nwrite_latency_ns = 2\n'  # noqa: E731
                      f'read_bw_gb_per_s = {draw(numbers) or 1}\nwrite_bw_gb_per_s = 1\ncapacity = "{draw(sizes)}"\n')
    p.write_text(f'name = "p"\n{tier("A")}{tier("B")}' if ext == ".toml" else draw(st.text(max_size=100)))
    return p


# --------------------------------------------------------------------------- the properties


@FUZZ
@given(data=st.data())
def test_simulate_options_and_files(small_trace, data):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        argv = ["simulate", data.draw(in_paths(root, small_trace)), "-q",
                "--platform", data.draw(platform_args(root)), "--policy", data.draw(policy_specs())]
        # each option is given one time in three; a valid value three times in four
        some = lambda: data.draw(st.integers(0, 2)) == 2  # noqa: E731
        if some():
            argv += ["--fast-capacity", data.draw(mostly(st.sampled_from(["0.1", "0.5", "1", "64K", "1M"]), fractions))]
        if some():
            argv += ["--capacity", data.draw(st.builds(lambda t, v: f"{t}={v}", mostly(st.sampled_from(["DRAM", "PMEM", "0", "1"]), words), sizes))]
        if some():
            argv += ["--timing", data.draw(mostly(st.sampled_from(["simple", "detailed"]), words))]
        if some():
            argv += ["--cache", data.draw(cache_specs)]
        if some():
            argv += ["--format", data.draw(mostly(st.just("tkt"), st.sampled_from(["hex", "ramulator", "lackey", "pin", ""])))]
        if some():
            argv += ["--repeat", data.draw(mostly(st.sampled_from(["1", "2"]), st.sampled_from(["0", "-1", "x", "99999999999999999999"])))]
        if some():
            argv += ["--time-scale", data.draw(mostly(st.sampled_from(["1", "0.5", "10", "1e6"]),
                                                      st.sampled_from(["0", "-2", "nan", "inf", "1e308", "x"])))]
        if some():
            argv += ["--timeseries", data.draw(out_paths(root))]
        if some():
            argv += ["--json"]
        if data.draw(st.booleans()):
            argv += ["--force"]
        check(argv)


@FUZZ
@given(data=st.data())
def test_trace_commands_files_and_sizes(small_trace, data):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cmd = data.draw(st.sampled_from(["info", "convert", "synth", "synth"]))
        if cmd == "info":
            argv = ["trace", "info", data.draw(in_paths(root, small_trace)), "-q"]
            if data.draw(st.booleans()):
                argv += ["--cache", data.draw(cache_specs)]
        elif cmd == "convert":
            argv = ["trace", "convert", data.draw(in_paths(root, small_trace)), data.draw(out_paths(root)), "-q"]
            if data.draw(st.booleans()):
                argv += ["--to", data.draw(st.sampled_from(["tkt", "hex", "ramulator", "lackey", "x"]))]
        else:
            # bounded sizes: a legal 10^18-access request is work, not an error
            small = mostly(st.one_of(st.integers(1, 20_000).map(str), st.sampled_from(["1K", "2k", "0.5K", "1e3"])),
                           st.sampled_from(["0", "-5", "x", "", "-1K", "1.5"]))
            argv = ["trace", "synth", data.draw(mostly(st.sampled_from(["zipf", "uniform", "stream", "phases"]), words)),
                    "-n", data.draw(small), "--pages", data.draw(small), "-o", data.draw(out_paths(root)), "-q"]
            for opt, good, odd in (("--seed", st.integers(0, 2 ** 64 - 1).map(str), numbers),
                                   ("--write-ratio", st.floats(0, 1).map(repr), numbers),
                                   ("--theta", st.floats(0, 3).map(repr), numbers),
                                   ("--phases", st.integers(1, 8).map(str), st.integers(-3, 0).map(str)),
                                   ("--hot-fraction", st.floats(0, 1).map(repr), numbers),
                                   ("--insn-per-access", st.integers(0, 1000).map(str), numbers)):
                if data.draw(st.integers(0, 2)) == 2:
                    argv += [opt, data.draw(mostly(good, odd))]
        if data.draw(st.booleans()):
            argv += ["--force"]
        check(argv)


@settings(FUZZ, max_examples=int(8 * SCALE))
@given(data=st.data())
def test_compare_out_and_plots(small_trace, data):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        out = data.draw(out_paths(root))
        pre = data.draw(st.sampled_from([None, "results.csv", "timeseries-1-otf.png", "heatmap-0-small.tkt.png", "index.html"]))
        pre = pre if os.path.isdir(out) else None
        if pre:
            (out / pre).write_bytes(b"precious")
        policies = data.draw(st.sampled_from(["first-touch", "first-touch,otf", "otf", "nope"]))
        argv = ["compare", small_trace, "-q", "--policies", policies,
                "-c", data.draw(st.sampled_from(["0.2", "0.5", "2", "x"])), "--out", out]
        force = data.draw(st.booleans())
        if force:
            argv += ["--force"]
        rc, _, err = check(argv)
        planned = report.planned_files(api.compare_runs([small_trace], policies)) if policies != "nope" else []
        if pre and pre in planned and not force:
            assert rc == 2 and (out / pre).read_bytes() == b"precious", err
        if pre and pre not in planned:
            # not this report's: left alone, --force or not
            assert (out / pre).read_bytes() == b"precious", err
        if rc == 0:
            assert not (out / "INCOMPLETE").exists() and (out / "index.html").stat().st_size > 0
        assert no_temporaries(root)


@settings(FUZZ, max_examples=int(20 * SCALE))
@given(data=st.data())
def test_profile_guide_and_heatmap_files(small_trace, data):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cmd = data.draw(st.sampled_from(["profile", "guide", "heatmap", "platforms"]))
        if cmd == "profile":
            argv = ["profile", data.draw(in_paths(root, small_trace)), "-o", data.draw(out_paths(root)), "-q"]
            if data.draw(st.booleans()):
                argv += ["--slice", data.draw(st.one_of(sizes, times))]
            if data.draw(st.booleans()):
                argv += ["--phases", data.draw(st.integers(-2, 70).map(str))]
        elif cmd == "guide":
            prof = root / "p.json"
            prof.write_text(data.draw(st.one_of(st.text(max_size=80), st.just('{"format": "tierkit-profile"}'))))
            argv = ["guide", prof, "-o", data.draw(out_paths(root)), "--capacity", data.draw(fractions),
                    "--strategy", data.draw(st.sampled_from(["thermos", "knapsack", "hotset", "x"]))]
        elif cmd == "heatmap":
            argv = ["trace", "heatmap", data.draw(in_paths(root, small_trace)), "-o", data.draw(out_paths(root)), "-q",
                    "--period", data.draw(st.sampled_from(["1", "100", "0", "-1", "x", "99999999999"]))]
        else:
            argv = ["platforms", data.draw(platform_args(root))]
        if data.draw(st.booleans()):
            argv += ["--force"]
        check(argv)
        assert no_temporaries(root)


# ------------------------------------------- regressions found by the property tests above


def test_heatmap_of_a_missing_trace_at_a_given_period_is_one_line(tmp_path):
    # found by test_profile_guide_and_heatmap_files (a randomized run): with --period given,
    # the per-period counts stat()ed the trace before the core read it: a FileNotFoundError
    # traceback, exit 1
    rc, _, err = check(["trace", "heatmap", tmp_path / "in-missing", "-o", tmp_path / "h.png", "--period", "1", "-q"])
    assert rc == 2 and "in-missing" in err and not (tmp_path / "h.png").exists(), err


def test_compare_out_with_a_name_too_long_is_one_line(zipf_trace, tmp_path):
    # found by test_compare_out_and_plots (a randomized run): pathlib's exists() raises
    # ENAMETOOLONG: a traceback, exit 1
    rc, _, err = check(["compare", zipf_trace, "--policies", "first-touch", "-q", "--out", tmp_path / ("a" * 300)])
    assert rc == 2 and "File name too long" in err, err
