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
