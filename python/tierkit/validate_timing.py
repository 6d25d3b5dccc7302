"""`tierkit validate --timing` (docs/validation.md, "Predicted runtimes against measured ones"):
tierkit's predicted runtime of a program under a policy against the runtime measured in the
testbed VM with a slow tier that is really slower (docs/real-linux.md, "A slow tier that is
really slower").

1. **The machine.** One VM with the slow-tier plugin on (testbed.SlowTier): the guest is paced
   to a time model of its own (instructions at `ips`, last-level-cache misses at node 0's or
   node 1's latency). `testbed.calibrate` measures it from inside: per node the time of a
   dependent chase, a stream, the cost of move_pages per page; a chase that stays in the cache
   gives a step's instructions alone.
2. **Measured.** Each program runs natively in that VM under each policy: all-fast and all-slow
   (tierkit-run's memory policies, node 0 not shrunk), first-touch, the kernel's
   autonuma-tiering and damon-tiering, tierkit-run's daemons hyplacer and history (node 0
   shrunk by hugetlb pages to `fast_free_mib` free, as the kernel validation does).
   `measured_s` is tierkit-run's wall time: the guest's clock, which the plugin paces.
3. **Predicted.** The same program, recorded natively with the Valgrind tracer through the
   plugin's cache (`L1:<llc>:<ways>`, 64-byte lines), simulated by tierkit's `simple` model on
   a platform written from the calibration (`platform_toml`), plus the trace's instructions at
   the plugin's `ips` (the simple model counts memory time only), plus a page fault for each
   page the trace touches (memlat's first-touch cost in the VM), plus, under tierkit-run's
   daemons, their soft-dirty tracking (`soft_dirty_cost`). damon-tiering's model is set up
   from the schemes the kernel held, as the kernel validation does. The policy's clock runs at
   guest time: `--time-scale K` with K = predicted total / predicted memory time under
   first-touch.
4. **Side by side.** `measured_speedup` and `predicted_speedup` against all-slow, per row;
   Kendall's tau of the policies' order per workload; the goals of docs/validation.md.
"""
from __future__ import annotations

import functools
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from . import validate as v
from .deploy import time_ns

ROOT = v.ROOT
PAGE = 4096
#: the VM's observation interval for tierkit-run (--interval): its daemons' period too
INTERVAL = "500ms"
#: the runs: (what tierkit-run is given, the model's spec, whether node 0 is shrunk); the
#: kernel policies' model specs come from validate.model_args (node 0's watermarks)
RUNS: dict[str, tuple[str, str, bool]] = {
    "all-fast": ("all-fast", "all-fast", False),
    "all-slow": ("all-slow", "all-slow", False),
    "first-touch": ("first-touch", "first-touch", True),
    "autonuma-tiering": (v.KERNEL_ARGS["autonuma-tiering"], "", True),
    "damon-tiering": (v.KERNEL_ARGS["damon-tiering"], "", True),
    # the daemons run every --interval in the VM; the model's period is that time
    "hyplacer": ("hyplacer", f"hyplacer:interval={INTERVAL}", True),
    "history": ("history", f"history:period={INTERVAL}", True),
}
POLICIES = tuple(RUNS)
#: name -> (class, workload, arguments): the kernel validation's workloads, shorter (under the
#: slow tier the guest runs about 40 times slower than a real machine)
WORKLOADS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "phases": ("moving hot set", "phases", ("--size", "medium", "--work", "0.05")),
    "sites": ("skewed hot set", "sites", ("--size", "medium", "--work", "0.1")),
    "stencil": ("streaming sweep", "stencil", ("--size", "medium", "--work", "0.1")),
    "rwmix": ("write-heavy mix", "rwmix", ("--size", "medium", "--work", "0.05", "--write-ratio", "0.9")),
}
#: real programs of the suite (data/recipes/record_traces.py), run from the host's binaries in
#: the VM as `tierkit validate --guided --programs` runs them: name -> (the suite's trace, node
#: 0's MemFree in MiB for it, directories the program reads besides its binary and the libraries
#: ldd names). With transparent huge pages off and the per-CPU lists capped, node 0 keeps about
#: 3 MiB of MemFree below its low watermark and lowmem reserve (measured 2026-11-29: 36 MiB free,
#: 33 MiB usable, and every policy equalled all-fast), so the targets leave about half the
#: footprint usable.
#: The "train" inputs: 0.9 and 1.2 G instructions, 45 and 63 s in the paced VM (sqlite3-ref's
#: 5.4 G would take 3.5 minutes a run)
PROGRAMS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "xz": ("xz-train", 12, ()),                                              # 18.5 MiB footprint
    "perl": ("perl-train", 12, ("/usr/lib/x86_64-linux-gnu/perl-base",)),    # 17.4 MiB; strict.pm, warnings.pm
}
#: tierkit-run's daemons (the others are memory policies or the kernel's)
DAEMONS = ("hyplacer", "history")
#: transparent huge pages in the VM (the model places 4 KiB pages)
THP = "never"
#: the goals (docs/validation.md)
SPEEDUP_GOAL = 0.15
TAU_GOAL = 0.8


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"validate --timing: {msg}", file=sys.stderr, flush=True)


def platform_toml(cal: dict, fast_bytes: Optional[int]) -> str:
    """The paced VM as a tierkit platform, every figure from the calibration: a tier's read
    latency is its chase step less a step in the cache (the step's instructions); its bandwidth
    is one 64-byte line per latency (the plugin pays misses one after another); writes cost
    nothing (the plugin charges a store's miss as the read it is, not the writeback); a
    migration costs the measured move_pages time per page, copy included. `fast_bytes` None:
    node 0 unlimited (the all-fast reference)."""
    hit = cal["cache_hit_chase_ns"]
    n0, n1 = cal["nodes"]
    tiers = []
    for name, n, cap in (("node0", n0, fast_bytes), ("node1", n1, None)):
        lat = max(n["chase_ns"] - hit, 1.0)
        bw = 64.0 / lat
        cap_line = f'capacity = "{cap // 1024}K"\n' if cap is not None else ""
        tiers.append(f"""[[tiers]]
name = "{name}"
{cap_line}read_latency_ns = {lat:.2f}
write_latency_ns = 0.001
read_bw_gb_per_s = {bw:.6f}
write_bw_gb_per_s = 1000.0
""")
    move = (n0.get("move_ns_per_page", 0) + n1.get("move_ns_per_page", 0)) / 2
    return f'''name = "testbed-slow-tier"
description = "The testbed VM paced by the slow-tier plugin, from its calibration (written by tierkit validate --timing)"
source = "python -m tierkit.testbed calibrate: memlat's chase, stream and move_pages in the VM"

{"".join(tiers)}
[migration]
fault_ns = 0.0
tlb_shootdown_ns = 0.0
per_page_ns = {move:.1f}
per_period_ns = 0.0
copy_from_bandwidth = false
'''


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Kendall's tau-a of two rankings of the same items (None with fewer than two)."""
    n = len(a)
    if n < 2:
        return None
    def sign(x: float) -> int:
        return (x > 0) - (x < 0)

    s = sum(sign(a[i] - a[j]) * sign(b[i] - b[j]) for i in range(n) for j in range(i + 1, n))
    return s / (n * (n - 1) / 2)


#: before node 0 is shrunk: its free memory compacted, so that the hugetlb reservation finds
#: 2 MiB blocks (without it, after the calibration moved 64 MiB between the nodes, a program
#: asking for 10 MiB free found 26 MiB)
COMPACT = "echo 1 > /proc/sys/vm/compact_memory; "


def _interval(spec: str) -> str:
    """tierkit-run's --interval: a daemon's period, or, for a memory policy or the kernel's, one
    observation (longer than any run)."""
    return INTERVAL if spec.split(":")[0] in DAEMONS else "3600s"


def _script(i: int, program: str, spec: str, shrink: bool, fast_free_mib: int) -> str:
    """One workload's run: node 0 shrunk (or left at 400 MiB free), its state read, the program
    under tierkit-run. Nothing samples beside it (no vmstat loop, no --timeseries or region
    series, as the kernel validation has): in the paced VM an instruction costs 40 ns, and
    that sampling over a program's 4 KiB pages took a vCPU's worth of the guest's time. A
    memory policy observes once (--interval longer than any run); a daemon every INTERVAL."""
    from . import guided_vm as gv

    return (
        COMPACT + gv._shrink(fast_free_mib if shrink else 400)
        + f"grep MemFree /sys/devices/system/node/node*/meminfo > $OUT/meminfo{i}; "
        f"cat /proc/zoneinfo > $OUT/zoneinfo{i}; cat /sys/devices/system/node/node0/meminfo > $OUT/node0meminfo{i}; "
        f"tierkit-run --json --policy {shlex.quote(spec)} --interval {_interval(spec)} -- {program} > $OUT/run{i} 2> $OUT/err{i}; "
        f"echo $? > $OUT/rc{i}; echo 0 > {gv.HP}"
    )


def program_input(name: str, work: Path) -> dict:
    """A real program of the suite: its recipe, binary, argv, environment and input files."""
    from . import guided_vm as gv

    rt = gv._recipes()
    tname, mib, dirs = PROGRAMS[name]
    t = next((x for x in rt.suite() if x.name == tname), None)
    if t is None:
        raise RuntimeError(f"{tname}: not in the suite's recipes (data/recipes/record_traces.py)")
    exe = Path(t.argv[0])
    if not exe.is_file():
        raise RuntimeError(f"{exe} is missing (apt-get install {t.package})")
    files = work / "inputs" / name
    if files.exists():
        import shutil

        shutil.rmtree(files)
    files.mkdir(parents=True)
    t.make(files)
    return {"recipe": t, "exe": exe, "argv": list(t.argv), "env": dict(t.env), "files": files, "trace_name": tname,
            "package": t.package, "version": rt.version(t.package), "fast_free_mib": mib, "dirs": dirs}


def _one_run(vm, i: int, n: str, p: str, prog: str, programs: dict, fast_free_mib: int) -> dict:
    """One (program, policy) run in the paced VM: tierkit-run's wall time (the guest's clock),
    node 0's free memory at the start, the plugin's counts over the run."""
    from . import guided_vm as gv

    spec, _, shrink = RUNS[p]
    if n in programs:
        mib = programs[n]["fast_free_mib"] if shrink else 400
        r = vm.run(COMPACT + gv._shrink(mib) + "cat /sys/devices/system/node/node0/meminfo > $OUT/node0meminfo_start; "
                   + gv._program_cmd(n, programs[n], f"--policy {shlex.quote(spec)}", "", interval=_interval(spec), timeseries=False)
                   + f"echo 0 > {gv.HP}", timeout_s=1800)
        c = gv._collect(r, f"{n} {p}", True)
        rep, free = c["report"], c["memfree_start"]
        zi, nm = r.files["zoneinfo_start"].decode(), r.files["node0meminfo_start"].decode()
    else:
        r = vm.run(_script(i, prog, spec, shrink, fast_free_mib), timeout_s=1800)
        rep, free = v.run_report(r, i, f"{n} under {p}")
        zi, nm = r.files[f"zoneinfo{i}"].decode(), r.files[f"node0meminfo{i}"].decode()
    mo = r.model or {}
    return {"wall_s": rep["wall_s"], "node0_free_bytes": free.get(0), "lag_s": mo.get("lag_ns", 0) / 1e9,
            # the plugin's counts over the command (both vCPUs: the program's, and everything
            # else the VM ran meanwhile: tierkit-run, the samplers, the kernel)
            "vm_insns": mo.get("insns"), "vm_misses_node0": mo.get("misses_node0"), "vm_misses_node1": mo.get("misses_node1"),
            "vmstat": rep.get("vmstat"), "program_rusage": rep.get("program_rusage"), "soft_dirty": rep.get("soft_dirty"),
            "damon_tiering": rep.get("damon_tiering"), "node0_model_params": v.node0_model_params(zi, nm) if shrink else None,
            # what an allocation that prefers node 0 can still take there before it falls back
            # to node 1: free above each zone's low watermark and lowmem reserve (with the
            # per-CPU lists, which the programs' setup caps), not MemFree
            "node0_usable_bytes": gv.usable_pages(gv.parse_zoneinfo(zi), bool(programs)) * PAGE}


def measure(names: Sequence[str], policies: Sequence[str], specs: dict, fast_free_mib: int, tierkit_run: Path,
            progress: bool = True, repeats: int = 1, programs: Optional[dict] = None, cpus: int = 2) -> dict:
    """Boot the paced VM, calibrate it, run every (workload or program, policy) `repeats` times."""
    programs = programs or {}
    from .testbed import FileSet, SlowTier, Testbed, VMConfig, calibrate

    from . import guided_vm as gv

    files = FileSet().add_binary(tierkit_run)
    for n in names:
        if n in programs:
            inp = programs[n]
            files.add_binary(inp["exe"], str(inp["exe"])).add_file(inp["files"], f"/root/{n}")
            for d in inp["dirs"]:
                files.add_file(d, d)
        else:
            files.add_binary(ROOT / "workloads" / "build" / specs[n][1])
    runs: dict = {}
    failed: list = []
    i = 0
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024, cpus=cpus, slow_tier=SlowTier()), files, boot_timeout_s=300) as vm:
        # 4 KiB pages only, as the model has them: with transparent huge pages a program's memory
        # on a roomy node came in 2 MiB pages (rwmix: 63 huge-page faults in all) and on a node 0
        # shrunk below its footprint in 4 KiB ones (37-47 of the 63 fell back: 45 k faults), so
        # the shrunk runs paid page faults the unshrunk references did not (docs/validation.md)
        r = vm.run(f"echo {THP} > /sys/kernel/mm/transparent_hugepage/enabled")
        if r.status != 0:
            raise RuntimeError(f"setting transparent huge pages to {THP} in the VM failed: {r.stderr.strip()[-200:]}")
        if programs:
            r = vm.run(gv._PROGRAM_SETUP + "".join(f"cp -a /root/{n} {gv.N1}/ && " for n in programs if n in names) + "true")
            if r.status != 0:
                raise RuntimeError(f"setting up the VM for the programs failed: {r.stderr.strip()[-300:]}")
        t0 = time.time()
        cal = calibrate(vm)
        _say(progress, f"VM up in {vm.boot_s:.0f} s; calibrated in {time.time() - t0:.0f} s: chase {cal['nodes'][0]['chase_ns']:.0f} / "
                       f"{cal['nodes'][1]['chase_ns']:.0f} ns, in cache {cal['cache_hit_chase_ns']:.0f} ns, move_pages "
                       f"{cal['nodes'][0]['move_ns_per_page']:.0f} ns/page")
        for n in names:
            prog = " ".join([specs[n][1], *specs[n][2]]) if n not in programs else shlex.join(programs[n]["argv"])
            for p in policies:
                for _ in range(repeats):
                    t = time.time()
                    try:
                        one = _one_run(vm, i, n, p, prog, programs, fast_free_mib)
                    except RuntimeError as e:
                        # one run that fails (a policy tierkit-run refuses here) is reported,
                        # and the others go on
                        failed.append({"workload": n, "policy": p, "error": str(e)[-400:]})
                        _say(progress, f"{n} / {p}: FAILED: {str(e)[-200:]}")
                        i += 1
                        break
                    runs.setdefault((n, p), []).append(one)
                    _say(progress, f"{n} / {p}: {one['wall_s']:.2f} s in the VM (host {time.time() - t:.0f} s, "
                                   f"the host fell {one['lag_s'] * 1e3:.0f} ms behind the model)")
                    i += 1
    return {"calibration": cal, "runs": runs, "failed": failed}


def predict(names: Sequence[str], policies: Sequence[str], specs: dict, meas: dict, work: Path, progress: bool = True,
            programs: Optional[dict] = None) -> dict:
    """Record each program through the plugin's cache and simulate it under each policy on the
    calibrated platform; seconds per (workload, policy)."""
    from . import api

    programs = programs or {}
    cal = meas["calibration"]
    st = cal["slow_tier"]
    cache = f"L1:{st['llc_bytes'] // 1024}K:{st['llc_ways']}"
    # a first touch's page fault (a calibration without the figure: none charged), and
    # soft-dirty tracking's costs (None: not measured, or no soft-dirty bits in the VM)
    fault_ns = _node_mean(cal, "fault_ns_per_page") or 0.0
    wp_ns = _node_mean(cal, "wp_fault_ns_per_page")
    clear_ns = _node_mean(cal, "clear_refs_ns_per_page")
    out = {}
    for n in names:
        tkt = work / f"timing-{n}.tkt"
        meta = work / f"timing-{n}.record.json"
        rec = json.loads(meta.read_text()) if meta.is_file() else {}
        if n in programs:
            args = [*programs[n]["argv"], programs[n]["version"]]
        else:
            args = list(specs[n][2])
        if not (tkt.is_file() and rec.get("args") == args and rec.get("cache") == cache):
            t0 = time.time()
            if n in programs:
                from . import guided_vm as gv

                d = work / f"timing-{n}.rec"
                d.mkdir(parents=True, exist_ok=True)
                r, _ = gv._recipes().record(programs[n]["recipe"], d, tkt, cache=cache)
            else:
                r = api.record(ROOT / "workloads" / "build" / specs[n][1], args, tkt, cache=cache, force=True)
            if r["status"] != 0:
                raise RuntimeError(f"recording {n} failed: status {r['status']}")
            rec = {"args": args, "cache": cache, "instructions": r["instructions"]}
            meta.write_text(json.dumps(rec))
            _say(progress, f"recorded {n}: {r['instructions'] / 1e6:.0f} M instructions in {time.time() - t0:.0f} s")
        compute_s = rec["instructions"] / st["ips"]
        if (n, "all-slow") not in meas["runs"]:
            continue  # no reference to predict against: compare() leaves it out
        k = None
        for p in ["first-touch", *[q for q in policies if q != "first-touch"]]:
            reps = meas["runs"].get((n, p))
            if reps is None and p != "first-touch":
                continue
            shrink = RUNS[p][2]
            ref = reps[0] if reps else meas["runs"][(n, "all-slow")][0]
            kp = ref.get("node0_model_params") if p in ("autonuma-tiering", "damon-tiering") else None
            if not (shrink and reps):
                fast = None
            elif kp:
                # the kernel policies' models take node 0's watermarks themselves: its free
                # frames and the other programs' pages there, as the kernel validation gives them
                fast = ref["node0_free_bytes"] + kp["fast_other_pages"] * PAGE
            else:
                fast = max(ref["node0_usable_bytes"], 16 * PAGE)  # a platform's tier holds something
            plat = work / f"timing-platform-{n}-{p}.toml"
            plat.write_text(platform_toml(cal, fast))
            if p == "damon-tiering":
                # set up as the kernel held the schemes (tierkit-run's read-back), on node 0's
                # floors, as the kernel validation does (validate.damon_model_args)
                spec = v.damon_model_args(ref) + v.damon_node0_args(kp)
            elif p == "autonuma-tiering":
                spec = v.model_args(p, kp)
            else:
                spec = RUNS[p][1]
            if k is None:  # the first: first-touch, at scale 1, sets the clock
                r = api.run(tkt, str(plat), "first-touch", None, None, "simple", progress=False)
                mem_s = r["runtime_ns"] / 1e9
                # every page the program touches faults once, whatever the policy: the
                # kernel's fault, allocation and zeroing, as memlat measures it in the VM
                fault_s = r["pages"] * fault_ns / 1e9
                k = (mem_s + compute_s + fault_s) / mem_s
            r = api.run(tkt, str(plat), spec, None, None, "simple", progress=False, time_scale=k)
            if reps is not None:
                total = r["runtime_ns"] / 1e9 + compute_s + fault_s
                sd = None
                if p in DAEMONS and reps[0].get("soft_dirty") and wp_ns is not None:
                    # the daemon's soft-dirty tracking, which the program pays (soft_dirty_cost)
                    sd = soft_dirty_cost(tkt, total, (time_ns(INTERVAL) or 0.0) / 1e9, clear_ns or 0.0, wp_ns)
                    total += sd["seconds"]
                out[(n, p)] = {"predicted_s": total, "memory_s": r["runtime_ns"] / 1e9,
                               "compute_s": compute_s, "fault_s": fault_s, "soft_dirty_s": sd["seconds"] if sd else 0.0,
                               "predicted_wp_faults": sd["written_page_periods"] if sd else 0,
                               "time_scale": k, "migrations": r["migrations"],
                               "predicted_misses": r["reads"], "predicted_fast_share": r["fast_hit_ratio"],
                               "predicted_insns": rec["instructions"]}
    _trace_pages.cache_clear()  # the arrays of the last trace are not kept past the prediction
    return out


def _node_mean(cal: dict, key: str) -> Optional[float]:
    """A calibration figure's mean over the nodes; None where a node lacks it."""
    xs = [x.get(key) for x in cal["nodes"]]
    return sum(xs) / len(xs) if xs and all(x is not None for x in xs) else None


@functools.lru_cache(maxsize=1)
def _trace_pages(trace: str, _stamp: tuple) -> tuple:
    """A trace's pages, instruction counts and write flags as arrays, read once for the
    policies that need them (`_stamp`: the file's size and mtime, so a trace recorded again
    is read again)."""
    import numpy as np

    from . import api

    df = api.read_trace(trace)
    return ((df["addr"].to_numpy() >> np.uint64(12)).astype(np.int64), df["insn"].to_numpy().astype(np.float64),
            df["write"].to_numpy().astype(bool))


def soft_dirty_cost(trace: Path, total_s: float, period_s: float, clear_ns: float, wp_ns: float) -> dict:
    """What soft-dirty tracking costs a program under one of tierkit-run's daemons, which
    clears the bits at each observation (/proc/PID/clear_refs): per period, clearing them over
    the pages the program has (`clear_ns` each), and then a write-protect fault on the first
    write to each page in the period (`wp_ns` each; memlat measures both in the VM). The trace's
    accesses are put on the run's clock by their instruction count (`total_s` for the whole
    run). A write that hits in the cache the trace was recorded through is not in the trace:
    a page written only that way in a period is not counted (at most the cache's 1,024 pages)."""
    import numpy as np

    st = Path(trace).stat()
    page, insn, w = _trace_pages(str(trace), (st.st_size, st.st_mtime_ns))
    span = max(float(insn[-1]) if len(insn) else 0.0, 1.0)
    periods = max(int(total_s / period_s), 0)
    per = np.minimum((insn / span * total_s / period_s).astype(np.int64), max(periods - 1, 0))
    # pages present at each observation: those first touched before its end
    _, first = np.unique(page, return_index=True)
    first_per = np.sort(per[first])
    ends = np.arange(periods)
    present = int(np.searchsorted(first_per, ends, side="right").sum()) if periods else 0
    # the first write to each page in each period after the first observation's clear
    keys = np.unique(per[w] * (1 << 40) + page[w]) if periods else np.array([], dtype=np.int64)
    written = int((keys >> 40 >= 1).sum())
    return {"periods": periods, "present_page_periods": present, "written_page_periods": written,
            "seconds": (present * clear_ns + written * wp_ns) / 1e9}


def _vm_side(reps: list) -> dict:
    """The VM's own counts, mean over the repeats: instructions, misses per node, the share of
    misses node 0 served, the kernel's migrations (vmstat), and the program's own CPU time,
    page faults and involuntary context switches."""
    if any(x.get("vm_insns") is None for x in reps):
        return {}
    m0 = sum(x["vm_misses_node0"] for x in reps) / len(reps)
    m1 = sum(x["vm_misses_node1"] for x in reps) / len(reps)
    vs = [x.get("vmstat") or {} for x in reps]
    # the program's own CPU time and faults (tierkit-run's getrusage of it), mean
    ru = [x.get("program_rusage") for x in reps]
    prog = ({f"vm_program_{k}": round(sum(r[k] for r in ru) / len(ru), 3)
             for k in ("user_s", "sys_s", "minor_faults", "involuntary_switches")} if all(ru) else {})
    return {**prog, "vm_insns": round(sum(x["vm_insns"] for x in reps) / len(reps)), "vm_misses": round(m0 + m1),
            "vm_fast_share": round(m0 / (m0 + m1), 4) if m0 + m1 else None,
            "vm_migrations": round(sum(v.get("pgmigrate_success", 0) for v in vs) / len(vs)),
            "vm_demotions": round(sum(v.get("pgdemote_kswapd", 0) + v.get("pgdemote_direct", 0) for v in vs) / len(vs))}


def compare(names: Sequence[str], policies: Sequence[str], meas: dict, pred: dict) -> dict:
    rows = []
    for n in names:
        if (n, "all-slow") not in meas["runs"]:
            continue  # no reference: its failure is in `failed`
        slow_m = sum(x["wall_s"] for x in meas["runs"][(n, "all-slow")]) / len(meas["runs"][(n, "all-slow")])
        slow_p = pred[(n, "all-slow")]["predicted_s"]
        for p in policies:
            reps = meas["runs"].get((n, p))
            if reps is None:
                continue
            m = sum(x["wall_s"] for x in reps) / len(reps)
            pr = pred[(n, p)]["predicted_s"]
            ms, ps = slow_m / m, slow_p / pr
            rows.append({"workload": n, "policy": p, "measured_s": round(m, 4), "predicted_s": round(pr, 4),
                         "measured_speedup": round(ms, 4), "predicted_speedup": round(ps, 4),
                         "speedup_error": round(ps / ms - 1, 4),
                         "within_goal": abs(ps / ms - 1) <= SPEEDUP_GOAL,
                         "measured_range_s": [min(x["wall_s"] for x in reps), max(x["wall_s"] for x in reps)],
                         "lag_s": round(max(x["lag_s"] for x in reps), 4),
                         "node0_free_bytes": reps[0]["node0_free_bytes"], "node0_usable_bytes": reps[0].get("node0_usable_bytes"),
                         **{k: pred[(n, p)][k] for k in ("memory_s", "compute_s", "fault_s", "soft_dirty_s", "predicted_wp_faults", "time_scale", "migrations", "predicted_misses",
                                                         "predicted_fast_share", "predicted_insns")},
                         **_vm_side(reps)})
    taus = {}
    for n in names:
        rs = [r for r in rows if r["workload"] == n]
        taus[n] = kendall_tau([r["measured_s"] for r in rs], [r["predicted_s"] for r in rs])
    return {"rows": rows, "kendall_tau": taus, "failed": meas.get("failed", []), "future_knowledge": False}


def table(res: dict) -> str:
    lines = ["| workload | policy | measured s | predicted s | measured speedup | predicted speedup | error | within ±15% |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in res["rows"]:
        lines.append(f"| {r['workload']} | {r['policy']} | {r['measured_s']:.3f} | {r['predicted_s']:.3f} | {r['measured_speedup']:.3f} | "
                     f"{r['predicted_speedup']:.3f} | {r['speedup_error']:+.1%} | {'yes' if r['within_goal'] else 'no'} |")
    lines.append("")
    for n, t in res["kendall_tau"].items():
        lines.append(f"- {n}: Kendall's tau {'n/a' if t is None else f'{t:.2f}'} (goal ≥ {TAU_GOAL})")
    for f in res.get("failed", []):
        lines.append(f"- {f['workload']} / {f['policy']}: the VM run failed: {f['error'].strip().splitlines()[-1] if f['error'].strip() else '?'}")
    return "\n".join(lines) + "\n"


def plot(res: dict, img: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["workload"] for r in res["rows"]))
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.9 * rows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, n in zip(axes.flat, names):
        rs = [r for r in res["rows"] if r["workload"] == n]
        x = range(len(rs))
        ax.bar([i - 0.2 for i in x], [r["measured_speedup"] for r in rs], 0.4, label="measured (VM)")
        ax.bar([i + 0.2 for i in x], [r["predicted_speedup"] for r in rs], 0.4, label="predicted (tierkit)")
        ax.set_xticks(list(x))
        ax.set_xticklabels([r["policy"] for r in rs], rotation=40, ha="right", fontsize=8)
        ax.axhline(1.0, color="grey", lw=0.8)
        t = res["kendall_tau"].get(n)
        ax.set_title(f"{n} (tau {'n/a' if t is None else f'{t:.2f}'})", fontsize=10)
        ax.set_ylabel("speedup over all-slow")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    img.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(img, dpi=110)
    plt.close(fig)
    return img


def repredict(measured: Path, out: Optional[Path] = None, work: Optional[Path] = None, img: Optional[Path] = None,
              progress: bool = True) -> dict:
    """The model's side again on the VM runs a validation stored (its `measurements` and
    calibration), without a VM: to judge a model change on the same measurements."""
    try:
        old = json.loads(Path(measured).read_text())
        runs = {(m["workload"], m["policy"]): m["runs"] for m in old["measurements"]}
        cal = old["calibration"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RuntimeError(f"{measured}: not a validate --timing result with its measurements ({type(e).__name__}: {e})") from None
    names = list(dict.fromkeys(n for n, _ in runs))
    pols = list(dict.fromkeys(p for _, p in runs))
    for p in pols:
        if p not in RUNS:
            raise RuntimeError(f"{measured}: unknown policy '{p}'")
    specs = {n: (WORKLOADS[n][0], WORKLOADS[n][1], tuple(old.get("workloads", {}).get(n, WORKLOADS[n][2]))) for n in names if n in WORKLOADS}
    work = work or ROOT / "target" / "validation"
    work.mkdir(parents=True, exist_ok=True)
    programs = {n: program_input(n, work) for n in names if n in PROGRAMS}
    meas = {"calibration": cal, "runs": runs, "failed": old.get("failed", [])}
    res = compare(names, pols, meas, predict(names, pols, specs, meas, work, progress, programs))
    res.update({k: old[k] for k in old if k not in res and k != "elapsed_s"})
    res["repredicted"] = {"date": time.strftime("%Y-%m-%d"), "from": str(measured)}
    if out is not None:
        _say(progress, f"wrote {out} and {v.write_results(res, out, table(res))}")
    if img is not None:
        _say(progress, f"wrote {plot(res, img)}")
    return res


def validate_timing(names: Sequence[str] = (*WORKLOADS, *PROGRAMS), policies: Sequence[str] = POLICIES, out: Optional[Path] = None,
                    work: Optional[Path] = None, img: Optional[Path] = None, fast_free_mib: int = 64, progress: bool = True,
                    tierkit_run: Optional[Path] = None, specs: Optional[dict] = None, repeats: int = 1, cpus: int = 2) -> dict:
    specs = specs or WORKLOADS
    for n in names:
        if n not in specs and n not in PROGRAMS:
            raise ValueError(f"--workloads: unknown workload '{n}' (known: {', '.join([*specs, *PROGRAMS])})")
    for p in policies:
        if p not in RUNS:
            raise ValueError(f"--policies: unknown policy '{p}' (known: {', '.join(RUNS)})")
    pols = list(dict.fromkeys(["all-slow", *policies]))
    tierkit_run = tierkit_run or ROOT / "target" / "release" / "tierkit-run"
    work = work or ROOT / "target" / "validation"
    work.mkdir(parents=True, exist_ok=True)
    t = time.time()
    programs = {n: program_input(n, work) for n in names if n in PROGRAMS}
    meas = measure(names, pols, specs, fast_free_mib, tierkit_run, progress, repeats, programs, cpus)
    pred = predict(names, pols, specs, meas, work, progress, programs)
    res = compare(names, pols, meas, pred)
    res.update({"date": time.strftime("%Y-%m-%d"), "calibration": meas["calibration"],
                # every VM run as measured, so that a model change can be judged on them again
                "measurements": [{"workload": n, "policy": p, "runs": r} for (n, p), r in meas["runs"].items()], "fast_free_mib_target": fast_free_mib, "thp": THP, "vcpus": cpus,
                "repeats": repeats, "workloads": {n: list(specs[n][2]) for n in names if n in specs},
                "programs": {n: {"argv": programs[n]["argv"], "package": programs[n]["package"], "version": programs[n]["version"],
                                 "trace": programs[n]["trace_name"], "fast_free_mib": programs[n]["fast_free_mib"]} for n in programs},
                "goals": {"speedup_within": SPEEDUP_GOAL, "kendall_tau_at_least": TAU_GOAL},
                "elapsed_s": round(time.time() - t, 1)})
    if out is not None:
        _say(progress, f"wrote {out} and {v.write_results(res, out, table(res))}")
    if img is not None:
        _say(progress, f"wrote {plot(res, img)}")
    _say(progress, f"done in {time.time() - t:.0f} s")
    return res
