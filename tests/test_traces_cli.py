"""Trace commands from the command line: info keys, conversions, the cache filter, the
vendored real trace and (when present) the shared SPEC traces."""
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tierkit

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "data" / "traces" / "403.gcc.gz"
INFO_KEYS = ["records", "accesses", "reads", "writes", "pages", "footprint_bytes", "allocation_sites"]


def test_trace_info_json_keys_on_the_vendored_trace(cli):
    rc, out, err = cli("trace", "info", VENDORED, "--json")
    assert rc == 0, err
    info = json.loads(out)
    for k in INFO_KEYS:
        assert k in info
    # 45,675 lines, 4,349 of them with a writeback (data/traces/README.md)
    assert (info["accesses"], info["writes"], info["pages"]) == (45_675 + 4_349, 4_349, 1_306)
    assert info["format"] == "ramulator"


def test_convert_to_native_keeps_every_record_and_result(cli, tmp_path):
    out = tmp_path / "gcc.tkt"
    rc, _, err = cli("trace", "convert", VENDORED, out)
    assert rc == 0, err
    a = tierkit.run(VENDORED, "dram-pmem", "history", fast_capacity=0.2)
    b = tierkit.run(out, "dram-pmem", "history", fast_capacity=0.2)
    for k in ["accesses", "runtime_ns", "fast_hit_ratio", "migrations", "energy_j"]:
        assert a[k] == b[k], k
    # and back to Ramulator's format, line for line
    back = tmp_path / "gcc.trace"
    rc, _, err = cli("trace", "convert", out, back, "--to", "ramulator")
    assert rc == 0, err
    with gzip.open(VENDORED, "rt") as f:
        assert back.read_text().splitlines() == f.read().splitlines()


def test_cache_filter_turns_raw_accesses_into_misses(cli, tmp_path):
    # a lackey trace that walks 64 KiB twice, one 8-byte load per line: with a 32 KiB L1 and
    # a 1 MiB L2 the second walk hits in L2, so memory sees each line once
    lines = ["==123== Lackey, an example Valgrind tool"]
    for _ in range(2):
        for i in range(1024):
            lines.append(f"I  {0x400000 + i:08X},4")
            lines.append(f" L {0x10000000 + 64 * i:08X},8")
    raw = tmp_path / "walk.lackey"
    raw.write_text("\n".join(lines) + "\n")
    rc, out, err = cli("trace", "info", raw, "--json")
    assert rc == 0, err
    assert json.loads(out)["accesses"] == 2048
    rc, out, err = cli("trace", "info", raw, "--cache", "L1:32K:8,L2:1M:16", "--json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["accesses"] == 1024 and info["meta"]["post_cache"] and "L2:1M:16" in info["meta"]["cache_filter"]
    filtered = tmp_path / "walk.tkt"
    rc, out, err = cli("trace", "convert", raw, filtered, "--cache", "small")
    assert rc == 0, err
    rc, out, err = cli("simulate", filtered, "-c", "0.5", "--json")
    assert rc == 0, err
    r = json.loads(out)
    # the small preset's 64 KiB L2 holds exactly the 64 KiB walk: the second walk hits
    assert r["accesses"] == 1024


def test_filtering_a_post_cache_trace_again_is_refused(cli):
    rc, out, err = cli("trace", "info", VENDORED, "--cache", "default")
    assert rc == 2 and "post-cache" in err


def test_shared_spec_traces_run_under_every_policy(shared_traces, cli):
    for name in ["403.gcc.gz", "444.namd.gz", "447.dealII.gz"]:
        rc, out, err = cli("compare", shared_traces / name, "-c", "0.2", "--policies", "all", "--json", "-q")
        assert rc == 0, (name, err)
        rows = [json.loads(l) for l in out.splitlines()]
        # every policy but guided, which needs guidance (these traces have no allocation
        # events), and the learned schedulers, which train models (test_learned_sched.py)
        assert {r["policy"] for r in rows} >= set(tierkit.all_policies()) - {"guided", "kleio", "kleoniki"}
        slow = next(r for r in rows if r["policy"] == "all-slow")["runtime_ns"]
        fast = next(r for r in rows if r["policy"] == "all-fast")["runtime_ns"]
        for r in rows:
            if r["policy"] != "cache-mode":
                # no placement beats everything fast; oracle never loses to history
                assert r["runtime_ns"] >= fast
        by = {r["policy"]: r for r in rows}
        assert by["oracle"]["fast_hit_ratio"] >= by["history"]["fast_hit_ratio"]
        assert slow > fast


def test_the_committed_sqlite3_trace_has_its_documented_counts(cli):
    # data/traces/README.md: the demo's trace, recorded by tierkit's own tracer
    rc, out, err = cli("trace", "info", ROOT / "data" / "traces" / "sqlite3-orders.tkt", "--json")
    assert rc == 0, err
    i = json.loads(out)
    assert (i["records"], i["accesses"], i["reads"], i["writes"]) == (3_341_914, 1_819_849, 1_079_355, 740_494)
    assert (i["pages"], i["allocation_sites"], i["allocs"], i["frees"], i["markers"]) == (7_854, 70, 762_697, 759_170, 53)
    assert i["meta"]["provenance"]["tool"] == "tierkit-valgrind" and i["meta"]["post_cache"]


def test_trace_info_reads_ramulator2_perf_and_clocked_dramsim3(cli, tmp_path):
    # docs/trace-format.md sections 21 (ramulator2), 22 (perf) and 17 (dramsim3:tck_ps=N)
    r2 = tmp_path / "loadstore.trace"
    r2.write_text("LD 0x1234abcd\nST 0x1234abce\nLD 305441741\n")
    perf = tmp_path / "prog.perf"
    perf.write_text(
        "# ========\n"
        "# event : name = cpu/mem-loads,ldlat=30/P, , id = { 11 }, type = 4, size = 136, config = 0x1cd, "
        "{ sample_period, sample_freq } = 4000, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC, freq = 1\n"
        "# ========\n"
        "   4242  3678.072400: cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|SNP None\n"
        "   4243  3678.073400:         cpu/mem-stores/P:           601040          5080144 |OP STORE|LVL L1 hit|SNP N/A\n"
    )
    d3 = tmp_path / "dram.trace"
    d3.write_text("0x1000 READ 100\n0x2040 WRITE 1700\n")
    for path, fmt, want in [(r2, None, "ramulator2"), (perf, None, "perf"), (d3, "dramsim3:tck_ps=625", "dramsim3:tck_ps=625")]:
        rc, out, err = cli("trace", "info", path, "--json", *(["--format", fmt] if fmt else []))
        assert rc == 0, err
        info = json.loads(out)
        assert info["format"] == want
        assert info["accesses"] == (3 if path == r2 else 2)
    assert info["meta"]["time_ns"] and info["duration_ns"] == 1000  # (1700 - 100) cycles × 0.625 ns
    rc, out, err = cli("trace", "info", perf, "--json")
    meta = json.loads(out)["meta"]
    assert meta["notes"]["sampled"].startswith("yes") and "4000 samples per second" in meta["notes"]["perf.sampling"]
    assert json.loads(out)["threads"] == 2 and json.loads(out)["duration_ns"] == 1_000_000
    rc, out, err = cli("trace", "info", d3, "--format", "dramsim3:tck_ps=0")
    assert rc == 2 and "--format" in err and "dramsim3:tck_ps=N" in err


SAMPLES = ROOT / "data" / "samples"


@pytest.mark.parametrize("name, format, accesses", [
    ("sum.champsimtrace.xz", "champsim", 4096),
    ("drmemtrace.sum.4242.trace.zip", "drmemtrace", 4096),
    ("sum.ramulator2", "ramulator2", 4096),
    ("sum.perf", "perf", 256),
    ("sum.dramsim3.gz", "dramsim3", 4096),
])
def test_each_sample_file_is_detected_and_read(cli, name, format, accesses):
    """data/samples/: one file per imported format, detected as that format, every
    access read (the same program in each: 48 pages; perf's samples are every 16th access)."""
    rc, out, err = cli("trace", "info", SAMPLES / name, "--json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["format"] == format and info["accesses"] == accesses
    assert info["pages"] == 48
    if format == "perf":
        assert "sampled" in out


def test_dramsim3_sample_keeps_its_cycles_as_time(cli):
    rc, out, err = cli("trace", "info", SAMPLES / "sum.dramsim3.gz", "--format", "dramsim3:tck_ps=625", "--json")
    assert rc == 0, err
    s = json.loads(out)
    # the first access is at cycle 4 and the last at cycle 6,144: ns = floor(cycle * 625 / 1000)
    assert s["format"] == "dramsim3:tck_ps=625" and s["duration_ns"] == 6144 * 625 // 1000 - 4 * 625 // 1000


def test_sample_files_are_what_make_samples_writes(tmp_path):
    """The committed samples are the generator's output, byte for byte (it is deterministic)."""
    subprocess.run([sys.executable, SAMPLES / "make_samples.py", tmp_path], check=True)
    for f in tmp_path.iterdir():
        assert f.read_bytes() == (SAMPLES / f.name).read_bytes(), f.name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in SAMPLES.iterdir() if p.suffix != ".py")
