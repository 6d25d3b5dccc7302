"""What a newcomer meets first, held to what the README and docs/limits.md promise: the tour's
programs built by `make demo`, one error line (status 2) for a result file with nothing in it, a
warning when the fast tier holds the whole footprint, error lines that keep the known names and
say "did you mean", `tierkit.load`'s advice, `perf script`'s default output read, and a
recording's progress in records written."""
import json
import re
import shutil
import subprocess

import pytest

import tierkit
from conftest import ROOT


def one_error_line(rc, err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and "Traceback" not in err, (rc, err)
    return lines[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_builds_the_programs_the_tour_records():
    """The README's tour runs as written after `make demo`: the workloads it records
    (workloads/build/gups) are among what `make demo` builds."""
    readme = (ROOT / "README.md").read_text()
    used = set(re.findall(r"workloads/build/(\w+)", "".join(re.findall(r"```sh\n(.*?)```", readme, re.S))))
    assert used, "the tour records no workload any more: drop this test"
    names = re.search(r"^NAMES := (.*)$", (ROOT / "workloads" / "Makefile").read_text(), re.M).group(1).split()
    assert used <= set(names), used
    # what make would run (-n runs nothing, the workloads' make included)
    p = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert re.search(r"make.* -C workloads", p.stdout), p.stdout


@pytest.mark.parametrize("text", ["", "  \n\n", "[]", '{"rows": [], "results": []}'])
def test_replay_of_a_file_with_no_result_is_one_error(cli, tmp_path, text):
    f = tmp_path / "empty.json"
    f.write_text(text)
    rc, out, err = cli("replay", f)
    line = one_error_line(rc, err)
    assert "empty.json" in line and out == "", line
    from tierkit import replaying

    with pytest.raises(tierkit.TierkitError, match="empty.json"):
        replaying.load(f)


def test_a_fast_tier_over_the_footprint_is_warned(cli, tmp_path):
    """-c 512MB on a trace of a few MiB: every policy equals all-fast, said on stderr (once) and
    in the result's warnings, with both sizes."""
    t = tmp_path / "small.tkt"
    tierkit.synth("zipf", accesses=20_000, pages=2_104, out=t, force=True)
    rc, out, err = cli("simulate", t, "-c", "512MB", "--policy", "history", "--json")
    assert rc == 0, err
    r = json.loads(out)
    said = [w for w in r["warnings"] if "holds the whole footprint" in w]
    assert len(said) == 1 and "512 MiB (131072 pages)" in said[0] and f"{r['pages']} pages" in said[0], r["warnings"]
    assert err.count("holds the whole footprint") == 1, err
    # a comparison says it once on stderr, and on every row but the single-tier references
    rc, out, err = cli("compare", t, "-c", "512MB", "--policies", "first-touch,history,all-fast")
    assert rc == 0 and err.count("holds the whole footprint") == 1, err
    # a capacity below the footprint, or a fraction, says nothing
    for cap in ("1MB", "1.0"):
        rc, out, err = cli("simulate", t, "-c", cap, "--json")
        assert rc == 0 and "footprint" not in err and not any("footprint" in w for w in json.loads(out)["warnings"]), err


def test_errors_keep_the_known_names_and_suggest_a_close_one(cli, tmp_path):
    t = tmp_path / "z.tkt"
    tierkit.synth("zipf", accesses=1000, pages=100, out=t, force=True)
    line = one_error_line(*cli("simulate", t, "--policy", "histroy")[::2])
    assert "did you mean 'history'?" in line and line.endswith("hyplacer, nimble"), line
    assert "…" not in line, line
    line = one_error_line(*cli("simulate", t, "--platform", "dram-pmme")[::2])
    assert "did you mean 'dram-pmem'?" in line and "hbm-dram-cxl" in line and line.endswith("platform file"), line
    line = one_error_line(*cli("simulate", t, "--policy", "history:perod=10")[::2])
    assert "unknown parameter 'perod' (did you mean 'period'?)" in line, line
    line = one_error_line(*cli("trace", "info", t, "--format", "ramulatr")[::2])
    assert "did you mean 'ramulator'?" in line, line
    line = one_error_line(*cli("simlate", t)[::2])
    assert "Did you mean 'simulate'?" in line, line
    # nothing close: no guess
    line = one_error_line(*cli("simulate", t, "--policy", "zzzzzz")[::2])
    assert "did you mean" not in line and "known: all-fast" in line, line
    # a text file no format fits: the closest format's reason survives whole
    f = tmp_path / "almost.ramulator2"
    f.write_text("LD 0x1000\nST 0x2000\nLD zz\n")
    line = one_error_line(*cli("trace", "info", f)[::2])
    why = line.split("almost.ramulator2: ", 1)[1]
    assert "closest: ramulator2 (line 3: " in why and "the others stop at line 1: hex," in why and "…" not in why, line


def test_load_says_what_it_reads_and_how_to_make_it(tmp_path):
    for p in (tmp_path / "x", tmp_path / "result.json"):
        if p.name.endswith(".json"):
            p.write_text("{}")
        with pytest.raises(tierkit.TierkitError) as e:
            tierkit.load(p)
        m = str(e.value)
        assert m.startswith(str(p)) and "'tierkit compare TRACE... --out DIR'" in m, m
        assert "compare out" not in m and "\n" not in m


# perf script with no -F over a perf mem recording: perf's default fields (command, tid, cpu,
# time, period, event, addr, data_src, weight, ip sym dso; tools/perf/builtin-script.c)
PERF_DEFAULT = """\
            gups  1234 [000]    12.345678:          1 cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A        35           4005d6 main+0x16 (/home/u/gups)
            gups  1234 [000]    12.345690:          1        cpu/mem-stores/P:     7ffd1a2b7c40          5080144 |OP STORE|LVL L1 hit|SNP N/A|TLB N/A|LCK N/A|BLK  N/A         0           4005e0 main+0x20 (/home/u/gups)
     Web Content  1240 [001]    12.345700:          1 cpu/mem-loads,ldlat=30/P:     7ffd1a2bbc40         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A        35           4005d6 main+0x16 (/home/u/gups)
"""


def test_perf_scripts_default_output_is_read(cli, tmp_path):
    f = tmp_path / "gups.perf"
    f.write_text(PERF_DEFAULT)
    for extra in ([], ["--format", "perf"]):
        rc, out, err = cli("trace", "info", f, "--json", *extra)
        assert rc == 0, err
        info = json.loads(out)
        assert info["format"] == "perf" and info["accesses"] == 3 and info["writes"] == 1 and info["threads"] == 2, info
    # a bad line is still one error naming the file and the line
    f.write_text(PERF_DEFAULT + "            gups  1234 [000]    12.345800:   cpu/mem-loads/P:  zz\n")
    line = one_error_line(*cli("trace", "info", f, "--format", "perf")[::2])
    assert "gups.perf: line 4: " in line and "found 'zz'" in line, line


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="recording needs Valgrind")
def test_a_recordings_progress_counts_what_it_wrote(tmp_path, monkeypatch, capsys):
    from tierkit import progress

    monkeypatch.setattr(progress, "LINE_FIRST_S", 0.0)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 1e-3)
    r = tierkit.record("ls", ["-l", "/"], out=tmp_path / "ls.tkt", progress=True)
    err = capsys.readouterr().err
    counts = [int(n.replace(",", "")) for n in re.findall(r"recording ls \(trace records written\): ([\d,]+) records", err)]
    assert counts and counts == sorted(counts), err
    done = re.search(r"recording ls \(trace records written\): done, ([\d,]+) records", err)
    assert done, err
    s = r["summary"]
    assert int(done.group(1).replace(",", "")) >= s["accesses"] > 0, (err, s)
