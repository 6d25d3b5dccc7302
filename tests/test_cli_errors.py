"""The CLI gives clear errors: one line naming the file and offset/line or the key, exit 2,
no traceback."""
import pytest


def one_error_line(rc, out, err):
    assert rc == 2, (rc, out, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tierkit: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_truncated_trace_names_file_and_offset(cli, zipf_trace, tmp_path):
    data = zipf_trace.read_bytes()
    cut = tmp_path / "cut.tkt"
    cut.write_bytes(data[: len(data) // 2])
    for args in (["trace", "info", cut], ["simulate", cut, "-c", "0.2"]):
        line = one_error_line(*cli(*args))
        assert "cut.tkt" in line and "offset" in line and "truncated" in line, line


def test_corrupted_trace_names_file_and_offset(cli, zipf_trace, tmp_path):
    data = bytearray(zipf_trace.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.tkt"
    bad.write_bytes(bytes(data))
    line = one_error_line(*cli("simulate", bad, "-c", "0.2"))
    assert "bad.tkt" in line and "offset" in line and "corrupt" in line, line


def test_unparsable_text_line_names_line(cli, tmp_path):
    t = tmp_path / "t.hex"
    t.write_text("0x1000\n0x2000\nzzz-not-hex\n")
    line = one_error_line(*cli("simulate", t, "--format", "hex"))
    assert "t.hex" in line and "line 3" in line, line


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--platform", "hbm-ddr9"], "hbm-ddr9"),
        (["--policy", "frist-touch"], "frist-touch"),
        (["--policy", "interleave:wieghts=4/4"], "wieghts"),
        (["--fast-capacity", "1.5"], "--fast-capacity"),
        (["--fast-capacity", "0"], "--fast-capacity"),
        (["--timing", "cycle-accurate"], "cycle-accurate"),
        (["--format", "pin"], "pin"),
        (["--capacity", "NVM=0.5"], "NVM"),
    ],
)
def test_bad_names_and_values_name_the_key(cli, zipf_trace, args, needle):
    line = one_error_line(*cli("simulate", zipf_trace, "-c", "0.2", *args) if "--fast-capacity" not in args else cli("simulate", zipf_trace, *args))
    assert needle in line, line


def test_capacity_that_cannot_hold_the_footprint(cli, zipf_trace, tmp_path):
    plat = tmp_path / "tiny.toml"
    plat.write_text(
        'name = "tiny"\n'
        '[[tiers]]\nname = "A"\nread_latency_ns = 1\nwrite_latency_ns = 1\nread_bw_gb_per_s = 1\nwrite_bw_gb_per_s = 1\ncapacity = "64K"\n'
        '[[tiers]]\nname = "B"\nread_latency_ns = 2\nwrite_latency_ns = 2\nread_bw_gb_per_s = 1\nwrite_bw_gb_per_s = 1\ncapacity = "64K"\n'
    )
    line = one_error_line(*cli("simulate", zipf_trace, "--platform", plat))
    assert "capacity" in line and "cannot work" in line, line


def test_missing_file_and_usage_errors(cli, tmp_path):
    line = one_error_line(*cli("simulate", tmp_path / "nope.tkt"))
    assert "nope.tkt" in line
    line = one_error_line(*cli("simulate", tmp_path / "nope.tkt", "--no-such-option"))
    assert "--no-such-option" in line


def test_never_overwrites_without_force(cli, zipf_trace, tmp_path):
    out = tmp_path / "o.tkt"
    out.write_bytes(b"precious")
    line = one_error_line(*cli("trace", "convert", zipf_trace, out))
    assert "o.tkt" in line and "--force" in line
    assert out.read_bytes() == b"precious"
    line = one_error_line(*cli("trace", "synth", "zipf", "-n", "100", "--pages", "10", "-o", out))
    assert out.read_bytes() == b"precious"
    rc, _, err = cli("trace", "convert", zipf_trace, out, "--force")
    assert rc == 0, err


def test_report_dir_not_overwritten_without_force(cli, zipf_trace, tmp_path):
    d = tmp_path / "rep"
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d)
    assert rc == 0, err
    line = one_error_line(*cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d))
    assert "--force" in line
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d, "--force")
    assert rc == 0, err


# ----------------------------------------------------------- issue 15: bounded work, numbers
# (the engine-side cases, every policy with a time period included, are in
# crates/tierkit-core/tests/bounded.rs)


def test_period_at_its_own_cost_ends_with_a_warning(cli, zipf_trace):
    """003 §3.1 (history on dram-pmem, 3 µs per period): a 3 µs period used to cascade
    forever; it now ends, at most one boundary per access, with a warning naming the period."""
    import json

    rc, out, err = cli("simulate", zipf_trace, "-p", "dram-pmem", "-P", "history:period=3us", "--json")
    assert rc == 0, err
    r = json.loads(out)
    r = r[0] if isinstance(r, list) else r
    assert r["stats"]["engine"]["boundaries"] <= r["accesses"]
    assert any("folded into the next" in w and "3 µs" in w for w in r["warnings"]), r["warnings"]


def test_cache_size_is_checked_before_allocating(cli, zipf_trace, tmp_path):
    """--cache L1:1T:16 asked for 128 GiB of tags and aborted with a backtrace."""
    line = one_error_line(*cli("trace", "convert", zipf_trace, tmp_path / "c.tkt", "--cache", "L1:1T:16"))
    assert "--cache" in line and "at most 16777216 lines" in line, line
    assert not (tmp_path / "c.tkt").exists()


def _platform(tmp_path, name, old, new):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "platforms" / "dram-pmem.toml").read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize("old,new,key", [
    ("read_latency_ns = 50.0", "read_latency_ns = 1e308", "read_latency_ns"),
    ("read_bw_gb_per_s = 10.0", "read_bw_gb_per_s = 1e-300", "read_bw_gb_per_s"),
    ("per_page_ns = 1000.0", "per_page_ns = 1e300", "migration.per_page_ns"),
])
def test_extreme_platform_numbers_are_named(cli, zipf_trace, tmp_path, old, new, key):
    """A latency of 1e308 made the runtime infinite (--json printed null); every platform number
    is now checked against a documented range (docs/limits.md)."""
    p = _platform(tmp_path, "x.toml", old, new)
    line = one_error_line(*cli("simulate", zipf_trace, "-p", p, "--json"))
    assert "x.toml" in line and key in line and "out of range" in line, line


def test_deeply_nested_yaml_platform_is_rejected_at_once(cli, zipf_trace, tmp_path):
    """A 100,000-deep YAML platform took 97 s to a clean error; a pre-scan now stops it."""
    p = tmp_path / "deep.yaml"
    p.write_text("name: x\ntiers: " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = one_error_line(*cli("simulate", zipf_trace, "-p", p))
    assert "deep.yaml" in line and "nested deeper" in line and "at most 32 levels" in line, line


@pytest.mark.parametrize("opt,value", [("--phases", "-3"), ("--seed", "-1"), ("--insn-per-access", "-2"),
                                       ("--seed", str(2**64)), ("--pages", "-5")])
def test_negative_synth_parameters_are_one_line(cli, tmp_path, opt, value):
    line = one_error_line(*cli("trace", "synth", "phases", "-n", "1000", "--pages", "10", "-o", tmp_path / "s.tkt", "-q",
                               opt, value))
    assert opt in line, line
    assert not (tmp_path / "s.tkt").exists()


@pytest.mark.parametrize("where,key", [("site", "sites[1].peak_bytes"), ("totals", "totals.peak_live_bytes"),
                                       ("reads", "sites[1].reads")])
def test_profile_with_absurd_sizes_is_one_line(cli, tmp_path, where, key):
    """000 §3.1 guidance from a profile whose sizes do not fit the strategies' int64 sums."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_guide import profile_dict

    p = profile_dict()
    if where == "site":
        p["sites"][1]["peak_bytes"] = 2**70
    elif where == "totals":
        p["totals"]["peak_live_bytes"] = 10**30
    else:
        p["sites"][1]["reads"] = 2**64
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(p))
    line = one_error_line(*cli("guide", f, "-o", tmp_path / "g.json", "--capacity", "0.4"))
    assert "prof.json" in line and key in line and "2**48" in line, line
