"""`tierkit trace record`: tierkit's Valgrind tool on small C programs (tests/tracer/*.c) whose
memory behaviour is known. Each program is compiled with `gcc -O1 -g`; every test skips when
valgrind (or gcc) is absent."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tierkit

from conftest import TRACER_PROGRAMS_SRC as SRC

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind is not installed: 'tierkit trace record' needs it")




def cli(*args, env=None, cwd=None):
    p = subprocess.run([sys.executable, "-m", "tierkit.cli", *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def record(progs, tmp_path, name, *args, cache="none", **kw):
    """Record with the Python API; returns the report and the trace as a DataFrame."""
    out = tmp_path / f"{name}-{cache}.tkt".replace(":", "_").replace(",", "_")
    r = tierkit.record(progs / name, args, out, cache=cache, force=True, **kw)
    return r, tierkit.read_trace(out)


def events(df, kind):
    return [e for e in df.attrs["events"] if e["kind"]["kind"] == kind]


def lifetimes(df):
    """Each allocation (Alloc event) with the accesses that fall in its bytes while it lives:
    from its Alloc to the Free (or Realloc) of its address."""
    out = []
    evs = df.attrs["events"]
    addr = df["addr"].to_numpy()
    for i, e in enumerate(evs):
        k = e["kind"]
        if k["kind"] != "alloc":
            continue
        end = len(df)
        for f in evs[i + 1:]:
            fk = f["kind"]
            if (fk["kind"] == "free" and fk["addr"] == k["addr"]) or (fk["kind"] == "realloc" and fk["old_addr"] == k["addr"]):
                end = f["at"]
                break
        span = slice(e["at"], end)
        inside = (addr[span] >= k["addr"]) & (addr[span] < k["addr"] + k["size"])
        out.append((e, df.iloc[span][inside]))
    return out


def sites(df):
    return {e["kind"]["site"]: tuple(e["kind"]["frames"]) for e in events(df, "site")}


# --- what the trace holds -------------------------------------------------------------------

def test_the_site_streamed_ten_times_gets_ten_times_the_accesses_per_byte(progs, tmp_path):
    _, df = record(progs, tmp_path, "three_sites")
    per_byte = {}
    for e, acc in lifetimes(df):
        k = e["kind"]
        if k["size"] in (16384 * 8, 32768 * 8, 8192 * 8):
            per_byte[k["size"]] = (k["site"], len(acc) / k["size"])
    assert len(per_byte) == 3 and len({s for s, _ in per_byte.values()}) == 3, "three arrays from three sites"
    hot, big, small = per_byte[16384 * 8][1], per_byte[32768 * 8][1], per_byte[8192 * 8][1]
    assert hot / big == pytest.approx(10, rel=0.02) and hot / small == pytest.approx(10, rel=0.02)
    frames = sites(df)[per_byte[16384 * 8][0]]
    assert re.match(r"main \(three_sites\.c:\d+\)", frames[0]), frames


def test_four_threads_show_four_distinct_thread_ids(progs, tmp_path):
    r, df = record(progs, tmp_path, "threads")
    buffers = [(e, acc) for e, acc in lifetimes(df) if e["kind"]["size"] == 4096 * 8]
    assert len(buffers) == 4
    owners = []
    for e, acc in buffers:
        assert len(acc) == 2 * 4096  # written once, read once
        assert set(acc["tid"]) == {e["tid"]}, "a buffer is touched by the thread that made it"
        owners.append(e["tid"])
    assert sorted(owners) == [0, 1, 2, 3]  # ids in creation order, main thread first
    assert r["summary"]["threads"] == 4


def test_a_store_only_loop_records_only_writes(progs, tmp_path):
    _, df = record(progs, tmp_path, "store_only")
    (e, acc), = [(e, acc) for e, acc in lifetimes(df) if e["kind"]["size"] == 8192 * 8]
    assert len(acc) == 8192 and acc["write"].all() and (acc["size"] == 8).all()
    assert sorted(acc["addr"]) == list(range(e["kind"]["addr"], e["kind"]["addr"] + 8192 * 8, 8))


def test_with_the_cache_an_array_that_fits_gives_only_its_cold_misses(progs, tmp_path):
    r, df = record(progs, tmp_path, "fits_in_cache", cache="default")
    assert df.attrs["meta"]["post_cache"] and df.attrs["meta"]["cache_filter"] == "L1:32K:8:64,L2:1M:16:64,L3:8M:16:64"
    (e, acc), = [(e, acc) for e, acc in lifetimes(df) if e["kind"]["size"] == 16384]
    a = e["kind"]["addr"]
    assert a % 64 == 0
    # written once (a read for ownership per line), read ten times: one memory read per line
    assert list(acc["addr"]) == list(range(a, a + 16384, 64))
    assert not acc["write"].any() and (acc["size"] == 64).all()
    assert r["raw_loads"] > 10 * 2048 and r["cache"][0]["name"] == "L1"


def test_realloc_moves_an_allocations_identity(progs, tmp_path):
    code, out, err = cli("trace", "record", "-o", tmp_path / "grow.tkt", "--cache", "none", "--", progs / "grow")
    assert code == 0, err
    old = int(re.search(r"old (\d+)", out).group(1))
    new = int(re.search(r"new (\d+)", out).group(1))
    df = tierkit.read_trace(tmp_path / "grow.tkt")
    alloc, = [e["kind"] for e in events(df, "alloc") if e["kind"]["size"] == 100]
    realloc, = events(df, "realloc")
    assert alloc["addr"] == old and alloc["func"] == "malloc"
    assert (realloc["kind"]["old_addr"], realloc["kind"]["addr"], realloc["kind"]["size"]) == (old, new, 1 << 20)
    assert new != old
    s = sites(df)
    src = (SRC / "grow.c").read_text().splitlines()
    line = next(i + 1 for i, t in enumerate(src) if "realloc(p" in t)
    assert s[realloc["kind"]["site"]][0] == f"main (grow.c:{line})"
    assert realloc["kind"]["site"] != alloc["site"]
    # the write after the move lands in the new block
    after = df.iloc[realloc["at"]:]
    assert ((after["addr"] == new + (1 << 20) - 1) & after["write"]).sum() == 1
    free, = [e for e in events(df, "free") if e["kind"]["addr"] == new]


def test_sites_from_runs_with_different_inputs_match_by_their_frames(progs, tmp_path):
    _, small = record(progs, tmp_path, "table", "100")
    (tmp_path / "2").mkdir()
    _, large = record(progs, tmp_path / "2", "table", "5000")

    def program_sites(df):
        used = {e["kind"]["site"] for e in events(df, "alloc")}
        return {f for s, f in sites(df).items() if s in used and "table.c" in f[0]}

    a, b = program_sites(small), program_sites(large)
    assert a == b and len(a) == 2, (a, b)
    assert {f[0].split(" ")[0] for f in a} == {"make_buckets", "make_node"}
    assert len(events(large, "alloc")) > len(events(small, "alloc")) + 4000


def test_sites_are_defined_once_before_first_use(progs, tmp_path):
    _, df = record(progs, tmp_path, "table", "300", context=2)
    defined = set()
    for e in df.attrs["events"]:
        k = e["kind"]
        if k["kind"] == "site":
            assert k["site"] not in defined and 1 <= len(k["frames"]) <= 2
            defined.add(k["site"])
        elif k["kind"] in ("alloc", "realloc"):
            assert k["site"] in defined
    assert df.attrs["meta"]["notes"]["context_frames"] == "2"


# --- the in-band cache is cache.rs -----------------------------------------------------------

@pytest.mark.parametrize("spec", ["L1:1K:2,L2:4K:4", "default"])
def test_in_band_cache_gives_the_records_of_filtering_afterwards(progs, tmp_path, spec):
    raw = tmp_path / "raw.tkt"
    tierkit.record(progs / "mixed", out=raw, cache="none")
    r, inband = record(progs, tmp_path, "mixed", cache=spec)
    filtered = tmp_path / "filtered.tkt"
    tierkit.convert(raw, filtered, cache=spec, progress=False)
    after = tierkit.read_trace(filtered)
    assert len(inband) == len(after) > 100
    for col in ("addr", "write", "insn", "tid", "size"):
        assert np.array_equal(inband[col].to_numpy(), after[col].to_numpy()), col
    assert inband.attrs["events"] == after.attrs["events"]
    assert inband.attrs["meta"]["cache_filter"] == after.attrs["meta"]["cache_filter"]
    if spec != "default":
        assert r["cache"][0]["writebacks"] > 0 and inband["write"].sum() > 0  # dirty lines reach memory


# --- time -----------------------------------------------------------------------------------

def test_instruction_counts_are_exact_and_markers_fall_on_slice_boundaries(progs, tmp_path):
    k = 1000
    runs = {}
    for n in (1000, 4000):
        code, out, err = cli("trace", "record", "-o", tmp_path / f"spin{n}.tkt", "--cache", "none", "--slice", k,
                             "--", progs / "spin", n)
        assert code == 0, err
        cells = int(re.search(r"cells (\d+)", out).group(1))
        instructions = int(re.search(r"([\d,]+) instructions", err).group(1).replace(",", ""))
        df = tierkit.read_trace(tmp_path / f"spin{n}.tkt")
        first, = df.index[(df["addr"] == cells) & df["write"]]
        second, = df.index[(df["addr"] == cells + 8) & df["write"]]
        # the two stores are 2n + 1 instructions apart (the dec/jnz loop runs n times) and
        # nothing touches memory between them
        assert df["insn"][second] - df["insn"][first] == 2 * n + 1
        assert second == first + 1
        assert df["insn"].is_monotonic_increasing
        marks = events(df, "marker")
        assert [m["kind"]["id"] for m in marks] == list(range(1, instructions // k + 1))
        insn = df["insn"].to_numpy()
        for m in marks:
            assert m["insn"] == m["kind"]["id"] * k and m["kind"]["marker"] == "slice"
            assert (insn[:m["at"]] < m["insn"]).all() and (insn[m["at"]:] >= m["insn"]).all()
        runs[n] = instructions
    assert runs[4000] - runs[1000] == 2 * 3000


# --- the program's own streams, status and end ----------------------------------------------

def test_the_programs_output_and_exit_status_pass_through(progs, tmp_path):
    code, out, err = cli("trace", "record", "--", progs / "chatty", cwd=tmp_path)
    assert code == 7
    assert out == "to stdout\n"
    lines = err.splitlines()
    assert "to stderr" in lines
    assert all(ln == "to stderr" or ln.startswith("tierkit: ") for ln in lines), err
    assert (tmp_path / "chatty.tkt").exists()  # PROGRAM.tkt in the current directory
    code, _, err = cli("trace", "record", "--", progs / "chatty", cwd=tmp_path)
    assert code == 2 and "file exists" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("prog,args,status,signal", [("crash", [], 139, "SIGSEGV"), ("killed", [], 137, "SIGKILL"),
                                                     ("killed", ["term"], 143, "SIGTERM")])
def test_a_program_killed_by_a_signal_still_gives_a_readable_trace_flagged_incomplete(progs, tmp_path, prog, args, status, signal):
    out = tmp_path / "t.tkt"
    code, stdout, err = cli("trace", "record", "-o", out, "--cache", "none", "--", progs / prog, *args)
    assert code == status, err
    assert f"incomplete: the program was killed by {signal}" in err
    info = tierkit.trace_info(out, progress=False)
    assert signal in info["summary"]["incomplete"]
    code, text, _ = cli("trace", "info", out)
    assert code == 0 and re.search(rf"incomplete\s+the program was killed by {signal}", text)
    if prog == "crash":
        assert "at main (crash.c:" in info["summary"]["incomplete"]
    # what ran before the end is all there: the buffer's thousand stores
    buf = int(re.search(r"buffer (\d+)", stdout).group(1))
    df = tierkit.read_trace(out)
    inside = df[(df["addr"] >= buf) & (df["addr"] < buf + 8000)]
    assert inside["write"].sum() == 1000


def test_complete_traces_are_not_flagged(progs, tmp_path):
    r, _ = record(progs, tmp_path, "store_only")
    assert r["incomplete"] is None and "incomplete" not in tierkit.trace_info(r["path"], progress=False)["summary"]


def test_children_are_not_followed_and_that_is_said_once(progs, tmp_path):
    code, _, err = cli("trace", "record", "-o", tmp_path / "f.tkt", "--", progs / "forks")
    assert code == 0
    notes = [ln for ln in err.splitlines() if "not traced" in ln]
    assert len(notes) == 1 and notes[0].startswith("tierkit: note:")
    assert tierkit.trace_info(tmp_path / "f.tkt", progress=False)["summary"].get("incomplete") is None
    code, _, err = cli("trace", "record", "-o", tmp_path / "e.tkt", "--", progs / "execs")
    assert code == 0 and "execve" in tierkit.trace_info(tmp_path / "e.tkt", progress=False)["summary"]["incomplete"]


def test_the_header_says_where_the_trace_came_from(progs, tmp_path):
    _, df = record(progs, tmp_path, "table", "10", slice="5K", context=3)
    m = df.attrs["meta"]
    assert m["provenance"]["tool"] == "tierkit-valgrind" and m["provenance"]["args"] == ["10"]
    assert m["provenance"]["program"].endswith("table")
    assert m["time_insn"] and not m["post_cache"] and m["cache_filter"] is None
    assert m["notes"]["slice_insn"] == "5000" and m["notes"]["context_frames"] == "3"
    assert re.match(r"\d+\.\d+", m["notes"]["valgrind_version"])


# --- errors ---------------------------------------------------------------------------------

def test_missing_valgrind_or_tool_is_one_line_and_status_2(progs, tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    code, out, err = cli("trace", "record", "-o", tmp_path / "x.tkt", "--", progs / "chatty", env={"PATH": str(empty)})
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "valgrind" in err and err.startswith("tierkit: error:")
    code, out, err = cli("trace", "record", "-o", tmp_path / "x.tkt", "--", progs / "chatty",
                         env={"TIERKIT_TRACER_DIR": str(tmp_path / "nowhere")})
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "not built" in err
    code, out, err = cli("trace", "record", "-o", tmp_path / "x.tkt", "--", tmp_path / "no-such-program")
    assert code == 2 and len(err.splitlines()) == 1 and "not found" in err
    code, out, err = cli("trace", "record", "-o", tmp_path / "x.tkt", "--cache", "L1:1000:3", "--", progs / "chatty")
    assert code == 2 and len(err.splitlines()) == 1 and "--cache" in err
    assert not (tmp_path / "x.tkt").exists() and not list(tmp_path.glob("*.partial"))
