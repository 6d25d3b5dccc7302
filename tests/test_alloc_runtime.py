"""The preloaded allocator (crates/tierkit-alloc): version-2 guidance applied to an unmodified
program (docs/guidance.md; 002 §III-B arenas per site group, §IV-B jemalloc arenas bound to a NUMA
node with MPOL_PREFERRED; 000 §3.2 site classification). On a one-node machine placement is trivial,
but every path runs: classification, the deeper walk, arenas, realloc across arenas, fork,
threads, bad guidance, a missing node.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
C_DIR = ROOT / "crates" / "tierkit-alloc" / "tests" / "c"
PAGE = os.sysconf("SC_PAGE_SIZE")


def alloc_lib() -> Path:
    """The library (make builds it; built here when missing)."""
    lib = Path(os.environ.get("TIERKIT_ALLOC_LIB", ROOT / "target" / "release" / "libtierkit_alloc.so"))
    if not lib.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tierkit-alloc"], cwd=ROOT, check=True)
    return lib


@pytest.fixture(scope="session")
def lib():
    return alloc_lib()


@pytest.fixture(scope="session")
def sites_prog(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the allocator's test programs need it")
    d = tmp_path_factory.mktemp("alloc-programs")
    exe = d / "sites"
    subprocess.run(["gcc", "-O1", "-g", "-pthread", "-Wno-alloc-size-larger-than", str(C_DIR / "sites.c"), "-o", str(exe), "-ldl"], check=True)
    return exe


def run(prog, args, lib, env_extra, cwd=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERKIT_")}
    env.update(env_extra)
    env["LD_PRELOAD"] = str(lib)
    return subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def blocks(stdout):
    """(site, arena, addr, size) of every block the program printed."""
    out = []
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[2].startswith("0x"):
            out.append((f[0], int(f[1]), int(f[2], 16), int(f[3])))
    return out


def functions(exe):
    """name -> (start, end) of the program's functions, from nm -S."""
    out = {}
    for line in subprocess.run(["nm", "-S", str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "Tt":
            out[f[3]] = (int(f[0], 16), int(f[0], 16) + int(f[1], 16))
    return out


def in_function(key, funcs, name):
    off = int(key.rsplit("+0x", 1)[1], 16)
    lo, hi = funcs[name]
    return lo <= off < hi


def keys_from_log(log, exe, direct):
    """Frame keys at depth 2 from the library's site log of `exe`: the sites called directly
    from the functions in `direct` (key: frame 0 alone), and via_hot / via_cold through the
    test programs' `wrap` (key: both frames)."""
    funcs = functions(exe)
    keys = {}
    for s in json.loads(log.read_text())["sites"]:
        k = s["key"]
        for f in direct:
            if in_function(k[0], funcs, f):
                keys[f] = [k[0]]
        if in_function(k[0], funcs, "wrap") and len(k) > 1:
            for f in ("via_hot", "via_cold"):
                if in_function(k[1], funcs, f):
                    keys[f] = k
    return keys


@pytest.fixture(scope="session")
def site_keys(sites_prog, lib, tmp_path_factory):
    """The program's frame keys at depth 2, from the library's own site log."""
    log = tmp_path_factory.mktemp("alloc-log") / "log.json"
    p = run(sites_prog, [2], lib, {"TIERKIT_ALLOC_LOG": str(log), "TIERKIT_ALLOC_LOG_DEPTH": "2"})
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(log.read_text())
    assert d["format"] == "tierkit-alloc-log" and d["depth"] == 2
    keys = keys_from_log(log, sites_prog, ("hot", "cold", "stray", "cold_realloc", "hot_calloc"))
    assert set(keys) == {"hot", "cold", "stray", "cold_realloc", "hot_calloc", "via_hot", "via_cold"}, keys
    # the contract's form: the program has a build-id, and its keys name it
    bid = subprocess.run(["readelf", "-n", str(sites_prog)], capture_output=True, text=True).stdout.split("Build ID: ")[1].split()[0]
    assert keys["hot"][0].startswith(f"build-id:{bid}+0x")
    return keys


def guidance(keys, path, context=2, version=2):
    # hot sites in arena 0 (fast tier), cold ones in arena 1; stray is named by no site
    arena = {s: 0 if "hot" in s else 1 for s in keys if s != "stray"}
    sites = [{"key": keys[s], "frames": [s], "arena": a, "tier": a} for s, a in sorted(arena.items())]
    g = {"format": "tierkit-guidance", "version": version, "strategy": "hotset", "mode": "static", "tiers": ["fast", "slow"],
         "context": context, "unmatched": "last-tier", "phases": {"count": 1, "slice_source": "insn", "slice_length": 1000, "of_slice": [0]},
         "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}], "sites": sites}
    path.write_text(json.dumps(g))
    return path


EXPECTED = {"hot": 0, "hot_calloc": 0, "via_hot": 0, "cold": 1, "cold_realloc": 1, "via_cold": 1, "stray": -1}


def check_blocks(stdout):
    bl = blocks(stdout)
    assert bl
    wrong = [(s, a) for s, a, _, _ in bl if EXPECTED[s] != a]
    assert not wrong, wrong[:5]
    # blocks of different arenas never share a page (002 §IV-B: an arena owns its pages)
    pages = {}
    for _, a, addr, size in bl:
        for pg in range(addr // PAGE, (addr + size - 1) // PAGE + 1):
            pages.setdefault(pg, set()).add(a)
    shared = [pg for pg, arenas in pages.items() if len(arenas) > 1]
    assert not shared, shared[:5]
    return bl


def test_sites_join_their_guidance_arenas_and_the_wrapper_is_decided_at_depth_2(sites_prog, lib, site_keys, tmp_path):
    """docs/guidance.md "Matching sites": the rule decides hot/cold from the return address alone
    and the wrapper's two callers by one unwind; the report counts per decision and per arena."""
    g = guidance(site_keys, tmp_path / "g.json")
    rep = tmp_path / "rep.json"
    p = run(sites_prog, [20], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr == ""
    assert "FAIL" not in p.stdout
    check_blocks(p.stdout)
    r = json.loads(rep.read_text())
    assert r["guided"] and r["context"] == 2 and r["guidance_digest"].startswith("fnv1a64:")
    by_prefix = {tuple(d["prefix"]): d for d in r["decisions"]}
    # hot and cold: decided at depth 1; the wrapper's callers: at depth 2
    assert by_prefix[tuple(site_keys["cold"])]["arena"] == 1
    assert by_prefix[tuple(site_keys["via_hot"])]["arena"] == 0 and by_prefix[tuple(site_keys["via_cold"])]["arena"] == 1
    assert by_prefix[tuple(site_keys["via_hot"])]["allocations"] == 20
    assert by_prefix[tuple(site_keys["cold"])]["allocations"] == 20
    # one unwind per wrapper allocation, none for the others; all by the cached-CFI walk (the
    # program has no frame pointers: every frame's CFA is the stack pointer plus a constant)
    assert r["unwinds"] == 40
    assert r["unwind"]["fast"] == 40 and r["unwind"]["libgcc"] == 0, r["unwind"]
    assert r["allocations_unmatched"] >= 20  # stray's, and libc's own
    # refused requests (the program asks for SIZE_MAX / 2 bytes once) are not counted
    assert r["bytes_unmatched"] < 1 << 40
    arenas = {a["id"]: a for a in r["arenas"]}
    assert arenas[0]["allocations"] > 0 and arenas[1]["allocations"] > 0
    assert arenas[0]["pages_present"] > 0 and arenas[0]["bound"]
    assert set(arenas[0]["pages_by_node"]) <= {str(n) for n in r["tier_nodes"] if n is not None}
    assert r["arena_fallbacks"] == 0 and r["errors"] == []


@pytest.mark.parametrize("frame_pointers", [False, True])
def test_the_fast_walk_gives_the_frames_libgccs_unwinder_gives(lib, tmp_path, frame_pointers):
    """The cached-CFI walk (crates/tierkit-alloc/src/unwind.rs) against libgcc's, frame for
    frame, on every walk of a run with the site log at depth 6 and the guidance's wrapper sites
    (TIERKIT_ALLOC_CHECK_UNWIND), threads and a fork included. With frame pointers every frame's
    CFA is rbp-based: the fast walk gives up and libgcc decides, with the same blocks."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the allocator's test programs need it")
    exe = tmp_path / "sites"
    fp = ["-fno-omit-frame-pointer"] if frame_pointers else ["-fomit-frame-pointer"]
    subprocess.run(["gcc", "-O1", "-g", *fp, "-pthread", "-Wno-alloc-size-larger-than", str(C_DIR / "sites.c"), "-o", str(exe), "-ldl"], check=True)
    log = tmp_path / "log.json"
    p = run(exe, [2], lib, {"TIERKIT_ALLOC_LOG": str(log), "TIERKIT_ALLOC_LOG_DEPTH": "2"})
    assert p.returncode == 0, p.stdout + p.stderr
    keys = keys_from_log(log, exe, ("hot", "cold", "stray", "cold_realloc", "hot_calloc"))
    g = guidance(keys, tmp_path / "g.json")
    rep = tmp_path / "rep.json"
    p = run(exe, [20, 4, "fork"], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep), "TIERKIT_ALLOC_CHECK_UNWIND": "1",
                                       "TIERKIT_ALLOC_LOG": str(tmp_path / "log6.json"), "TIERKIT_ALLOC_LOG_DEPTH": "6"})
    assert p.returncode == 0, p.stdout + p.stderr
    check_blocks(p.stdout)
    u = json.loads(rep.read_text())["unwind"]
    assert u["mismatches"] == 0, u
    if frame_pointers:
        # the program's frames (sites.c's functions) are rbp-based: libgcc's walk decides them
        assert u["libgcc"] > 0, u
    else:
        assert u["fast"] > 0 and u["checked"] > 0, u


def test_sampling_keeps_each_arenas_peak_and_leaves_the_counts_alone(sites_prog, lib, site_keys, tmp_path):
    """TIERKIT_ALLOC_SAMPLE_MS (docs/guidance.md, "Environment": pages per arena at the peak, not
    only at exit, where the program's frees have given them back): a thread of the library samples
    each arena's pages per node. The thread's own allocations (glibc's, as it starts) are not
    the program's: the counts are the same as without sampling (they were 4 unmatched
    allocations more before they were taken out)."""
    g = guidance(site_keys, tmp_path / "g.json")
    reps = {}
    for ms in (None, "5"):
        rep = tmp_path / f"rep-{ms}.json"
        # 4 MiB from the hot site and 4 MiB from the cold one, kept until exit
        env = {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep), "SITES_BIG_MIB": "4"}
        if ms:
            env["TIERKIT_ALLOC_SAMPLE_MS"] = ms
        p = run(sites_prog, [20], lib, env)
        assert p.returncode == 0, p.stdout + p.stderr
        reps[ms] = json.loads(rep.read_text())
    plain, sampled = reps[None], reps["5"]
    for k in ("allocations_total", "allocations_unmatched", "bytes_unmatched"):
        assert sampled[k] == plain[k], k
    assert plain["samples"] is None and plain["arenas"][0]["pages_by_node_at_peak"] is None
    s = sampled["samples"]
    assert s["interval_ms"] == 5 and s["taken"] >= 2 and s["sampler_allocations"] > 0
    assert len(s["t_ms"]) == len(s["pages_by_node"]) and s["t_ms"] == sorted(s["t_ms"])
    for a in sampled["arenas"]:
        peak = a["pages_by_node_at_peak"]
        assert peak is not None and a["peak_t_ms"] is not None
        # the peak is the sample with the most pages: at least the exit's (the last sample)
        assert sum(peak.values()) >= a["pages_present"] > 0
        assert sum(peak.values()) == max(sum(x[a["id"]].values()) for x in s["pages_by_node"])
    # per site: each decision's large blocks, read off the same samples, never hold more pages
    # than their arena had at its peak; the 4 MiB blocks of the hot and the cold site have at
    # least their 1,024 pages each, and without sampling there are none
    peaks = {a["id"]: sum(a["pages_by_node_at_peak"].values()) for a in sampled["arenas"]}
    with_blocks = [d for d in sampled["decisions"] if d.get("block_pages_by_node_at_peak")]
    assert len([d for d in with_blocks if sum(d["block_pages_by_node_at_peak"].values()) >= 1024]) >= 2, sampled["decisions"]
    for d in with_blocks:
        assert 0 < sum(d["block_pages_by_node_at_peak"].values()) <= peaks[d["arena"]], d
    assert not any(d.get("block_pages_by_node_at_peak") for d in plain["decisions"])


def test_fork_and_threads_keep_every_block_in_its_arena(sites_prog, lib, site_keys, tmp_path):
    """Thread- and fork-safety: 8 threads and a forked child allocating at every site."""
    g = guidance(site_keys, tmp_path / "g.json")
    p = run(sites_prog, [10, 8, "fork"], lib, {"TIERKIT_GUIDANCE": str(g)})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    assert "ok fork_child" in p.stdout and "ok threads" in p.stdout
    bl = check_blocks(p.stdout)
    assert sum(1 for b in bl if b[0] == "via_cold") == 10 * (1 + 1 + 8)


def test_guidance_applies_to_a_stripped_copy_in_another_directory(sites_prog, lib, site_keys, tmp_path):
    """docs/guidance.md "Site keys": build-id keys survive strip and the run
    directory."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    exe = d / "renamed"
    shutil.copy(sites_prog, exe)
    subprocess.run(["strip", str(exe)], check=True)
    g = guidance(site_keys, tmp_path / "g.json")
    rep = tmp_path / "rep.json"
    p = run(exe, [5], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep)}, cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    check_blocks(p.stdout)
    r = json.loads(rep.read_text())
    assert sum(d["allocations"] for d in r["decisions"]) >= 5 * 4


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not JSON"),
    ('{"format": "tierkit-guidance", "version": 1, "context": 1, "arenas": [], "sites": []}', "version: 1"),
    ('{"format": "tierkit-guidance", "version": 2, "context": 1, "arenas": [{"id": 0, "tiers": [0]}], "sites": [{"key": ["main (a.c:3)"], "arena": 0}]}', "sites[0].key"),
    (None, "cannot read"),
    # not a regular file, or over the limit: refused from the opened file, never read (once,
    # /dev/urandom kept the program from starting at all)
    ("/dev/urandom", "not a regular file (a character device)"),
    ("fifo", "not a regular file (a FIFO)"),
    ("big", "over the limit of 16 MiB"),
])
def test_bad_guidance_is_one_line_and_the_program_still_runs(sites_prog, lib, tmp_path, content, needle):
    """A bad guidance file: one error line, plain jemalloc, the program unharmed (docs/guidance.md,
    "Environment")."""
    g = tmp_path / "g.json"
    if content == "/dev/urandom":
        g = Path(content)
    elif content == "fifo":
        os.mkfifo(g)
    elif content == "big":
        with open(g, "wb") as f:
            f.truncate((16 << 20) + 1)  # sparse
    elif content is not None:
        g.write_text(content)
    p = run(sites_prog, [3], lib, {"TIERKIT_GUIDANCE": str(g)}, timeout=20)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tierkit-alloc: error: {g}: ") and needle in lines[0], p.stderr
    assert "plain jemalloc" in lines[0]
    assert {b[1] for b in blocks(p.stdout)} == {-1}


def test_a_missing_node_leaves_its_arenas_unbound_with_a_warning(sites_prog, lib, site_keys, tmp_path):
    """A tier mapped to a node that does not exist: one warning, the arena unbound (002 §IV-B
    binding is best effort), the program runs."""
    g = guidance(site_keys, tmp_path / "g.json")
    rep = tmp_path / "rep.json"
    p = run(sites_prog, [3], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep), "TIERKIT_NODES": "0,977"})
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "node 977 (tier 1) does not exist" in lines[0], p.stderr
    check_blocks(p.stdout)
    arenas = {a["id"]: a for a in json.loads(rep.read_text())["arenas"]}
    assert arenas[0]["bound"] and not arenas[1]["bound"]


def test_an_arena_moves_to_a_node_with_its_pages(sites_prog, lib, site_keys, tmp_path):
    """The mechanism per-phase guidance needs (000 §3.2 arena remapping; docs/guidance.md:
    move_pages / mbind with MPOL_MF_MOVE): tierkit_alloc_move_arena moves an arena's pages and binds
    its range to the node; a node or arena that does not exist is EINVAL."""
    g = guidance(site_keys, tmp_path / "g.json")
    p = run(sites_prog, [2], lib, {"TIERKIT_GUIDANCE": str(g), "SITES_MOVE": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok move_arena" in p.stdout


def test_extent_failures_fall_back_to_plain(sites_prog, lib, site_keys, tmp_path):
    """Every 2nd extent request of the guided arenas refused (as a failing mmap would): each
    allocation is still served, from jemalloc's own arenas (never fail an allocation
    the plain allocator would serve)."""
    g = guidance(site_keys, tmp_path / "g.json")
    rep = tmp_path / "rep.json"
    p = run(sites_prog, [30, 4], lib, {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep), "TIERKIT_ALLOC_DEBUG_FAIL_EXTENT": "2"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    assert "FAIL" not in p.stdout
    r = json.loads(rep.read_text())
    assert r["extent_failures_injected"] > 0
    bl = blocks(p.stdout)
    assert all(a in (EXPECTED[s], -1) for s, a, _, _ in bl)


@pytest.fixture(scope="session")
def stress_prog(sites_prog):
    exe = sites_prog.parent / "stress"
    subprocess.run(["gcc", "-O1", "-g", "-pthread", str(C_DIR / "stress.c"), "-o", str(exe), "-ldl"], check=True)
    return exe


def stress_guidance(exe, lib, tmp_path):
    """Guidance for stress.c's six sites (hot cold via_hot via_cold hot_realloc cold_realloc),
    their keys from the library's site log."""
    log = tmp_path / "log.json"
    p = run(exe, [1, 2], lib, {"TIERKIT_ALLOC_LOG": str(log), "TIERKIT_ALLOC_LOG_DEPTH": "2"})
    assert p.returncode == 0, p.stdout + p.stderr
    keys = keys_from_log(log, exe, ("hot", "cold", "hot_realloc", "cold_realloc"))
    assert len(keys) == 6, keys
    return guidance(keys, tmp_path / "g.json")


# Known defect: with the address space exhausted, a thread that exits can crash in jemalloc's own
# cleanup of its automatic thread cache (tcache_destroy -> arena_nthreads_get(NULL), src/tcache.c:
# the cache's first allocation failed and left it enabled without an arena; jemalloc/jemalloc#2247,
# open). Seen about once in 5 ten-second runs; the variant without the address-space limit must
# always pass. jemalloc's own setting _RJEM_MALLOC_CONF=tcache:false (the bundled jemalloc is
# prefixed) avoids it, and the third variant, run that way, must pass: it also covers the same
# defect in the library's explicit tcaches (created without an arena when choosing the thread's
# arena failed; the library now checks thread.arena first: a crash in 2 runs before, none in
# 14 after).
@pytest.mark.parametrize("limit", [
    "none",
    pytest.param("rlimit", marks=pytest.mark.xfail(reason="jemalloc#2247: automatic tcache cleanup at thread exit after address-space exhaustion", strict=False)),
    "rlimit-tcache-off",
])
def test_stress_16_threads_realloc_across_arenas_fork_and_refusals(stress_prog, lib, tmp_path, limit):
    """The stress (10 s here; bench/alloc_stress.py runs the full minute): 16 threads,
    realloc across arenas, a fork half way, every 3rd extent of the guided arenas refused and
    the address space limited (arena ranges of 512 MiB): no crash, no corrupted block, every block in its site's arena or
    the fallback, every refusal NULL + ENOMEM, and the arenas' ranges bounded (no leak)."""
    g = stress_guidance(stress_prog, lib, tmp_path)
    rep = tmp_path / "rep.json"
    env = {"TIERKIT_GUIDANCE": str(g), "TIERKIT_ALLOC_REPORT": str(rep),
           "TIERKIT_ALLOC_DEBUG_FAIL_EXTENT": "3", "STRESS_ARENAS": "0,1,0,1,0,1",
           # small arena ranges: the huge requests fill them, fall back to jemalloc's own arenas,
           # and meet the address-space limit there
           "TIERKIT_ALLOC_RESERVE": "512M"}
    if limit == "rlimit-tcache-off":
        env["_RJEM_MALLOC_CONF"] = "tcache:false"
        limit = "rlimit"
    p = run(stress_prog, [10, 16, limit], lib, env)
    assert p.returncode == 0, p.stdout + p.stderr
    f = p.stdout.split()
    stats = dict(zip(f[::2], map(int, f[1::2])))
    # under the address-space limit (set before the threads start) a thread's stack may be
    # refused: 14 of 16 threads started in 4 of 14 runs here
    assert stats["allocs"] > 100_000 and stats["threads"] >= (16 if limit == "none" else 8), stats
    if limit == "rlimit":
        assert stats["refused"] > 0, stats
    r = json.loads(rep.read_text())
    assert r["extent_failures_injected"] > 0
    if limit == "rlimit":  # the huge requests fill the small arena ranges: fallbacks
        assert r["arena_fallbacks"] > 0
    assert r["unwinds"] > 0 and r["errors"] == []
    for a in r["arenas"]:
        assert a["allocations"] > 1000
        # what jemalloc took from the arena's range stays near the live data (16 x 128 blocks)
        assert a["range_bytes_used"] < 1 << 30, a


def test_tierkit_run_guidance_from_the_cli(sites_prog, site_keys, lib, tmp_path, cli):
    """`tierkit run --guidance` (Python CLI -> Rust): the library preloaded, its report folded
    into the run's (the guided run keeps reporting allocations_unmatched)."""
    g = guidance(site_keys, tmp_path / "g.json")
    rc, out, err = cli("run", "--guidance", g, "--json", "--", sites_prog, 5)
    assert rc == 0, err
    rep = json.loads(out.strip().splitlines()[-1])
    ga = rep["guided_alloc"]
    assert ga["processes"] == 1 and ga["program_reported"] and ga["guided"]
    assert ga["allocations_unmatched"] >= 5 and ga["unwinds"] == 10
    arenas = {a["id"]: a for a in ga["arenas"]}
    assert arenas[0]["allocations"] > 0 and arenas[1]["allocations"] > 0
    assert sum(arenas[0]["pages_by_node"].values()) > 0
    check_blocks(out)
    v1 = tmp_path / "v1.json"
    v1.write_text('{"format": "tierkit-guidance", "version": 1, "context": 1, "arenas": [], "sites": []}')
    rc, out, err = cli("run", "--guidance", v1, "--", sites_prog, 1)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "version: 1" in err, err


def test_cxx_new_is_interposed_so_frame_0_is_the_new_expression(lib, tmp_path):
    """docs/guidance.md "How an allocation finds its arena": operator new/new[] (plain, nothrow,
    aligned) are the library's own thin wrappers, so a C++ site's key starts in the program, not in
    libstdc++; a failed throwing new still throws std::bad_alloc."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    exe = tmp_path / "cxx"
    subprocess.run(["g++", "-O1", "-g", str(C_DIR / "cxx.cc"), "-o", str(exe), "-ldl"], check=True)
    log = tmp_path / "log.json"
    p = run(exe, [], lib, {"TIERKIT_ALLOC_LOG": str(log), "TIERKIT_ALLOC_LOG_DEPTH": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    funcs = {}
    for line in subprocess.run(["nm", "-C", "-S", str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split(maxsplit=3)
        if len(f) == 4 and f[2] in "Tt" and f[3].startswith("new_"):
            funcs[f[3].split("(")[0]] = (int(f[0], 16), int(f[0], 16) + int(f[1], 16))
    keys = {}
    for s in json.loads(log.read_text())["sites"]:
        for name in funcs:
            if in_function(s["key"][0], funcs, name) and s["allocations"] >= 10:
                keys[name] = s["key"]
    assert set(keys) == {"new_hot", "new_cold", "new_wide", "new_nothrow"}, keys
    arena = {"new_hot": 0, "new_wide": 0, "new_cold": 1, "new_nothrow": 1}
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"format": "tierkit-guidance", "version": 2, "mode": "static", "context": 1,
                             "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
                             "sites": [{"key": keys[n], "arena": a} for n, a in arena.items()]}))
    p = run(exe, [], lib, {"TIERKIT_GUIDANCE": str(g)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok bad_alloc" in p.stdout and "ok aligned_new" in p.stdout and "ok nothrow_null" in p.stdout
    bl = blocks(p.stdout)
    assert len(bl) == 40 and all(a == arena[s] for s, a, _, _ in bl), bl[:8]
