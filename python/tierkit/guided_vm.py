"""`tierkit validate --guided`: a program recorded, profiled and guided on
the host, then run in the testbed VM under `tierkit run --guidance` (the preloaded allocator
puts each guidance arena on its tier's NUMA node, 002 §IV), against the simulated guided run of
the same trace with the same guidance and fast capacity (docs/guidance.md, "Checked in the VM").

For each workload:

1. **Host.** `tierkit trace record --context 4`, `tierkit profile` (docs/guidance.md's steps,
   run as commands).
2. **VM: the fast node.** Node 0 is shrunk with hugetlb pages (as `tierkit validate` does:
   kswapd cannot demote them) to `fast_free_mib` MiB free. Its zones' free pages and watermarks
   are read from /proc/zoneinfo: a page preferred on node 0 (`MPOL_PREFERRED`) is taken there
   only while the zone stays above its *low* watermark plus its lowmem reserve (the page
   allocator's fast path, mm/page_alloc.c `get_page_from_freelist`); below it the allocation
   falls back to node 1. The fast capacity a program can use is therefore the *usable* free
   memory: per zone, free − low − reserve, summed.
3. **Host: guidance.** `tierkit guide --strategy S --capacity USABLE` (the usable bytes).
4. **VM: runs.** Under `tierkit-run --guidance G` with `TIERKIT_ALLOC_SAMPLE_MS` (the library
   samples each arena's pages per node over the run and keeps the sample with the most pages:
   the peak) and, as references, `--policy first-touch` and `--policy all-slow`; node 0 shrunk
   again before each run.
5. **Host: model.** The same trace under `guided:guidance=G,unmatched=first-touch` (the runtime
   serves unmatched sites from jemalloc's own arenas, placed by first touch) on the testbed
   platform with the fast tier at the usable bytes at the guided run's start, and, to show the
   watermarks' effect, at node 0's whole free memory (MemFree); first-touch, all-slow and
   all-fast as references.
6. **Side by side.** Per arena, pages per node at the peak and at the end, measured and
   simulated; the sites of each arena and the runtime's unmatched count; the model's share of
   accesses served by the fast tier; run times. JSON, a Markdown table and a plot.

`--programs` does the same for real programs of the suite (`PROGRAMS`;
data/recipes/record_traces.py, data/traces/README.md "The suite"): the suite's trace of the
program on its input (data/traces/real/PROGRAM-INPUT.tkt, recorded here with the recipe when
missing), profiled; the program's binary, the shared libraries and loader `ldd` names and its
input files, copied from the host into the VM (the same files, so the same build-ids and frame
keys); run in a work directory on a tmpfs bound to node 1 (`mpol=bind:1`), so that its input
and output files and tierkit-run's outputs take no node-0 memory the model does not see, with
the kernel's watermark boosting off in the VM (`vm.watermark_boost_factor=0`: a boost raises
node 0's watermarks by a pageblock, 512 pages, mid-run, below the capacity the guidance was
made for); `thermos` guidance; transparent huge pages off. Each program runs twice: with
everything outside the guided arenas placed by first touch, as `tierkit run --guidance` runs
anywhere, and with it bound to node 1 (tierkit-run started under testbed/numapol.c's
`bind:1`, the program inheriting it; the model's non-heap pages on the slow tier), so that
node 0 holds the guided arenas alone.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from .guidance import site_frames
from .validate import PAGE, ROOT, meminfo_free, platform_toml, write_results

#: name -> (workload, arguments, strategy, why it is here)
WORKLOADS: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "sites": ("sites", ("--size", "medium"), "hotset",
              "five sites of clearly different hotness; hotset over-prescribes the fast tier by the "
              "crossing site, so the hot arena overflows to node 1"),
    "bfs": ("bfs", ("--size", "medium", "--work", "0.25"), "knapsack",
            "the guided study's largest gain (docs/experiments.md: first touch fills the fast tier "
            "with the 64 MiB edge list, allocated first, grown by realloc and freed mid-run); "
            "short-lived sites make the arenas' peak differ from their end"),
}
#: real programs of the suite (data/recipes/record_traces.py): name -> (the suite's trace,
#: PROGRAM-INPUT, node 0's MemFree at its start in MiB, below the program's footprint, why)
PROGRAMS: dict[str, tuple[str, int, str]] = {
    "sqlite3": ("sqlite3-ref", 16,
                "a database in memory (sqlite3 :memory:): 762,772 allocations from 437 sites, nearly all "
                "behind sqlite3's allocator wrapper (one innermost frame), so the arenas are told apart by "
                "unwinding; 30.7 MiB footprint, 21.9 MiB live at the peak"),
    "xz": ("xz-train", 12,
           "a compressor (xz -3): 17 large allocations, the match finder's hash table and the dictionary; "
           "18.5 MiB footprint"),
}
#: the strategy of the programs' guidance (002 §III-A)
PROGRAM_STRATEGY = "thermos"
#: where a program runs in the VM: a tmpfs bound to node 1, for its files and tierkit-run's outputs
N1 = "/n1"
#: node 0's MemFree at each program's start, MiB (the rest of node 0 is reserved as hugetlb pages)
FAST_FREE_MIB = 96
#: the library's sampling period of each arena's pages per node
SAMPLE_MS = 100
CONTEXT = 4
HP = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"
#: /proc/zoneinfo's protection array index of ZONE_MOVABLE: the highest zone a user page may
#: come from (GFP_HIGHUSER_MOVABLE), whose lowmem reserve the lower zones keep
MOVABLE = 3


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"guided-vm: {msg}", file=sys.stderr, flush=True)


def _tierkit(*args: str) -> str:
    """One `tierkit` command, as docs/guidance.md's steps give it."""
    r = subprocess.run([sys.executable, "-m", "tierkit.cli", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tierkit {' '.join(args)}: {(r.stderr or r.stdout).strip()[-600:]}")
    return r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------
# the kernel's view of node 0

def parse_zoneinfo(text: str, node: int = 0) -> list[dict]:
    """The zones of `node` in /proc/zoneinfo: name, free, min, low, high, managed (pages), the
    lowmem reserve it keeps against user pages (`protection[ZONE_MOVABLE]`), the watermark
    boost and `pcp`: the pages on its CPUs' free lists (the pagesets' `count:`), which
    `pages free` does not count."""
    zones: list[dict] = []
    cur: Optional[dict] = None
    for line in text.splitlines():
        m = re.match(r"Node (\d+), zone\s+(\S+)", line)
        if m:
            cur = {"zone": m.group(2)} if int(m.group(1)) == node else None
            if cur is not None:
                zones.append(cur)
            continue
        if cur is None:
            continue
        w = line.split()
        if len(w) >= 3 and w[0] == "pages" and w[1] == "free":
            cur["free"] = int(w[2])
        elif len(w) == 2 and w[0] in ("min", "low", "high", "managed", "promo", "boost"):
            cur[w[0]] = int(w[1])
        elif len(w) == 2 and w[0] == "count:":
            cur["pcp"] = cur.get("pcp", 0) + int(w[1])
        elif w and w[0] == "protection:":
            prot = [int(x) for x in re.findall(r"\d+", line)]
            cur["reserve"] = prot[MOVABLE] if len(prot) > MOVABLE else (prot[-1] if prot else 0)
    return [z for z in zones if z.get("managed", 0) > 0]


def usable_pages(zones: list[dict], pcp: bool = False) -> int:
    """Pages a node-0-preferred allocation can still take before it falls back to node 1:
    per zone, free above the low watermark and the lowmem reserve. With `pcp`, also the pages
    on the zone's per-CPU free lists while it is above that mark: an order-0 allocation that
    passes the zone's watermark check takes its page from the CPU's list first
    (mm/page_alloc.c `rmqueue_pcplist`), which `pages free` does not count; Linux 6.7's
    automatic tuning of the lists' size lets them hold thousands of pages after a burst of
    frees (measured in the VM: 1,929 pages on node 0's lists after the hugetlb reservation),
    so the programs' runs cap them (`vm.percpu_pagelist_high_fraction`) and count them."""
    out = 0
    for z in zones:
        above = z.get("free", 0) - z.get("low", 0) - z.get("reserve", 0)
        out += max(0, above) + (z.get("pcp", 0) if pcp and above > 0 else 0)
    return out


def _shrink(fast_free_mib: int) -> str:
    return (f"echo 0 > {HP}; sync; echo 3 > /proc/sys/vm/drop_caches; "
            f"f=$(awk '/MemFree/{{print $4}}' /sys/devices/system/node/node0/meminfo); "
            f"n=$(( (f - {fast_free_mib * 1024}) / 2048 )); [ $n -gt 0 ] && echo $n > {HP}; "
            f"cat {HP} > $OUT/hugepages; ")


def _state(tag: str, dest: str = "$OUT") -> str:
    return (f"cat /proc/zoneinfo > {dest}/zoneinfo_{tag}; "
            f"grep MemFree /sys/devices/system/node/node*/meminfo > {dest}/meminfo_{tag}; ")


# ---------------------------------------------------------------------------------------------
# host: record, profile, guide

def record_and_profile(name: str, work: Path, progress: bool = True, specs: Optional[dict] = None) -> dict:
    """`tierkit trace record --context 4` and `tierkit profile`, reused while the program's
    arguments and binary are the same."""
    specs = specs or WORKLOADS
    wl, args = specs[name][0], specs[name][1]
    exe = ROOT / "workloads" / "build" / wl
    tkt, prof, meta = work / f"{name}.tkt", work / f"{name}.profile.json", work / f"{name}.record.json"
    stamp = {"args": list(args), "binary_mtime_ns": exe.stat().st_mtime_ns, "context": CONTEXT}
    if not (tkt.is_file() and prof.is_file() and meta.is_file() and json.loads(meta.read_text()) == stamp):
        t = time.time()
        _tierkit("trace", "record", "--context", str(CONTEXT), "--force", "-o", str(tkt), "--", str(exe), *args)
        _tierkit("profile", str(tkt), "-o", str(prof), "--force")
        meta.write_text(json.dumps(stamp))
        _say(progress, f"recorded and profiled {name} in {time.time() - t:.0f} s")
    return {"trace": tkt, "profile": prof, "exe": exe}


def make_guidance(name: str, profile: Path, strategy: str, capacity_bytes: int, work: Path) -> Path:
    g = work / f"{name}.guidance.json"
    _tierkit("guide", str(profile), "--strategy", strategy, "--capacity", f"{capacity_bytes // 1024}K", "-o", str(g), "--force")
    return g


def _recipes() -> Any:
    """data/recipes/record_traces.py, loaded by path (the suite's recipes: argv, environment and
    the input files, generated from fixed seeds)."""
    import importlib.util

    path = ROOT / "data" / "recipes" / "record_traces.py"
    if "tierkit_record_traces" not in sys.modules:
        spec = importlib.util.spec_from_file_location("tierkit_record_traces", path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"{path}: cannot load the suite's recipes")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # its dataclasses look their module up there
        spec.loader.exec_module(mod)
    return sys.modules["tierkit_record_traces"]


def program_inputs(name: str, work: Path, progress: bool = True, traces: Optional[Path] = None) -> dict:
    """A real program of the suite: its trace, profile and input files. The suite's trace
    (`traces`/PROGRAM-INPUT.tkt, data/traces/real by default) is used where suite.json lists it
    with the recipe's argv and the installed package's version (the version recorded is the
    binary run, so the frame keys match); otherwise the recipe records it into `work`."""
    rt = _recipes()
    tname = PROGRAMS[name][0]
    t = next((x for x in rt.suite() if x.name == tname), None)
    if t is None:
        raise RuntimeError(f"{tname}: not in the suite's recipes (data/recipes/record_traces.py)")
    exe = Path(t.argv[0])
    if not exe.is_file():
        pkg = dict((Path(e).name, p) for e, p in t.needs).get(exe.name, t.package)
        raise RuntimeError(f"{exe} is missing (apt-get install {pkg})")
    version = rt.version(t.package)
    traces = traces or ROOT / "data" / "traces" / "real"
    tkt = traces / f"{tname}.tkt"
    try:
        listed = {e["trace"]: e for e in json.loads((traces / "suite.json").read_text())["traces"]}.get(tname)
    except (OSError, ValueError, KeyError, TypeError):
        listed = None
    ok = (tkt.is_file() and listed is not None and listed.get("argv") == list(t.argv) and listed.get("version") == version
          and listed.get("status") == "ok" and listed.get("bytes") == tkt.stat().st_size)
    if not ok:
        tkt = work / f"{tname}.tkt"
        stamp = {"argv": list(t.argv), "version": version, "frames": rt.FRAMES}
        meta = work / f"{tname}.record.json"
        if not (tkt.is_file() and meta.is_file() and json.loads(meta.read_text()) == stamp):
            _say(progress, f"{tname}: no suite trace of {t.package} {version} in {traces}; recording it")
            rec = work / f"{tname}.rec"
            shutil.rmtree(rec, ignore_errors=True)
            rec.mkdir(parents=True)
            r, secs = rt.record(t, rec, tkt)
            if r["status"] != 0 or r.get("incomplete"):
                raise RuntimeError(f"recording {tname} failed (status {r['status']})")
            shutil.rmtree(rec)
            meta.write_text(json.dumps(stamp))
            _say(progress, f"recorded {tname} in {secs:.0f} s")
    prof = work / f"{tname}.profile.json"
    pstamp = {"trace": str(tkt), "size": tkt.stat().st_size, "mtime_ns": tkt.stat().st_mtime_ns}
    pmeta = work / f"{tname}.profile.stamp.json"
    if not (prof.is_file() and pmeta.is_file() and json.loads(pmeta.read_text()) == pstamp):
        _tierkit("profile", str(tkt), "-o", str(prof), "--force")
        pmeta.write_text(json.dumps(pstamp))
    files = work / "inputs" / name
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(parents=True)
    t.make(files)
    return {"trace": tkt, "profile": prof, "exe": exe, "argv": list(t.argv), "env": dict(t.env), "files": files,
            "package": t.package, "version": version, "trace_name": tname, "what": t.what,
            "strategy": PROGRAM_STRATEGY, "fast_free_mib": PROGRAMS[name][1]}


# ---------------------------------------------------------------------------------------------
# VM runs

def _run_cmd(i: str, prog: str, how: str, env: str = "", dest: str = "$OUT", interval: str = "200ms",
             timeseries: bool = True) -> str:
    """tierkit-run's command line; with `timeseries` it samples the program's residency every
    `interval` into ts.csv (validate --timing's runs sample nothing: that sampling takes the
    paced VM's time)."""
    ts = f"--timeseries {dest}/ts.csv " if timeseries else ""
    return (f"{env}tierkit-run --json {how} --interval {interval} {ts}-- {prog} "
            f"> {dest}/run 2> {dest}/err; echo $? > {dest}/rc; ")


def _collect(r: Any, what: str, pcp: bool = False) -> dict:
    rc = int((r.files.get("rc") or b"-1").strip() or -1)
    if r.status != 0 or rc != 0:
        err = ((r.files.get("err") or b"").decode() + r.stderr)[-600:]
        raise RuntimeError(f"the VM run ({what}) failed (rc {rc}): {err}")
    rep = json.loads(r.files["run"].decode().strip().splitlines()[-1])
    ts_lines = [line.split(",") for line in (r.files.get("ts.csv") or b"").decode().splitlines()]
    ts = [dict(zip(ts_lines[0], map(int, x))) for x in ts_lines[1:]]  # none: the run sampled nothing
    out = {"report": rep, "timeseries": ts, "hugepages": int((r.files.get("hugepages") or b"0").strip() or 0)}
    for tag in ("start", "after"):
        if f"zoneinfo_{tag}" in r.files:
            z = parse_zoneinfo(r.files[f"zoneinfo_{tag}"].decode())
            out[f"zones_{tag}"] = z
            out[f"usable_pages_{tag}"] = usable_pages(z, pcp)
        if f"meminfo_{tag}" in r.files:
            out[f"memfree_{tag}"] = meminfo_free(r.files[f"meminfo_{tag}"].decode())
    return out


#: the VM's settings for the programs' runs (inside the VM only): watermark boosting off (a
#: boost, mm/page_alloc.c `boost_watermark`, raises a zone's watermarks by a pageblock when an
#: allocation steals one of another migrate type: measured once in xz's run, 512 pages of node
#: 0 gone mid-run), the per-CPU free lists capped at their smallest (4 batches a CPU; the
#: fraction of the zone is 1/100000), and a tmpfs bound to node 1 for the programs' files
_PROGRAM_SETUP = ("echo 0 > /proc/sys/vm/watermark_boost_factor; echo 100000 > /proc/sys/vm/percpu_pagelist_high_fraction; "
                  f"mkdir -p {N1} && mount -t tmpfs -o mpol=bind:1 tmpfs {N1}; ")


def _program_cmd(n: str, inp: dict, how: str, env: str, rest_on_node1: bool = False, interval: str = "200ms",
                 timeseries: bool = True) -> str:
    """A program of the suite in its directory on node 1's tmpfs (its input files, copied
    there at the VM's start), tierkit-run's outputs there too, copied to $OUT afterwards.
    With `rest_on_node1`, tierkit-run runs bound to node 1 (testbed/numapol.c) and the program
    inherits the binding (tierkit-run's first-touch sets no policy of its own), so that
    everything but the guided arenas, each bound by the library's mbind, is on node 1: the
    daemon's memory, the program's stack and globals, and the allocators' own metadata."""
    d = f"{N1}/out-{n}"
    penv = "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(inp["env"].items()))
    return (f"rm -rf {d}; mkdir -p {d}; " + _state("start", d) + f"cd {N1}/{n} && "
            + _run_cmd("p", shlex.join(inp["argv"]), how, env + penv + ("numapol bind:1 " if rest_on_node1 else ""), d, interval,
                       timeseries)
            + "cd /; " + _state("after", d) + f"cp {d}/* $OUT/; ")


def run_vm(names: Sequence[str], inputs: dict, work: Path, fast_free_mib: int, progress: bool = True,
           specs: Optional[dict] = None, references: bool = True, vm_config: Any = None, thp: Optional[str] = None,
           rest_on_node1: bool = False) -> dict:
    """Per workload: shrink node 0, read its zones, make the guidance at the usable capacity,
    run guided (and first-touch, all-slow); one VM for everything. A real program of the
    suite (`inputs[n]` from `program_inputs`: its argv, environment, input files, strategy and
    node 0's free MiB) runs as `_program_cmd` says, with `_PROGRAM_SETUP`'s settings, and its
    usable capacity counts the per-CPU lists' pages; with `rest_on_node1` its guided run has
    everything but the guided arenas on node 1 (the model: `nonheap=slow,unmatched=slow`)."""
    from .testbed import FileSet, Testbed, VMConfig, manifest

    specs = specs or WORKLOADS
    run_bin = ROOT / "target" / "release" / "tierkit-run"
    lib = ROOT / "target" / "release" / "libtierkit_alloc.so"
    for p, how in ((run_bin, "cargo build --release -p tierkit-run"), (lib, "make alloc")):
        if not p.is_file():
            raise RuntimeError(f"{p} is missing ({how})")
    files = FileSet().add_binary(run_bin).add_binary(lib, "/usr/local/bin/libtierkit_alloc.so")
    programs = [n for n in names if "argv" in inputs[n]]
    if programs and "numapol" not in manifest().get("programs", []):
        raise RuntimeError("the testbed image has no numapol (testbed/numapol.c): make testbed")
    for n in names:
        if n in programs:
            # the host's own binary at its own path, with the libraries and loader ldd names
            # (the same files the tracer saw, so the same build-ids), and the input files
            files.add_binary(inputs[n]["exe"], str(inputs[n]["exe"])).add_file(inputs[n]["files"], f"/root/{n}")
        else:
            files.add_binary(inputs[n]["exe"])
    out: dict = {"runs": {}}
    t = time.time()
    with Testbed(vm_config or VMConfig(fast_mib=512, slow_mib=1024), files) as vm:
        _say(progress, f"VM up in {vm.boot_s:.0f} s")
        if thp is not None:
            # transparent huge pages (always, madvise, never), inside the VM only
            vm.run(f"echo {shlex.quote(thp)} > /sys/kernel/mm/transparent_hugepage/enabled")
            out["thp_set"] = thp
        if programs:
            r = vm.run(_PROGRAM_SETUP + "".join(f"cp -a /root/{n} {N1}/ && " for n in programs) + "true")
            if r.status != 0:
                raise RuntimeError(f"setting up the VM for the programs failed: {r.stderr.strip()[-300:]}")
        info = vm.run("cat /proc/sys/vm/min_free_kbytes /proc/sys/vm/watermark_scale_factor "
                      "/sys/kernel/mm/transparent_hugepage/enabled /proc/sys/kernel/numa_balancing "
                      "/proc/sys/vm/watermark_boost_factor /proc/sys/vm/percpu_pagelist_high_fraction; uname -r").stdout.splitlines()
        out.update({"min_free_kbytes": int(info[0]), "watermark_scale_factor": int(info[1]), "thp": info[2].strip(),
                    "numa_balancing": int(info[3]), "watermark_boost_factor": int(info[4]),
                    "percpu_pagelist_high_fraction": int(info[5]), "kernel": info[6].strip()})
        for n in names:
            prog_run = n in programs
            if prog_run:
                inp = inputs[n]
                strategy, mib = inp["strategy"], inp["fast_free_mib"]
                prog = shlex.join(inp["argv"])
            else:
                wl, args, strategy = specs[n][0], specs[n][1], specs[n][2]
                prog, mib = shlex.join([wl, *args]), fast_free_mib
            runs: dict = {}
            # the guided run: shrink, read the zones, make the guidance at the usable capacity
            r0 = vm.run(_shrink(mib) + _state("start"), timeout_s=60)
            zones = parse_zoneinfo(r0.files["zoneinfo_start"].decode())
            usable = usable_pages(zones, prog_run) * PAGE
            tag = (n if thp is None else f"{n}-thp-{thp}") + ("-rest-node1" if prog_run and rest_on_node1 else "")
            g = make_guidance(tag, inputs[n]["profile"], strategy, usable, work)
            vm.put(FileSet().add_file(g, f"/root/{n}.guidance.json"))
            t0 = time.time()
            how, env = f"--guidance /root/{n}.guidance.json", f"TIERKIT_ALLOC_SAMPLE_MS={SAMPLE_MS} "
            cmd = (_program_cmd(n, inputs[n], how, env, rest_on_node1) if prog_run
                   else _state("start") + _run_cmd("g", prog, how, env) + _state("after"))
            r = vm.run(cmd + f"echo 0 > {HP}", timeout_s=300)
            runs["guided"] = _collect(r, f"{n} guided", prog_run)
            runs["guided"]["usable_pages_at_guidance"] = usable // PAGE
            runs["guided"]["hugepages"] = int((r0.files.get("hugepages") or b"0").strip() or 0)
            _say(progress, f"{n} guided: {runs['guided']['report']['wall_s']:.1f} s in the VM ({time.time() - t0:.0f} s); "
                           f"node 0 usable {runs['guided']['usable_pages_start'] * PAGE >> 20} MiB")
            if references:
                for pol in ("first-touch", "all-slow"):
                    t0 = time.time()
                    how = f"--policy {pol}"
                    cmd = _program_cmd(n, inputs[n], how, "") if prog_run else _state("start") + _run_cmd(pol, prog, how) + _state("after")
                    r = vm.run(_shrink(mib) + cmd + f"echo 0 > {HP}", timeout_s=300)
                    runs[pol] = _collect(r, f"{n} {pol}", prog_run)
                    _say(progress, f"{n} {pol}: {runs[pol]['report']['wall_s']:.1f} s in the VM ({time.time() - t0:.0f} s)")
            rest = prog_run and rest_on_node1
            key = (n if thp is None else f"{n}, THP {thp}") + (", rest on node 1" if rest else "")
            out["runs"][key] = {"workload": n, "thp": thp or out["thp"], "program": prog, "strategy": strategy, "guidance": str(g),
                                "fast_free_mib": mib, "rest_on_node1": rest, "runs": runs}
    _say(progress, f"VM runs done in {time.time() - t:.0f} s")
    return out


# ---------------------------------------------------------------------------------------------
# the model

def simulate(trace: Path, guidance: Path, fast_bytes: int, work: Path, tag: str, policy: Optional[str] = None) -> dict:
    from . import api

    plat = work / f"platform-{tag}.toml"
    plat.write_text(platform_toml(fast_bytes))
    pol = policy or f"guided:guidance={guidance},unmatched=first-touch"
    return api.run(trace, str(plat), pol, None, None, "simple", progress=False)


def _arena_sites(g: dict) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for s in g["sites"]:
        out.setdefault(int(s["arena"]), []).append(site_frames(s)[0])
    return out


def compare(vm: dict, inputs: dict, work: Path, progress: bool = True) -> dict:
    results = []
    for key, v in vm["runs"].items():
        n = v["workload"]
        gr = v["runs"]["guided"]
        rep = gr["report"]
        ga = rep["guided_alloc"]
        g = json.loads(Path(v["guidance"]).read_text())
        usable = gr["usable_pages_start"] * PAGE
        memfree0 = gr["memfree_start"][0]
        trace = inputs[n]["trace"]
        # everything but the arenas on node 1 in the VM: the model's non-heap and unmatched pages
        # on the slow tier too
        rest = ",nonheap=slow" if v.get("rest_on_node1") else ""
        pol = f"guided:guidance={v['guidance']},unmatched={'slow' if rest else 'first-touch'}{rest}"
        sims = {
            "usable": simulate(trace, Path(v["guidance"]), usable, work, f"{n}-usable", pol),
            "memfree": simulate(trace, Path(v["guidance"]), memfree0, work, f"{n}-memfree", pol),
        }
        refs = {p: simulate(trace, Path(v["guidance"]), usable, work, f"{n}-usable", p) for p in ("first-touch", "all-slow", "all-fast")}
        # the program's own pages on node 0 that are in no guided arena (tierkit-run's peak
        # observation of all its pages less the arenas' at their peaks)
        sites = _arena_sites(g)
        arenas = []
        for a in ga["arenas"]:
            cls = f"arena {a['id']}"
            meas_peak = {int(k): c for k, c in (a.get("pages_by_node_at_peak") or {}).items()}
            meas_end = {int(k): c for k, c in a["pages_by_node"].items()}
            row = {"arena": a["id"], "tier": a["tier"], "node": a["node"], "sites": sites.get(a["id"], []),
                   "allocations": a["allocations"], "bytes": a["bytes"],
                   "measured_peak": [meas_peak.get(0, 0), meas_peak.get(1, 0)],
                   "measured_end": [meas_end.get(0, 0), meas_end.get(1, 0)]}
            for k, s in sims.items():
                bc = s["stats"]["policy"]["by_class"].get(cls, {})
                row[f"sim_{k}_peak"] = bc.get("pages_by_tier_at_peak", [0, 0])
                row[f"sim_{k}_end"] = bc.get("pages_by_tier_end", [0, 0])
                row[f"sim_{k}_allocations"] = bc.get("allocations", 0)
            mp, sp = row["measured_peak"], row["sim_usable_peak"]
            row["fast_diff_pages"] = mp[0] - sp[0]
            row["total_diff_pages"] = sum(mp) - sum(sp)
            arenas.append(row)
        sp_pol = sims["usable"]["stats"]["policy"]
        arena_fast = sum(a["measured_peak"][0] for a in arenas)
        # per site: the pages of its large blocks (the library's samples, at their peak)
        # against the model's pages placed for the same site (by its innermost frame)
        sim_by_site: dict[str, list[int]] = {}
        for bs in sp_pol.get("by_site", []):
            if bs["frames"]:
                acc = sim_by_site.setdefault(bs["frames"][0], [0, 0])
                for t, c in enumerate(bs["pages_by_tier_end"][:2]):
                    acc[t] += c
        site_rows = []
        for d in (ga["reports"][0]["decisions"] if ga["reports"] else []):
            bp = d.get("block_pages_by_node_at_peak")
            if bp is None:
                continue
            # the model's pages of the same sites (its by_site names a site by its display frame)
            sim = [sum(sim_by_site.get(g["sites"][i]["frames"][0], [0, 0])[t] for i in d["sites"]) for t in (0, 1)]
            names = [site_frames(g["sites"][i])[0] for i in d["sites"]]
            meas = [bp.get("0", 0), bp.get("1", 0)]
            site_rows.append({"sites": names, "arena": d["arena"], "tier": g["arenas"][d["arena"]]["tiers"][0],
                              "measured_peak": meas, "sim_usable": sim, "fast_diff_pages": meas[0] - sim[0],
                              "total_diff_pages": sum(meas) - sum(sim)})
        res = {
            "workload": n, "key": key, "thp": v["thp"], "program": v["program"],
            "vm_other_pages_on_node0": max(0, rep["pages"]["peak_fast"] - arena_fast), "strategy": v["strategy"], "why": PROGRAMS[n][2] if n in PROGRAMS else WORKLOADS.get(n, ("", (), "", ""))[3],
            **({k: inputs[n][k] for k in ("trace_name", "package", "version", "argv", "env", "what")} if "argv" in inputs[n] else {}),
            "fast_free_mib_target": v.get("fast_free_mib"), "pcp_counted": "argv" in inputs[n],
            "rest_on_node1": bool(v.get("rest_on_node1")), "model_policy": pol.replace(str(v["guidance"]), "G"),
            "node0_memfree_bytes": memfree0, "node0_usable_bytes": usable,
            "node0_usable_bytes_at_guidance": gr["usable_pages_at_guidance"] * PAGE,
            "node0_zones_start": gr["zones_start"], "node0_zones_after": gr.get("zones_after"),
            "hugepages": gr["hugepages"],
            "guidance_capacity_bytes": g.get("capacity_bytes"),
            "allocations_total": ga["allocations_total"], "allocations_unmatched": ga["allocations_unmatched"],
            "sim_allocations": sp_pol["allocations"], "sim_allocations_unmatched": sp_pol["allocations_unmatched"],
            "unwinds": ga["unwinds"], "arena_fallbacks": ga["arena_fallbacks"],
            "decisions": [{"sites": d["sites"], "arena": d["arena"], "allocations": d["allocations"]} for d in ga["reports"][0]["decisions"]] if ga["reports"] else [],
            "arenas": arenas,
            "sites": site_rows,
            "sim_overflow_pages": {k: s["stats"]["policy"].get("overflow_pages") for k, s in sims.items()},
            "sim_nonheap_pages": {k: s["stats"]["policy"]["by_class"].get("non-heap", {}).get("pages_by_tier_end") for k, s in sims.items()},
            "fast_hit_ratio": {"guided (usable)": sims["usable"]["fast_hit_ratio"], "guided (MemFree)": sims["memfree"]["fast_hit_ratio"],
                               **{p: r["fast_hit_ratio"] for p, r in refs.items()}},
            "sim_runtime_ms": {"guided (usable)": sims["usable"]["runtime_ns"] / 1e6, "guided (MemFree)": sims["memfree"]["runtime_ns"] / 1e6,
                               **{p: r["runtime_ns"] / 1e6 for p, r in refs.items()}},
            "vm_wall_s": {p: x["report"]["wall_s"] for p, x in v["runs"].items()},
            "vm_pages_peak": {p: [x["report"]["pages"]["peak_fast"], x["report"]["pages"]["peak_slow"]] for p, x in v["runs"].items()},
            "samples": ga["reports"][0].get("samples") if ga["reports"] else None,
            "timeseries": {p: x["timeseries"] for p, x in v["runs"].items()},
        }
        results.append(res)
        _say(progress, f"{key}: " + "; ".join(f"arena {a['arena']} peak measured {a['measured_peak']} sim {a['sim_usable_peak']}" for a in arenas))
    return {"results": results}


# ---------------------------------------------------------------------------------------------
# table and plot

def _site_list(labels: list[str], most: int = 4) -> str:
    """Site labels in the order given, each once with its count (×N), at most `most` of
    them and how many more: sqlite3's arenas hold hundreds of sites behind one wrapper."""
    counts: dict[str, int] = {}
    for x in labels:
        counts[x] = counts.get(x, 0) + 1
    shown = [f"{x} ×{c}" if c > 1 else x for x, c in list(counts.items())[:most]]
    more = len(counts) - most
    return ", ".join(shown) + (f", {more} more" if more > 0 else "")


def _mib(pages: int) -> str:
    return f"{pages * PAGE / 2**20:.1f}"


def table(res: dict) -> str:
    lines = ["| workload | arena (tier → node) | sites | node 0 / node 1 at the peak, measured | simulated (usable) | "
             "simulated (MemFree) | at the end, measured | simulated (usable) | node 0 diff |",
             "|" + " --- |" * 9]
    for r in res["results"]:
        for a in r["arenas"]:
            sites = _site_list([s.split(" (")[0] for s in a["sites"]])
            mp, su, sm, me, se = a["measured_peak"], a["sim_usable_peak"], a["sim_memfree_peak"], a["measured_end"], a["sim_usable_end"]
            lines.append(f"| {r['key']} | {a['arena']} ({a['tier']} → {a['node']}) | {sites} | {mp[0]} / {mp[1]} | {su[0]} / {su[1]} "
                         f"| {sm[0]} / {sm[1]} | {me[0]} / {me[1]} | {se[0]} / {se[1]} | {a['fast_diff_pages']:+d} ({_mib(abs(a['fast_diff_pages']))} MiB) |")
    lines.append("")
    lines.append("| workload | site | arena (tier) | its large blocks' pages, node 0 / node 1 at their peak, measured | "
                 "pages placed, fast / slow, simulated (usable) | node 0 diff |")
    lines.append("|" + " --- |" * 6)
    for r in res["results"]:
        for x in r.get("sites", []):
            m, sm = x["measured_peak"], x["sim_usable"]
            lines.append(f"| {r['key']} | {', '.join(n.split(' (')[0] for n in x['sites'])} | {x['arena']} ({x['tier']}) "
                         f"| {m[0]} / {m[1]} | {sm[0]} / {sm[1]} | {x['fast_diff_pages']:+d} |")
    lines.append("")
    lines.append("| workload | node 0 MemFree / usable (MiB) | program's other pages on node 0, VM / model non-heap (MiB) | allocations (unmatched), VM / model | fast share of accesses (model): guided / first-touch / all-slow / all-fast "
                 "| VM wall s: guided / first-touch / all-slow | model ms: guided / first-touch / all-slow / all-fast |")
    lines.append("|" + " --- |" * 7)
    for r in res["results"]:
        f, w, s = r["fast_hit_ratio"], r["vm_wall_s"], r["sim_runtime_ms"]
        nh = (r["sim_nonheap_pages"]["usable"] or [0])[0]
        lines.append(f"| {r['key']} | {r['node0_memfree_bytes'] / 2**20:.1f} / {r['node0_usable_bytes'] / 2**20:.1f} "
                     f"| {_mib(r['vm_other_pages_on_node0'])} / {_mib(nh)} "
                     f"| {r['allocations_total']} ({r['allocations_unmatched']}) / {r['sim_allocations']} ({r['sim_allocations_unmatched']}) "
                     f"| {100 * f['guided (usable)']:.1f} / {100 * f['first-touch']:.1f} / {100 * f['all-slow']:.1f} / {100 * f['all-fast']:.1f} % "
                     f"| {w.get('guided', 0):.2f} / {w.get('first-touch', float('nan')):.2f} / {w.get('all-slow', float('nan')):.2f} "
                     f"| {s['guided (usable)']:.1f} / {s['first-touch']:.1f} / {s['all-slow']:.1f} / {s['all-fast']:.1f} |")
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = res["results"]
    fig, axes = plt.subplots(2, len(rs), figsize=(6 * len(rs), 7), squeeze=False)
    for j, r in enumerate(rs):
        ax = axes[0][j]
        labels: list[str] = []
        x = 0.0
        for a in r["arenas"]:
            for k, key, style in (("measured", "measured_peak", "k"), ("model, usable", "sim_usable_peak", "C0"), ("model, MemFree", "sim_memfree_peak", "C1")):
                v = a[key]
                ax.bar(x, v[0] * PAGE / 2**20, color=style, alpha=0.9)
                ax.bar(x, v[1] * PAGE / 2**20, bottom=v[0] * PAGE / 2**20, color=style, alpha=0.35, hatch="//")
                labels.append(f"arena {a['arena']}\n{k}")
                x += 1
            x += 0.5
        ax.set_xticks([i for i in range(len(labels) + len(r["arenas"])) if i < x][:0])
        ax.set_xticks([])
        pos = 0.0
        for a in r["arenas"]:
            ax.text(pos + 1, -0.06, f"arena {a['arena']} (tier {a['tier']})", transform=ax.get_xaxis_transform(), ha="center", fontsize=8)
            pos += 3.5
        ax.set_ylabel("MiB at the peak (solid: node 0, hatched: node 1)")
        ax.set_title(f"{r['key']} ({r['strategy']}): black measured, blue model (usable), orange model (MemFree)", fontsize=8)
        ax = axes[1][j]
        s = r.get("samples")
        if s:
            t = [x / 1000 for x in s["t_ms"]]
            for i, a in enumerate(r["arenas"]):
                ax.plot(t, [p[i].get("0", 0) * PAGE / 2**20 if i < len(p) else 0 for p in s["pages_by_node"]], f"C{i}-", label=f"arena {a['arena']} node 0")
                ax.plot(t, [p[i].get("1", 0) * PAGE / 2**20 if i < len(p) else 0 for p in s["pages_by_node"]], f"C{i}--", label=f"arena {a['arena']} node 1")
        ax.axhline(r["node0_usable_bytes"] / 2**20, color="grey", lw=0.8, ls=":", label="node 0 usable at start")
        ax.set_xlabel("VM time since the program started (s)")
        ax.set_ylabel("MiB")
        ax.set_title(f"{r['key']}: each arena's pages per node, sampled every {SAMPLE_MS} ms", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def validate_guided(names: Sequence[str] = tuple(WORKLOADS), out: Optional[Path] = None, work: Optional[Path] = None,
                    img: Optional[Path] = None, fast_free_mib: int = FAST_FREE_MIB, progress: bool = True,
                    thp_never: bool = True, programs: Sequence[str] = (), traces: Optional[Path] = None) -> dict:
    """The workloads `names` (THP as the kernel has it, and again with THP off unless not
    `thp_never`), and the suite's `programs` (THP off), each against the model."""
    for n in names:
        if n not in WORKLOADS:
            raise ValueError(f"--workloads: unknown workload '{n}' for --guided (known: {', '.join(WORKLOADS)})")
    for n in programs:
        if n not in PROGRAMS:
            raise ValueError(f"--programs: unknown program '{n}' (known: {', '.join(PROGRAMS)})")
    work = work or ROOT / "target" / "guided-vm"
    work.mkdir(parents=True, exist_ok=True)
    t = time.time()
    inputs = {n: record_and_profile(n, work, progress) for n in names}
    inputs.update({n: program_inputs(n, work, progress, traces) for n in programs})
    vm: dict = {"runs": {}}
    if names:
        vm = run_vm(names, inputs, work, fast_free_mib, progress)
        if thp_never:
            # the same guided runs with transparent huge pages off (no references): what of the
            # difference the kernel's huge pages make
            vm2 = run_vm(names, inputs, work, fast_free_mib, progress, references=False, thp="never")
            vm["runs"].update(vm2["runs"])
    if programs:
        # THP off: with it on, the kernel backs a heap with 2 MiB pages on node 0 at first
        # touch, which the model does not have (docs/guidance.md, "Checked in the VM")
        vp = run_vm(list(programs), inputs, work, fast_free_mib, progress, references=False, thp="never")
        # again with everything but the guided arenas bound to node 1 (tierkit-run, the stack,
        # the allocators' metadata): node 0 then holds the fast arena's pages alone, in the VM
        # and in the model
        vp["runs"].update(run_vm(list(programs), inputs, work, fast_free_mib, progress, references=False, thp="never",
                                 rest_on_node1=True)["runs"])
        settings = {k: vp[k] for k in ("min_free_kbytes", "watermark_scale_factor", "thp", "numa_balancing", "kernel",
                                       "watermark_boost_factor", "percpu_pagelist_high_fraction")}
        vm["runs"].update(vp["runs"])
        vm["programs_vm"] = settings
        for k, x in settings.items():
            vm.setdefault(k, x)
    res = compare(vm, inputs, work, progress)
    res.update({k: vm[k] for k in ("min_free_kbytes", "watermark_scale_factor", "thp", "numa_balancing", "kernel")})
    if programs:
        res["programs_vm"] = vm["programs_vm"]
    res.update({"date": time.strftime("%Y-%m-%d"), "fast_free_mib_target": fast_free_mib, "sample_ms": SAMPLE_MS,
                "vm": "testbed (QEMU TCG), node 0 512 MiB (shrunk by hugetlb pages), node 1 1 GiB", "elapsed_s": round(time.time() - t, 1)})
    if out is not None:
        _say(progress, f"wrote {out} and {write_results(res, out, table(res))}")
    if img is not None:
        _say(progress, f"wrote {plot(res, img)}")
    return res
