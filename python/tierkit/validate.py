"""`tierkit validate` (docs/validation.md): tierkit's models of Linux's tiering policies against the real
kernel, on the same programs (docs/validation.md).

For each workload and each kernel policy (`autonuma-tiering`, `damon-tiering`):

1. **Kernel.** The program runs in the testbed VM (docs/real-linux.md) under `tierkit-run
   --policy P`, with node 0 (the fast tier) shrunk by a hugetlb reservation so that its free
   memory is smaller than the program's footprint. Hugetlb pages are on no LRU list, so kswapd
   cannot demote them: the fast node really is that small for the whole run (a file in
   /dev/shm would be demoted itself, and the fast node would grow under the program). Over the
   run: `/proc/vmstat` every `SAMPLE_S` (promotions, demotions, hint faults, migrations) and
   tierkit-run's `--timeseries` (the program's pages per node); at the end tierkit-run's report
   (vmstat deltas, DAMOS statistics, wall time).
2. **Model.** The same program with the same arguments is recorded natively with the Valgrind
   tracer and simulated with tierkit's model of the same policy, on a platform whose fast tier
   holds exactly the free frames node 0 had when the program started (the slow tier is
   unlimited: node 1 had about 950 MiB free), with the parameters tierkit-run set in the kernel
   (for DAMON, the schemes as the kernel held them: `damon_model_args`).
   For autonuma-tiering the model also gets node 0's real watermarks and the other programs'
   pages on it (read in the VM at the program's start: `node0_model_params`): the fast tier
   then holds the free frames plus those pages, which kswapd can demote too; and kswapd's pace
   in the VM (`kswapd_pace`: the fastest rise of pgdemote_kswapd between two vmstat samples), at
   which its freed frames become free in the model.
3. **Clocks.** The VM's time runs at emulation speed. The two are aligned on the program's
   instructions: the VM ran the trace's `instructions` in `wall_s`, so 1 s of VM time is
   `instructions / wall_s` instructions; the model's policy clock is scaled (`--time-scale K`)
   so that its run of those instructions lasts as long as in the VM: `K = wall_s / sim_s`,
   `sim_s` being the simulated time of the same trace under first-touch. The comparison is also
   run at `K / 2` and `2 K` (sensitivity).
4. **Side by side.** Per workload and model: promotions, demotions, hint faults, the fast-node
   residency of the hot data over time (the workload names its arrays and, as it runs, which of
   them it works hardest on: WL_REGIONS, workloads/wl.h; tierkit-run samples those regions'
   pages per node in the VM, the model watches the same arrays in the trace and learns the
   moments from the trace's user markers) and of all the program's pages, model / kernel ratios;
   `validation.json`, a table (`validation.md`) and a plot per workload (PNG).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

ROOT = Path(__file__).resolve().parents[2]
PAGE = 4096
#: vmstat sampling period in the VM, s
SAMPLE_S = 0.5
#: the counters sampled over time
VMSTAT_KEYS = ("pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct", "numa_hint_faults",
               "numa_pte_updates", "pgmigrate_success")
POLICIES = ("autonuma-tiering", "damon-tiering")
#: name -> (class the issue asks for, workload, arguments); all at the medium size (114-137 MiB)
WORKLOADS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "phases": ("moving hot set", "phases", ("--size", "medium", "--work", "0.1")),
    "sites": ("skewed hot set", "sites", ("--size", "medium", "--work", "0.25")),
    "stencil": ("streaming sweep", "stencil", ("--size", "medium", "--work", "0.25")),
    "rwmix": ("write-heavy mix", "rwmix", ("--size", "medium", "--work", "0.1", "--write-ratio", "0.9")),
}


def length_specs(length: float, specs: Optional[dict] = None) -> dict:
    """The workloads with their `--work` multiplied by `length` (longer runs: the kernel's time
    constants, a 1 s scan delay and 1 s scan periods, need runs of several seconds in the VM,
    and how long a run lasts there depends on the host's load: docs/validation.md)."""
    specs = specs or WORKLOADS
    if length == 1:
        return dict(specs)
    out = {}
    for n, (cls, wl, args) in specs.items():
        a = list(args)
        i = a.index("--work") + 1
        a[i] = f"{float(a[i]) * length:g}"
        out[n] = (cls, wl, tuple(a))
    return out


#: the shortest run in the VM the comparison is made on (s): the kernel's time constants (NUMA
#: balancing's 1 s scan delay and 1 s scan periods, kswapd's naps) need several seconds, and
#: how long a run lasts under TCG depends on the host's load (the same `phases` run took 9-14 s
#: on a loaded host and 1.8-4.3 s on an idle one, where the kernel's second run promoted nothing)
MIN_VM_S = 8.0
#: the lengths calibrate() chooses from (factors on each workload's --work)
LENGTH_GRID = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def _vm_factory(names: Sequence[str], specs: dict, tierkit_run: Path, slow_tier: bool = False) -> Callable:
    """A testbed VM (node 0 512 MiB, node 1 1 GiB) with tierkit-run and the workloads' binaries;
    with `slow_tier`, paced by the slow-tier plugin (docs/real-linux.md, "A slow tier that is
    really slower"): the guest's clock, the kernel's time constants and the program's run
    length then all follow the plugin's time model, not the host's speed."""
    from .testbed import FileSet, SlowTier, Testbed, VMConfig

    files = FileSet().add_binary(tierkit_run)
    for n in names:
        files.add_binary(ROOT / "workloads" / "build" / specs[n][1])
    cfg = VMConfig(fast_mib=512, slow_mib=1024, slow_tier=SlowTier() if slow_tier else None)
    return lambda: Testbed(cfg, files, boot_timeout_s=300 if slow_tier else 120)


def calibrate(names: Sequence[str], specs: dict, tierkit_run: Path, min_vm_s: float, progress: bool = True,
              vm_factory: Optional[Callable] = None, run_timeout_s: float = 600) -> dict:
    """Per workload, the smallest length on LENGTH_GRID (from 1 up) whose run lasts at least
    `min_vm_s` in the VM (under first-touch; at most 4 tries each: a run's start-up does not
    grow with its length, so each try aims 15 % over the mark)."""
    factory = vm_factory or _vm_factory(names, specs, tierkit_run)
    lengths = {}
    with factory() as vm:
        for n in names:
            length, wall = 1.0, 0.0
            for _ in range(4):
                _, wl, args = length_specs(length, {n: specs[n]})[n]
                r = vm.run(f"tierkit-run --json --policy first-touch -- {' '.join([wl, *args])} > $OUT/run 2> $OUT/err; echo $? > $OUT/rc",
                           timeout_s=run_timeout_s)
                if r.status != 0 or int(r.files.get("rc", b"-1") or -1) != 0:
                    raise RuntimeError(f"calibrating {n}: the VM run failed: {(r.files.get('err', b'').decode() + r.stderr)[-300:]}")
                wall = json.loads(r.files["run"].decode().strip().splitlines()[-1])["wall_s"]
                if wall >= min_vm_s:
                    break
                want = length * min_vm_s / max(wall, 0.05) * 1.15
                nxt = next((g for g in LENGTH_GRID if g >= want), LENGTH_GRID[-1])
                if nxt <= length:
                    break
                length = float(nxt)
            lengths[n] = length
            _say(progress, f"calibrated {n}: length {length:g} ({wall:.1f} s in the VM, at least {min_vm_s:g} s asked)")
    return lengths


#: what tierkit-run sets in the kernel, and the same spec in the model: one vocabulary for both
#: (tierkit-run reads the simulator's parameter names; docs/real-linux.md, "Kernel policies")
KERNEL_ARGS = {"autonuma-tiering": "autonuma-tiering:hot_threshold_ms=1000,promote_rate_limit_mib_per_s=65536",
               "damon-tiering": "damon-tiering"}
MODEL_ARGS = KERNEL_ARGS
#: (damon-tiering's entry is the fallback: the model is set up from the schemes the kernel held,
#: read back by tierkit-run; on 6.12 without quota goals and without migrate_hot's filter, see
#: damon_model_args)
#: the goals (docs/validation.md)
RATIO_GOAL = 0.30
RESIDENCY_GOAL_POINTS = 10.0
SCALES = (0.5, 1.0, 2.0)
#: kernel runs per (workload, policy): the kernel's counts vary from run to run
REPEATS = 3
#: /proc/zoneinfo's protection array: index of ZONE_MOVABLE (DMA, DMA32, Normal, Movable, Device)
ZONE_MOVABLE_IDX = 3


def _say(progress: bool, msg: str) -> None:
    if progress:
        print(f"validate: {msg}", file=sys.stderr, flush=True)


def write_results(res: dict, out: Path, md: str) -> Path:
    """`res` as JSON at `out` and `md` (its table) beside it, same name with .md; the .md path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    out.with_suffix(".md").write_text(md)
    return out.with_suffix(".md")


def platform_toml(fast_bytes: int) -> str:
    """The testbed VM as a tierkit platform: the HMAT figures testbed.py gives QEMU (node 0
    100 ns, 20000 MB/s; node 1 300 ns, 5000 MB/s), the fast tier as large as node 0's free
    memory at the program's start, the slow tier unlimited."""
    return f'''name = "testbed-vm"
description = "The testbed VM's two NUMA nodes (docs/real-linux.md) with node 0 shrunk to its free memory at the program's start; written by tierkit validate."
source = "python/tierkit/testbed.py VMConfig defaults (HMAT latency and bandwidth of each node)"

[[tiers]]
name = "node0"
capacity = "{fast_bytes // 1024}K"
read_latency_ns = 100.0
write_latency_ns = 100.0
read_bw_gb_per_s = 20.0
write_bw_gb_per_s = 20.0

[[tiers]]
name = "node1"
read_latency_ns = 300.0
write_latency_ns = 300.0
read_bw_gb_per_s = 5.0
write_bw_gb_per_s = 5.0

[migration]
fault_ns = 5000.0
tlb_shootdown_ns = 3000.0
per_page_ns = 0.0
per_period_ns = 0.0
copy_from_bandwidth = true
'''


# ---------------------------------------------------------------------------------------------
# 1. the kernel, in the VM

def _vm_script(i: int, program: str, policy: str, fast_free_mib: int) -> str:
    """Shell for one run: shrink node 0 with hugetlb pages to `fast_free_mib` free, sample
    vmstat in the background, run the program under tierkit-run (which samples the pages per
    node of the regions the program writes to WL_REGIONS), give the pages back."""
    hp = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"
    keys = "|".join(VMSTAT_KEYS)
    return (
        f"echo 0 > {hp}; sync; echo 3 > /proc/sys/vm/drop_caches; "
        f"f=$(awk '/MemFree/{{print $4}}' /sys/devices/system/node/node0/meminfo); "
        f"n=$(( (f - {fast_free_mib * 1024}) / 2048 )); [ $n -gt 0 ] && echo $n > {hp}; "
        f"cat {hp} > $OUT/hugepages{i}; "
        f"grep MemFree /sys/devices/system/node/node*/meminfo > $OUT/meminfo{i}; "
        f"( while :; do echo \"t $(cut -d' ' -f1 /proc/uptime)\"; grep -E '^({keys}) ' /proc/vmstat; sleep {SAMPLE_S}; done ) "
        f"> $OUT/vmstat{i} & s=$!; "
        f"cat /proc/zoneinfo > $OUT/zoneinfo{i}; cat /sys/devices/system/node/node0/meminfo > $OUT/node0meminfo{i}; "
        f"WL_REGIONS=$OUT/regions{i} tierkit-run --json --policy {policy} --interval 500ms --timeseries $OUT/ts{i}.csv "
        f"--regions $OUT/regions{i} --region-series $OUT/rs{i}.csv -- {program} "
        f"> $OUT/run{i} 2> $OUT/err{i}; echo $? > $OUT/rc{i}; "
        f"cat /sys/devices/system/node/node0/meminfo > $OUT/node0meminfo_end{i}; kill $s; wait $s 2>/dev/null; "
        f"echo 0 > {hp}"
    )


TRACEFS = "/sys/kernel/tracing"


def _damon_pace_script(i: int, script: str) -> str:
    """`script` with the `damon:damon_aggregated` tracepoint on around it. The event fires once
    per region at each aggregation of a kdamond, back to back: a burst (events less than 20 ms
    apart) per kdamond is one aggregation; $OUT/aggN gets each kdamond's count."""
    t = TRACEFS
    pre = (f"mountpoint -q {t} || mount -t tracefs nodev {t}; echo 0 > {t}/tracing_on; echo > {t}/trace; "
           f"echo 8192 > {t}/buffer_size_kb; echo 1 > {t}/events/damon/damon_aggregated/enable; echo 1 > {t}/tracing_on; ")
    post = (f"; echo 0 > {t}/tracing_on; echo 0 > {t}/events/damon/damon_aggregated/enable; "
            f"grep -o '^ *kdamond[^ ]* *\\[[0-9]*\\] [^ ]* *[0-9.]*' {t}/trace | "
            f"awk '{{x = $NF + 0; if (x - last[$1] > 0.02) n[$1]++; last[$1] = x}} END {{for (k in n) print k, n[k]}}' > $OUT/agg{i}; "
            f"echo > {t}/trace")
    return pre + script + post


def damon_pace(run: dict) -> Optional[float]:
    """How much slower than DAMON's nominal pace the kernel's kdamonds ran: nominal
    aggregations (VM seconds / aggr interval) over the aggregations counted, mean of the two
    kdamonds; None without a count. Under TCG kdamond's checks run at emulation speed, so its
    5 ms sampling intervals last longer (docs/validation.md, "DAMON tiering")."""
    aggs = [c for c in (run.get("damon_aggregations") or {}).values() if c > 0]
    eff = {s.get("action"): s.get("effective") for s in run.get("damon_tiering") or []}
    hot = eff.get("migrate_hot")
    if not aggs or not hot or not hot.get("aggr_us"):
        return None
    nominal = run["wall_s"] * 1e6 / hot["aggr_us"]
    return max(1.0, nominal / (sum(aggs) / len(aggs)))


def _parse_vmstat_series(text: str) -> list[dict]:
    rows: list[dict] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        if parts[0] == "t":
            rows.append({"t_s": float(parts[1])})
        elif rows:
            rows[-1][parts[0]] = int(parts[1])
    rows = [r for r in rows if len(r) > 1]
    if not rows:
        return []
    t0 = rows[0]
    return [{"t_s": round(r["t_s"] - t0["t_s"], 3), **{k: r.get(k, 0) - t0.get(k, 0) for k in VMSTAT_KEYS}} for r in rows]


def parse_zoneinfo(text: str, node: int = 0) -> list[dict]:
    """The managed zones of `node` in /proc/zoneinfo: name, free pages, min/low/high/promo
    watermarks, managed pages and lowmem protection (pages, one per zone index)."""
    zones: list[dict] = []
    cur: Optional[dict] = None
    for line in text.splitlines():
        w = line.replace(",", " ").replace("(", " ").replace(")", " ").split()
        if not w:
            continue
        if w[0] == "Node" and len(w) >= 4 and w[2] == "zone":
            cur = {"zone": w[3]} if int(w[1]) == node else None
            if cur is not None:
                zones.append(cur)
        elif cur is None:
            continue
        elif w[:2] == ["pages", "free"]:
            cur["free"] = int(w[2])
        elif w[0] in ("min", "low", "high", "promo", "managed") and len(w) == 2:
            cur[w[0]] = int(w[1])
        elif w[0] == "protection:":
            cur["protection"] = [int(x) for x in w[1:]]
    return [z for z in zones if z.get("managed", 0) > 0]


def node0_model_params(zoneinfo: str, node_meminfo: str, two_zones: bool = True) -> dict:
    """What the autonuma-tiering model needs of node 0 at the program's start, read in the VM.

    The kernel checks each watermark per zone (migrate_balanced_pgdat, pgdat_balanced: any zone
    that passes will do) and tierkit's fast tier is one zone. Node 0 has a large DMA32 zone and
    a 16 MiB DMA zone; the allocator takes the DMA zone's pages only down to its low watermark
    plus its protection against movable allocations (487 pages: lowmem_reserve), so those pages
    stay free once the program has filled the node. The model's watermarks are the largest
    zone's plus that floor of the other zones; its fast tier holds the node's free pages plus
    the pages of other programs on the node's LRU lists (the VM's rootfs in tmpfs, the shell,
    tierkit-run), which kswapd demotes as well (they count in pgdemote_kswapd).

    With `two_zones` (the default) and exactly two managed zones, the model gets the small zone
    as its own (`dma_zone_pages`: its free pages at the start; `dma_wmark_*_pages`,
    `dma_protection_pages`) and the largest zone's watermarks as they are: kswapd then stops
    once either zone is balanced, and a promotion needs room in either (pgdat_balanced,
    migrate_balanced_pgdat), as in the kernel. Otherwise the floor above is added instead."""
    zones = parse_zoneinfo(zoneinfo, 0)
    if not zones:
        raise RuntimeError("node 0 has no managed zone in /proc/zoneinfo")
    return zone_model_params(zones, node0_lru_pages(node_meminfo) or 0, two_zones)


def node0_lru_pages(node_meminfo: str) -> Optional[int]:
    """Pages on a node's LRU lists (Active/Inactive anon and file) from its meminfo; None
    without one."""
    kb = {}
    for line in node_meminfo.splitlines():
        # "Node 0 Active(anon):      30100 kB"
        w = line.split()
        if len(w) >= 4 and w[-1] == "kB":
            kb[w[2].rstrip(":")] = int(w[3])
    if not kb:
        return None
    return sum(kb.get(k, 0) for k in ("Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)")) * 1024 // PAGE


def zone_model_params(zones: list, other: int, two_zones: bool = True) -> dict:
    """node0_model_params from node 0's parsed zones and its other programs' pages."""
    main = max(zones, key=lambda z: z["managed"])
    floor = sum(z["low"] + (z.get("protection") or [0] * 5)[ZONE_MOVABLE_IDX] for z in zones if z is not main)
    out = {"zone": main["zone"], "zone_watermarks": {k: main[k] for k in ("min", "low", "high", "promo")},
            "other_zones_floor_pages": floor,
            "wmark_min_pages": main["min"] + floor, "wmark_low_pages": main["low"] + floor,
            "wmark_high_pages": main["high"] + floor, "wmark_promo_pages": main["promo"] + floor,
            "fast_other_pages": other, "free_pages": sum(z["free"] for z in zones), "zones": zones}
    if two_zones and len(zones) == 2:
        small = min(zones, key=lambda z: z["managed"])
        out.update({f"wmark_{k}_pages": main[k] for k in ("min", "low", "high", "promo")})
        out.update({"dma_zone_pages": small["free"], "dma_wmark_low_pages": small["low"], "dma_wmark_high_pages": small["high"],
                    "dma_wmark_promo_pages": small["promo"],
                    "dma_protection_pages": (small.get("protection") or [0] * 5)[ZONE_MOVABLE_IDX]})
    return out


#: the second zone's parameters of the autonuma-tiering model, passed when node0_model_params has them
DMA_KEYS = ("dma_zone_pages", "dma_wmark_low_pages", "dma_wmark_high_pages", "dma_wmark_promo_pages", "dma_protection_pages")


def model_args(policy: str, kp: Optional[dict]) -> str:
    """The model's policy spec: what tierkit-run set in the kernel, plus (autonuma-tiering)
    node 0's watermarks and other programs' pages at the program's start."""
    spec = MODEL_ARGS[policy]
    if policy == "autonuma-tiering" and kp is not None:
        spec += "".join(f",{k}={kp[k]}" for k in ("wmark_min_pages", "wmark_low_pages", "wmark_high_pages", "wmark_promo_pages",
                                                   "fast_other_pages"))
        spec += "".join(f",{k}={kp[k]}" for k in DMA_KEYS if k in kp)
    return spec


def kswapd_pace(reps: Sequence[dict]) -> Optional[float]:
    """kswapd's pace in the VM, pages per VM second, for the autonuma-tiering model's
    `kswapd_pages_per_s`: the fastest rise of `pgdemote_kswapd` between two samples of the
    kernel's vmstat series (0.5 s apart) over the case's repeats. A lower bound of its pace while
    it runs, since it may not run through a whole sample; None where it demoted nothing."""
    best = 0.0
    for x in reps:
        vs = x.get("vmstat_series") or []
        for a, b in zip(vs, vs[1:]):
            dt = b["t_s"] - a["t_s"]
            if dt > 0:
                best = max(best, (b.get("pgdemote_kswapd", 0) - a.get("pgdemote_kswapd", 0)) / dt)
    return best or None


def damon_node0_args(kp: Optional[dict]) -> str:
    """What the damon-tiering model takes of node 0 at a program's start: the first touch's
    floor (the largest zone's low watermark plus what the allocator leaves in the other zones:
    one-zone form, as the page allocator's fast path falls back to node 1 there), the
    promotions' (its min watermark plus the same: DAMOS allocates with GFP_NOWAIT) and the
    other programs' pages, which migrate_cold demotes and counts (docs/validation.md, "The
    fast node's floors in the DAMON model")."""
    if not kp or "zone_watermarks" not in kp:
        return ""
    floor = kp.get("other_zones_floor_pages", 0)
    low, mn = kp["zone_watermarks"]["low"] + floor, kp["zone_watermarks"]["min"] + floor
    return f",wmark_low_pages={low},wmark_min_pages={mn},fast_other_pages={kp['fast_other_pages']}"


def meminfo_free(text: str) -> dict[int, int]:
    """Node -> MemFree bytes, from `grep MemFree /sys/devices/system/node/node*/meminfo`."""
    out = {}
    for line in text.splitlines():
        # "/sys/.../node0/meminfo:Node 0 MemFree:   90480 kB"
        w = line.split()
        if "MemFree:" in w:
            out[int(w[w.index("MemFree:") - 1])] = int(w[-2]) * 1024
    return out


def run_report(r, i: int, what: str) -> tuple[dict, dict[int, int]]:
    """Run `i` of a `_vm_script`-shaped command: tierkit-run's report (its last JSON line) and
    each node's MemFree at the program's start; a run that failed is a RuntimeError naming it."""
    rc = int(r.files.get(f"rc{i}", b"-1") or -1)
    if r.status != 0 or rc != 0:
        err = (r.files.get(f"err{i}", b"").decode() + r.stderr)[-400:]
        raise RuntimeError(f"the VM run of {what} failed (rc {rc}): {err}")
    rep = json.loads(r.files[f"run{i}"].decode().strip().splitlines()[-1])
    return rep, meminfo_free(r.files[f"meminfo{i}"].decode())


def run_kernel(names: Sequence[str], policies: Sequence[str], fast_free_mib: int, tierkit_run: Path,
               progress: bool = True, vm_factory: Optional[Callable] = None, specs: Optional[dict] = None,
               repeats: int = 1, run_timeout_s: float = 300) -> dict:
    """Each (workload, policy) in a VM of its own, `repeats` times one after the other; returns
    per (workload, policy) the first run's report, series and node 0's state at the start, with
    every run (the first included) under `repeats`."""
    specs = specs or WORKLOADS
    runs = [(n, p) for n in names for p in policies for _ in range(repeats)]
    out: dict = {}
    t = time.time()
    factory = vm_factory or _vm_factory(names, specs, tierkit_run)
    # a fresh VM for each (workload, policy): runs in one VM leave the kernel in states the next
    # run inherits (stencil under autonuma-tiering promoted 0 pages in 3 repeats after 12 runs
    # of phases and sites under both policies, and 14,645-15,320 first in a VM or after phases
    # alone); the repeats of one case share their VM
    groups = [(n, p) for n in names for p in policies]
    info: list = []
    i = 0
    for gi, (gn, gp) in enumerate(groups):
        with factory() as vm:
            _say(progress, f"VM {gi + 1}/{len(groups)} up in {vm.boot_s:.0f} s; {repeats} kernel runs of {gn} / {gp}")
            if not info:
                info = vm.run("cat /proc/sys/vm/min_free_kbytes; cat /proc/sys/vm/watermark_scale_factor; uname -r").stdout.split()
            for n, p in [(gn, gp)] * repeats:
                prog = " ".join([specs[n][1], *specs[n][2]])
                t0 = time.time()
                script = _vm_script(i, prog, KERNEL_ARGS[p], fast_free_mib)
                if p == "damon-tiering":
                    script = _damon_pace_script(i, script)
                r = vm.run(script, timeout_s=run_timeout_s)
                rep, free = run_report(r, i, f"{n} under {p}")
                ts_lines = [l.split(",") for l in r.files[f"ts{i}.csv"].decode().splitlines()]
                ts = [dict(zip(ts_lines[0], map(int, x))) for x in ts_lines[1:]]
                one = {
                    "workload": n, "policy": p, "program": prog, "kernel_policy": KERNEL_ARGS[p],
                    "node0_free_bytes": free.get(0), "node1_free_bytes": free.get(1),
                    "hugepages_reserved": int(r.files[f"hugepages{i}"] or 0),
                    "node0_model_params": node0_model_params(r.files[f"zoneinfo{i}"].decode(), r.files[f"node0meminfo{i}"].decode()),
                    # node 0's LRU pages at the program's end, the program's own among them
                    "node0_lru_pages_end": node0_lru_pages(r.files.get(f"node0meminfo_end{i}", b"").decode()),
                    "wall_s": rep["wall_s"], "lag_s": round((r.model or {}).get("lag_ns", 0) / 1e9, 4), "vmstat": rep["vmstat"], "damon_tiering": rep.get("damon_tiering"),
                    "pages": rep.get("pages"), "timeseries": ts, "vmstat_series": _parse_vmstat_series(r.files[f"vmstat{i}"].decode()),
                    "regions": parse_regions(r.files.get(f"regions{i}", b"").decode("utf-8", "replace"), f"regions{i}"),
                    "region_series": parse_region_series(r.files.get(f"rs{i}.csv", b"").decode()),
                    "damon_aggregations": {w[0]: int(w[1]) for w in (l.split() for l in r.files.get(f"agg{i}", b"").decode().splitlines()) if len(w) == 2}
                    if p == "damon-tiering" else None,
                }
                key = f"{n}/{p}"
                if key not in out:
                    out[key] = {**one, "repeats": []}
                out[key]["repeats"].append(one)
                _say(progress, f"[{i + 1}/{len(runs)}] kernel {n} / {p}: {rep['wall_s']:.1f} s in the VM "
                               f"({time.time() - t0:.0f} s), node 0 free {free.get(0, 0) >> 20} MiB")
                i += 1
    _say(progress, f"kernel runs done in {time.time() - t:.0f} s")
    return {"runs": out, "min_free_kbytes": int(info[0]), "watermark_scale_factor": int(info[1]), "kernel": info[2]}


def kernel_counts(run: dict) -> dict:
    """Promotions, demotions and hint faults the kernel made for one run, pages. NUMA
    balancing counts its promotions in pgpromote_success and kswapd's demotions in
    pgdemote_*; DAMOS migrate_hot/migrate_cold count in neither (they migrate with reason
    MR_DAMON), so their own statistics (sz_applied) give DAMON's."""
    v = run["vmstat"]
    if run["policy"] == "damon-tiering" and run.get("damon_tiering"):
        hot, cold = run["damon_tiering"]
        prom, dem = hot["sz_applied"] // PAGE, cold["sz_applied"] // PAGE
    else:
        prom, dem = v.get("pgpromote_success", 0), v.get("pgdemote_kswapd", 0) + v.get("pgdemote_direct", 0)
    return {"promotions": prom, "demotions": dem, "hint_faults": v.get("numa_hint_faults", 0),
            "migrations": v.get("pgmigrate_success", 0)}


def kernel_residency(run: dict) -> list[tuple[float, float]]:
    """(s since start, share of the program's pages on node 0) at each observation."""
    out = []
    for x in run["timeseries"]:
        tot = x["pages_fast"] + x["pages_slow"]
        if tot > 0:
            out.append((x["time_ms"] / 1000.0, x["pages_fast"] / tot))
    return out


def parse_regions(text: str, source: str = "regions") -> dict:
    """A workload's WL_REGIONS file (workloads/wl.h): its arrays as (name, start, end) and its
    hot data over time as (ms since it started, [region names]), the k-th of which is the
    trace's user marker k. A last line without its newline (cut off) is left out; any other
    line that is not ``region NAME HEXSTART BYTES`` or ``hot MS NAME...`` is an error naming
    ``source`` and the line (the file comes from the program, which tierkit does not trust)."""
    from . import untrusted

    regions, hot = [], []
    lines = text.split("\n")
    for n, line in enumerate(lines[:-1], 1):
        w = line.split()
        try:
            if len(w) == 4 and w[0] == "region":
                start, size = int(w[2], 16), int(w[3])
                if not (0 <= start < 1 << 64 and 0 <= size < 1 << 64 and start + size <= 1 << 64):
                    raise ValueError("outside the 64-bit address space")
                regions.append((w[1], start, start + size))
            elif len(w) >= 3 and w[0] == "hot":
                ms = float(w[1])
                if not (math.isfinite(ms) and ms >= 0):
                    raise ValueError(f"time {w[1]} is not a finite number of ms >= 0")
                hot.append((ms, w[2:]))
            elif w:
                raise ValueError("not 'region NAME HEXSTART BYTES' or 'hot MS NAME...'")
        except ValueError as e:
            raise untrusted.fail(source, f"line {n}", str(e)) from None
    return {"regions": regions, "hot": hot}


def read_regions(path: Union[str, Path]) -> dict:
    """A regions file (:func:`parse_regions`), read as untrusted: a regular file of at most
    ``untrusted.MAX_REGIONS_BYTES``, UTF-8."""
    from . import untrusted

    data = untrusted.read_bytes(path, "regions file", untrusted.MAX_REGIONS_BYTES)
    return parse_regions(untrusted.text(data, path), str(path))


def parse_region_series(text: str) -> list[tuple[float, str, int, int]]:
    """tierkit-run's --region-series CSV: (time_ms, region, pages_fast, pages_slow) rows."""
    rows = []
    for line in text.splitlines()[1:]:
        w = line.split(",")
        if len(w) == 4:
            rows.append((float(w[0]), w[1], int(w[2]), int(w[3])))
    return rows


def hot_residency(samples: Sequence[tuple[float, str, int, int]], hot: Sequence[tuple[float, Sequence[str]]],
                  scale_s: float = 1e-3) -> list[tuple[float, float]]:
    """(s, share of the hot data's pages on the fast tier) at each sample time from the first
    "hot" mark on: the hot data at a sample is the regions the program named at its latest
    mark before it (`hot`: (time, names) in the samples' unit, in order); a sample's share is
    the pages of those regions on the fast tier over their pages on either tier (pages not
    touched yet count in neither). `samples`: (time, region, pages_fast, pages_slow); times are
    multiplied by `scale_s` into seconds."""
    by_t: dict[float, dict[str, tuple[int, int]]] = {}
    for t, name, f, sl in samples:
        by_t.setdefault(t, {})[name] = (f, sl)
    out = []
    marks = sorted(hot, key=lambda h: h[0])
    for t in sorted(by_t):
        cur = [names for mt, names in marks if mt <= t]
        if not cur:
            continue
        f = sum(by_t[t].get(n, (0, 0))[0] for n in cur[-1])
        tot = f + sum(by_t[t].get(n, (0, 0))[1] for n in cur[-1])
        if tot > 0:
            out.append((t * scale_s, f / tot))
    return out


def kernel_hot_residency(run: dict) -> list[tuple[float, float]]:
    """The kernel's hot-data residency over the run (`hot_residency` of tierkit-run's region
    series and the marks the program wrote)."""
    regs = run.get("regions") or {}
    return hot_residency(run.get("region_series") or [], regs.get("hot") or [])


def model_hot_residency(r: dict, hot: Sequence[tuple[float, Sequence[str]]], time_scale: float) -> list[tuple[float, float]]:
    """The model's hot-data residency (VM-equivalent s): the watched regions' pages per tier
    (`r["watch"]`), the hot data named by the traced run's k-th mark from the trace's user
    marker k on (the simulated time it came)."""
    w = r.get("watch")
    if not w:
        return []
    names = w["regions"]
    samples = [(t, names[i], f, sl) for t, i, _, f, sl in w["rows"]]
    marks = [(t, hot[k - 1][1]) for k, t in w["marks"] if 1 <= k <= len(hot)]
    return hot_residency(samples, marks, 1e-3 * time_scale)


def _mean_from(series: list[tuple[float, float]], upto_s: float) -> Optional[float]:
    """Time-weighted mean of a step series from its first point to `upto_s`."""
    if not series:
        return None
    t0 = series[0][0]
    shifted = [(t - t0, v) for t, v in series]
    return _mean_residency(shifted, max(upto_s - t0, 0.0)) if upto_s > t0 else series[-1][1]


# ---------------------------------------------------------------------------------------------
# 2. the model

def record_traces(names: Sequence[str], work: Path, progress: bool = True, specs: Optional[dict] = None) -> dict:
    """Record each workload natively (kept in `work` and reused when its arguments match)."""
    from . import api

    specs = specs or WORKLOADS
    out = {}
    for n in names:
        wl, args = specs[n][1], specs[n][2]
        # one cached trace per workload and length
        stem = n if list(args) == list(WORKLOADS.get(n, ("", "", args))[2]) else f"{n}-work{args[args.index('--work') + 1]}"
        tkt, meta = work / f"{stem}.tkt", work / f"{stem}.record.json"
        if tkt.is_file() and meta.is_file():
            old = json.loads(meta.read_text())
            # (traces recorded before the workloads wrote their regions are recorded again)
            if old.get("args") == list(args) and old.get("regions", {}).get("hot"):
                out[n] = old
                continue
        t = time.time()
        # the program writes its arrays and hot data to WL_REGIONS (workloads/wl.h)
        regions_file = work / f"{stem}.regions"
        regions_file.unlink(missing_ok=True)
        before = os.environ.get("WL_REGIONS")
        os.environ["WL_REGIONS"] = str(regions_file)
        try:
            r = api.record(ROOT / "workloads" / "build" / wl, list(args), tkt, cache="default", force=True)
        finally:
            if before is None:
                del os.environ["WL_REGIONS"]
            else:
                os.environ["WL_REGIONS"] = before
        if r["status"] != 0:
            raise RuntimeError(f"recording {n} failed: status {r['status']}")
        rec = {"args": list(args), "instructions": r["instructions"], "raw_loads": r["raw_loads"],
               "raw_stores": r["raw_stores"], "path": str(tkt),
               "regions": read_regions(regions_file) if regions_file.is_file() else parse_regions("")}
        meta.write_text(json.dumps(rec))
        out[n] = rec
        _say(progress, f"recorded {n}: {r['instructions'] / 1e6:.0f} M instructions in {time.time() - t:.0f} s")
    return out


def simulate(trace: Path, platform: Path, policy: str, time_scale: float, regions: Optional[dict] = None) -> dict:
    """One model run; with the traced run's `regions` (parse_regions), its arrays watched at
    the VM's observation interval (SAMPLE_S of VM time: SAMPLE_S / time_scale simulated)."""
    from . import api

    watch = (regions or {}).get("regions") or None
    return api.run(trace, str(platform), policy, None, None, "simple", progress=False, time_scale=time_scale,
                   watch=watch, watch_every_ns=SAMPLE_S * 1e9 / time_scale if watch else None)


def damon_model_args(run: dict, pace: float = 1.0) -> str:
    """The `damon-tiering` model set up as the kernel held the two schemes during the run
    (tierkit-run reads them back from sysfs once the kdamonds are on: `damon_tiering[i]
    .effective`), not as mtier.c means them: a goal the kernel refused is no goal (the size
    quota alone), a filter it did not take is no filter. Without the read-back (an older
    tierkit-run) the model's own defaults. `pace` > 1 stretches the sampling and aggregation
    intervals by it (kdamond ran that much slower than its nominal intervals; the quota window
    stays in real time, as the kernel's jiffies-based one)."""
    st = run.get("damon_tiering") or []
    eff = {s.get("action"): s.get("effective") for s in st}
    hot, cold = eff.get("migrate_hot"), eff.get("migrate_cold")
    if not hot or not cold:
        return MODEL_ARGS["damon-tiering"]
    goal = lambda e, metric: next((v for m, v in e["goals"] if m == metric), 0)
    # a filter with no `allow` file (before 6.14) rejects what matches
    young = lambda e, allow: any(t == "young" and m and bool(a) == allow for t, m, a in e["filters"])
    apply_us = hot.get("apply_interval_us") or 0
    args = {
        "sample": f"{round(hot['sample_us'] * pace)}us", "aggr": f"{round(hot['aggr_us'] * pace)}us",
        "min_nr_regions": hot["min_nr_regions"], "max_nr_regions": hot["max_nr_regions"],
        "hot_min_accesses": hot["min_nr_accesses"], "cold_min_age": cold["min_age"],
        "hot_quota": hot["quota_bytes"], "cold_quota": cold["quota_bytes"], "quota_reset": f"{hot['quota_reset_interval_ms']}ms",
        "weight_nr_accesses": hot["weight_nr_accesses_permil"], "weight_age": hot["weight_age_permil"],
        "hot_goal_used_bp": goal(hot, "node_mem_used_bp"), "cold_goal_free_bp": goal(cold, "node_mem_free_bp"),
        # migrate_cold rejects young pages; migrate_hot allows only young ones where the kernel
        # has allow filters (6.14+), else it has none
        "young_filter": "true" if young(cold, False) else "false",
        "hot_young_filter": "true" if young(hot, True) else "false",
        # the apply interval as a count of aggregation intervals (0 us: every aggregation)
        "apply_aggrs": max(1, round(apply_us / hot["aggr_us"])) if hot["aggr_us"] else 1,
    }
    return "damon-tiering:" + ",".join(f"{k}={v}" for k, v in args.items())


def model_counts(r: dict, policy: str) -> dict:
    pol = r["stats"]["policy"]
    c = pol.get("counters") or {}
    if policy == "autonuma-tiering":
        return {"promotions": c.get("promoted", 0), "demotions": c.get("demoted", 0), "hint_faults": c.get("hint_faults", 0),
                "migrations": r.get("migrations", 0)}
    sch = pol.get("schemes") or {}
    prom = (sch.get("promote") or {}).get("stats", {}).get("moved_pages", 0)
    dem = (sch.get("demote") or {}).get("stats", {}).get("moved_pages", 0)
    return {"promotions": prom, "demotions": dem, "hint_faults": 0, "migrations": r.get("migrations", 0)}


def api_timeseries(r: dict):
    from . import api

    return api.timeseries(r)


def model_residency(r: dict, policy: str, fast_pages: int, time_scale: float) -> list[tuple[float, float]]:
    """(VM-equivalent s, share of the program's pages on the fast tier) per window of the
    model's time series; simulated time is multiplied by the time scale (the clock alignment)."""
    ts = api_timeseries(r)
    pages = max(1, int(r.get("pages") or 1))
    if ts is None:
        return []
    out = []
    for _, row in ts.iterrows():
        used = row["fast_used_pages"] if "fast_used_pages" in ts.columns else fast_pages - row["fast_free_pages"]
        out.append((float(row["time_ms"]) / 1000.0 * time_scale, min(1.0, max(0.0, float(used) / pages))))
    return out


# ---------------------------------------------------------------------------------------------
# 3. side by side

def _ratio(m: float, k: float) -> Optional[float]:
    if k == 0:
        return None if m == 0 else math.inf
    return m / k


def _mean_residency(series: list[tuple[float, float]], upto_s: float) -> Optional[float]:
    """Time-weighted mean of a residency series over [0, upto_s] (step function)."""
    pts = [(t, s) for t, s in series if t <= upto_s]
    if not pts:
        return None
    acc, last_t, last_s = 0.0, 0.0, pts[0][1]
    for t, s in pts:
        acc += (t - last_t) * last_s
        last_t, last_s = t, s
    acc += (upto_s - last_t) * last_s
    return acc / upto_s if upto_s > 0 else last_s


def compare(kern: dict, traces: dict, work: Path, progress: bool = True, scales: Sequence[float] = SCALES,
            specs: Optional[dict] = None) -> dict:
    specs = specs or WORKLOADS
    results = []
    cal = {}
    for key, run in kern["runs"].items():
        n, p = run["workload"], run["policy"]
        reps = run.get("repeats") or [run]
        fast_bytes = run["node0_free_bytes"]
        kp = run.get("node0_model_params") if p == "autonuma-tiering" else None
        # the model's fast tier: node 0's free frames, plus (autonuma-tiering) the other
        # programs' pages there, which the model holds as fast_other_pages
        model_fast_bytes = fast_bytes + (kp["fast_other_pages"] * PAGE if kp else 0)
        plat = work / f"platform-{n}-{p}.toml"
        plat.write_text(platform_toml(model_fast_bytes))
        # damon-tiering: one model per kernel repeat, on that repeat's node 0 (its free frames,
        # floor and other programs' pages: a fresh VM's first run has the rootfs on node 0, the
        # later ones find it demoted), and the model's counts are their mean, as the kernel's
        dkps = [x.get("node0_model_params") for x in reps] if p == "damon-tiering" else []
        per_repeat = []
        if dkps and all(dkps):
            for i, (x, kx) in enumerate(zip(reps, dkps)):
                pb = x["node0_free_bytes"] + kx["fast_other_pages"] * PAGE
                pl = work / f"platform-{n}-{p}-repeat{i}.toml"
                pl.write_text(platform_toml(pb))
                per_repeat.append((pl, pb))
        trace = Path(traces[n]["path"])
        if (n, fast_bytes) not in cal:
            # the clock's reference: first touch on node 0's free frames at the start
            ftp = work / f"platform-{n}-first-touch.toml"
            ftp.write_text(platform_toml(fast_bytes))
            ft = simulate(trace, ftp, "first-touch", 1.0)
            cal[(n, fast_bytes)] = ft["runtime_ns"] / 1e9
        sim_s = cal[(n, fast_bytes)]
        # the kernel side over its repeats: counts as mean and range, the clock on the mean wall time
        wall_s = sum(x["wall_s"] for x in reps) / len(reps)
        k = wall_s / sim_s
        per = [kernel_counts(x) for x in reps]
        kc = {c: sum(x[c] for x in per) / len(per) for c in per[0]}
        pace = damon_pace(run) if p == "damon-tiering" else None
        spec = damon_model_args(run, pace or 1.0) if p == "damon-tiering" else model_args(p, kp)
        # autonuma-tiering: kswapd frees frames at the pace it kept in the VM
        kpace = kswapd_pace(reps) if p == "autonuma-tiering" else None
        if kpace:
            spec += f",kswapd_pages_per_s={kpace:.0f}"
        # (spec, platform, fast bytes) of each model run whose counts are averaged
        models = ([(spec + damon_node0_args(kx), pl, pb) for (pl, pb), kx in zip(per_repeat, dkps)]
                  if per_repeat else [(spec, plat, model_fast_bytes)])
        kres = kernel_residency(run)
        res_means = [m for m in (_mean_residency(kernel_residency(x), x["wall_s"]) for x in reps) if m is not None]
        # the hot data's residency, from the program's first "hot" mark to its end
        trace_regions = traces[n].get("regions") or {}
        khot = kernel_hot_residency(run)
        hot_means = [m for m in (_mean_from(kernel_hot_residency(x), x["wall_s"]) for x in reps) if m is not None]
        row = {"workload": n, "class": specs[n][0], "policy": p, "program": run["program"],
               "kernel": {**kc, "wall_s": wall_s, "node0_free_bytes": fast_bytes, "repeats": len(reps),
                          "runs": [{**c, "wall_s": x["wall_s"], "lag_s": x.get("lag_s", 0.0), "node0_free_bytes": x["node0_free_bytes"],
                                    # node 0's LRU pages before and after the program, and the
                                    # program's own pages there at its last observation
                                    "node0_lru_pages_start": (x.get("node0_model_params") or {}).get("fast_other_pages"),
                                    "node0_lru_pages_end": x.get("node0_lru_pages_end"),
                                    "program_fast_pages_end": x["timeseries"][-1]["pages_fast"] if x.get("timeseries") else None,
                                    "residency_mean": _mean_residency(kernel_residency(x), x["wall_s"]),
                                    "hot_residency_mean": _mean_from(kernel_hot_residency(x), x["wall_s"])} for c, x in zip(per, reps)],
                          "range": {c: [min(x[c] for x in per), max(x[c] for x in per)] for c in per[0]},
                          "residency_mean": sum(res_means) / len(res_means) if res_means else None,
                          "residency_end": kres[-1][1] if kres else None, "residency_series": kres,
                          "hot_residency_mean": sum(hot_means) / len(hot_means) if hot_means else None,
                          "hot_residency_series": khot, "hot_regions": (run.get("regions") or {}).get("hot"),
                          "vmstat_series": run["vmstat_series"]},
               "clock": {"trace_instructions": traces[n]["instructions"], "vm_instructions_per_s": traces[n]["instructions"] / wall_s,
                         "first_touch_sim_s": sim_s, "time_scale": k, "kswapd_pages_per_s": kpace},
               "model_params": {"spec": models[0][0], "fast_capacity_bytes": models[0][2], "node0": kp,
                                "per_repeat": [{"spec": sp, "fast_capacity_bytes": pb} for sp, _, pb in models] if per_repeat else None},
               "model_policy": models[0][0], "model": {}}
        if p == "damon-tiering":
            row["kernel"]["damon_schemes"] = run.get("damon_tiering")
            row["kernel"]["damon_aggregations"] = run.get("damon_aggregations")
            row["clock"]["damon_pace"] = pace
            if pace:
                # the same model at DAMON's nominal pace, for comparison
                # (on the first repeat's node 0)
                nominal = damon_model_args(run) + (damon_node0_args(dkps[0]) if per_repeat else "")
                r0 = simulate(trace, models[0][1], nominal, k)
                mc0 = model_counts(r0, p)
                res0 = model_residency(r0, p, models[0][2] // PAGE, k)
                row["model_nominal_pace"] = {**mc0, "model_policy": nominal,
                                             "promotions_ratio": _ratio(mc0["promotions"], kc["promotions"]),
                                             "demotions_ratio": _ratio(mc0["demotions"], kc["demotions"]),
                                             "residency_mean": _mean_residency(res0, r0["runtime_ns"] / 1e9 * k)}
        for f in scales:
            t = time.time()
            runs_m = [simulate(trace, pl, sp, k * f, trace_regions) for sp, pl, _ in models]
            mcs = [model_counts(x, p) for x in runs_m]
            mc = {c: round(sum(x[c] for x in mcs) / len(mcs)) for c in mcs[0]}
            means = [_mean_residency(model_residency(x, p, pb // PAGE, k * f), x["runtime_ns"] / 1e9 * k * f)
                     for x, (_, _, pb) in zip(runs_m, models)]
            r = runs_m[0]
            mres = model_residency(r, p, models[0][2] // PAGE, k * f)
            mhots = [model_hot_residency(x, trace_regions.get("hot") or [], k * f) for x in runs_m]
            hmeans = [_mean_from(h, x["runtime_ns"] / 1e9 * k * f) for h, x in zip(mhots, runs_m)]
            m = {**mc, "time_scale": k * f, "sim_s": r["runtime_ns"] / 1e9, "vm_equivalent_s": r["runtime_ns"] / 1e9 * k * f,
                 "residency_mean": (sum(v for v in means if v is not None) / len(means)) if None not in means else None, "residency_end": mres[-1][1] if mres else None,
                 "per_repeat": [{**c, "residency_mean": rm} for c, rm in zip(mcs, means)] if len(models) > 1 else None,
                 "residency_series": mres, "warnings": list(r.get("warnings") or []),
                 "hot_residency_mean": (sum(v for v in hmeans if v is not None) / len(hmeans)) if hmeans and None not in hmeans else None,
                 "hot_residency_series": mhots[0],
                 # what the model ran with and did beyond the counts (autonuma-tiering)
                 "watermarks": r["stats"]["policy"].get("watermarks"),
                 "kswapd": {c: (r["stats"]["policy"].get("counters") or {}).get(c) for c in ("kswapd_runs", "kswapd_wakeups_busy", "kswapd_rechecks", "demoted_other", "promote_no_room", "candidates", "over_threshold",
                                                                                             "kswapd_small_zone_stops", "promoted_small_zone")},
                 "small_zone": r["stats"]["policy"].get("small_zone"),
                 "promotions_ratio": _ratio(mc["promotions"], kc["promotions"]),
                 "demotions_ratio": _ratio(mc["demotions"], kc["demotions"]),
                 "hint_faults_ratio": _ratio(mc["hint_faults"], kc["hint_faults"]) if p == "autonuma-tiering" else None}
            for key in ("residency", "hot_residency"):
                km, mm = row["kernel"][f"{key}_mean"], m[f"{key}_mean"]
                m[f"{key}_diff_points"] = 100.0 * (mm - km) if km is not None and mm is not None else None
            m["within_goals"] = _within(m)
            row["model"][f"x{f:g}"] = m
            _say(progress, f"model {n} / {p} at {f:g}x (K={k * f:.3g}): promotions {mc['promotions']} (kernel {kc['promotions']}), "
                           f"demotions {mc['demotions']} (kernel {kc['demotions']}) [{time.time() - t:.0f} s]")
        main = row["model"]["x1"]
        row.update({"promotions_ratio": main["promotions_ratio"], "demotions_ratio": main["demotions_ratio"]})
        results.append(row)
    return {"results": results}


def _within(m: dict) -> bool:
    def ok(x):
        return x is not None and abs(x - 1.0) <= RATIO_GOAL

    # the goal is on the hot data; a run without regions falls back on all the program's pages
    d = m.get("hot_residency_diff_points")
    if d is None:
        d = m["residency_diff_points"]
    return bool(ok(m["promotions_ratio"]) and ok(m["demotions_ratio"]) and d is not None
                and abs(d) <= RESIDENCY_GOAL_POINTS)


def _fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.2f}"


def _kcount(k: dict, c: str) -> str:
    """A kernel count: its mean over the repeats, with the range when there were several."""
    rg = (k.get("range") or {}).get(c)
    if k.get("repeats", 1) > 1 and rg is not None:
        return f"{k[c]:.0f} ({rg[0]:.0f}-{rg[1]:.0f})"
    return f"{k[c]:.0f}"


def table(res: dict) -> str:
    head = ("| workload | policy | kernel prom / dem / hint (mean (min-max) of the repeats) | model prom / dem / hint (1x) | prom ratio 0.5x / 1x / 2x "
            "| dem ratio 0.5x / 1x / 2x | hot data on node 0, kernel / model (mean, %) | all pages on node 0, kernel / model (mean, %) | within goals |")
    lines = [head, "|" + " --- |" * 9]
    for r in res["results"]:
        k, m = r["kernel"], r["model"]
        m1 = m["x1"]
        pr = " / ".join(_fmt_ratio(m[s]["promotions_ratio"]) for s in ("x0.5", "x1", "x2") if s in m)
        dr = " / ".join(_fmt_ratio(m[s]["demotions_ratio"]) for s in ("x0.5", "x1", "x2") if s in m)
        hint_k = k["hint_faults"] if r["policy"] == "autonuma-tiering" else "-"
        hint_m = m1["hint_faults"] if r["policy"] == "autonuma-tiering" else "-"
        kr = f"{100 * k['residency_mean']:.0f}" if k["residency_mean"] is not None else "-"
        mr = f"{100 * m1['residency_mean']:.0f}" if m1["residency_mean"] is not None else "-"
        pct = lambda x: f"{100 * x:.0f}" if x is not None else "-"
        hot = f"{pct(k.get('hot_residency_mean'))} / {pct(m1.get('hot_residency_mean'))}"
        lines.append(f"| {r['workload']} | {r['policy']} | {_kcount(k, 'promotions')} / {_kcount(k, 'demotions')} / {_kcount(k, 'hint_faults') if hint_k != '-' else '-'} "
                     f"| {m1['promotions']} / {m1['demotions']} / {hint_m} | {pr} | {dr} | {hot} | {kr} / {mr} | {'yes' if m1['within_goals'] else 'no'} |")
    return "\n".join(lines) + "\n"


def side_by_side(a: dict, b: dict, names: Sequence[str] = ("A", "B")) -> str:
    """Two kernel validations of the same rows (two runs of `tierkit validate`) side by side:
    per (workload, policy) each run's wall time, the kernel's promotions and demotions (mean
    and range of its repeats), whether the second run's mean falls in the first's range and the
    first's in the second's ("within the kernel's own spread"), and each run's verdict."""
    rows_b = {(r["workload"], r["policy"]): r for r in b["results"]}
    na, nb = names
    lines = [f"| workload | policy | wall s {na} / {nb} | promotions {na} | promotions {nb} | demotions {na} | demotions {nb} "
             f"| within each other's spread | goals {na} / {nb} | host lag s {na} / {nb} |", "|" + " --- |" * 10]

    def spread(k: dict, c: str) -> tuple[float, float]:
        rg = (k.get("range") or {}).get(c) or [k[c], k[c]]
        return float(rg[0]), float(rg[1])

    def lag(k: dict) -> float:
        return max((x.get("lag_s") or 0.0 for x in k.get("runs", [])), default=0.0)

    for ra in a["results"]:
        rb = rows_b.get((ra["workload"], ra["policy"]))
        if rb is None:
            continue
        ka, kb = ra["kernel"], rb["kernel"]
        inside = []
        for c in ("promotions", "demotions"):
            (la, ha), (lb, hb) = spread(ka, c), spread(kb, c)
            inside.append(la <= kb[c] <= ha or lb <= ka[c] <= hb)
        lines.append(f"| {ra['workload']} | {ra['policy']} | {ka['wall_s']:.1f} / {kb['wall_s']:.1f} | {_kcount(ka, 'promotions')} | "
                     f"{_kcount(kb, 'promotions')} | {_kcount(ka, 'demotions')} | {_kcount(kb, 'demotions')} | "
                     f"{'yes' if all(inside) else 'no'} | {'yes' if ra['model']['x1']['within_goals'] else 'no'} / "
                     f"{'yes' if rb['model']['x1']['within_goals'] else 'no'} | {lag(ka):.2f} / {lag(kb):.2f} |")
    return "\n".join(lines) + "\n"


def plot(res: dict, img_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    by_wl: dict[str, list[dict]] = {}
    for r in res["results"]:
        by_wl.setdefault(r["workload"], []).append(r)
    for n, rows in by_wl.items():
        fig, axes = plt.subplots(2, len(rows), figsize=(5.5 * len(rows), 6.5), squeeze=False)
        for j, r in enumerate(rows):
            ax = axes[0][j]
            hot = bool(r["kernel"].get("hot_residency_series"))
            key = "hot_residency_series" if hot else "residency_series"
            ks = r["kernel"][key]
            ax.plot([t for t, _ in ks], [100 * s for _, s in ks], "k-o", ms=3, label="kernel (VM, first run)")
            if hot:
                ka = r["kernel"]["residency_series"]
                ax.plot([t for t, _ in ka], [100 * s for _, s in ka], color="0.6", lw=1, label="kernel, all the program's pages")
            for s, style in (("x1", "C0-"), ("x0.5", "C1:"), ("x2", "C2--")):
                if s in r["model"]:
                    ser = r["model"][s].get(key) or []
                    ax.plot([t for t, _ in ser], [100 * v for _, v in ser], style, label=f"model, K {s[1:]}×")
            names = sorted({x for _, ns in (r["kernel"].get("hot_regions") or []) for x in ns})
            ax.set_title(f"{n} / {r['policy']}: " + (f"hot data ({', '.join(names)}) on node 0" if hot else "fast-node residency"), fontsize=9)
            ax.set_xlabel("VM time (s)")
            ax.set_ylabel(("hot data's" if hot else "program's") + " pages on node 0 (%)")
            ax.set_ylim(0, 105)
            ax.legend(fontsize=7)
            ax = axes[1][j]
            vs = r["kernel"]["vmstat_series"]
            if r["policy"] == "autonuma-tiering":
                ax.plot([x["t_s"] for x in vs], [x["pgpromote_success"] for x in vs], "k-", label="kernel promotions")
                ax.plot([x["t_s"] for x in vs], [x["pgdemote_kswapd"] + x["pgdemote_direct"] for x in vs], "k--", label="kernel demotions")
            else:
                ax.plot([x["t_s"] for x in vs], [x["pgmigrate_success"] for x in vs], "k-", label="kernel migrations (both ways)")
            m = r["model"]["x1"]
            ax.axhline(m["promotions"], color="C0", ls="-", lw=1, label=f"model promotions (total, 1×) {m['promotions']}")
            ax.axhline(m["demotions"], color="C0", ls="--", lw=1, label=f"model demotions (total, 1×) {m['demotions']}")
            ax.set_xlabel("VM time (s)")
            ax.set_ylabel("pages (cumulative)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        p = img_dir / f"validation-{n}.png"
        fig.savefig(p, dpi=90)
        plt.close(fig)
        paths.append(p)
    return paths


def _slow_tier_dict() -> dict:
    from .testbed import SlowTier

    st = SlowTier()
    return {k: getattr(st, k) for k in st.__dataclass_fields__}


def validate(names: Sequence[str] = tuple(WORKLOADS), policies: Sequence[str] = POLICIES, out: Optional[Path] = None,
             work: Optional[Path] = None, img_dir: Optional[Path] = None, fast_free_mib: int = 64, progress: bool = True,
             scales: Sequence[float] = SCALES, tierkit_run: Optional[Path] = None, specs: Optional[dict] = None,
             repeats: int = REPEATS, length: Optional[float] = None, min_vm_s: float = MIN_VM_S,
             slow_tier: bool = False) -> dict:
    """The whole validation; returns the results and writes `out` (JSON), its table
    (`out` with `.md`) and the plots. Each workload runs at `length` (a factor on its --work),
    or, without one, at the length calibrate() finds for runs of at least `min_vm_s` in the VM
    (0: length 1). With `slow_tier` the VMs are paced by the slow-tier plugin (its time model,
    not the host's speed, sets the guest's clock: docs/validation.md, "Reproducible under the
    slow tier")."""
    specs = specs or WORKLOADS
    for n in names:
        if n not in specs:
            raise ValueError(f"--workloads: unknown workload '{n}' (known: {', '.join(specs)})")
    for p in policies:
        if p not in POLICIES:
            raise ValueError(f"--policies: unknown policy '{p}' (known: {', '.join(POLICIES)})")
    tierkit_run = tierkit_run or ROOT / "target" / "release" / "tierkit-run"
    work = work or ROOT / "target" / "validation"
    work.mkdir(parents=True, exist_ok=True)
    t = time.time()
    factory = _vm_factory(names, specs, tierkit_run, slow_tier)
    # a paced guest runs about 40 times slower than a real machine: longer timeouts
    tmo = 1800.0 if slow_tier else None
    if length is not None:
        lengths = {n: float(length) for n in names}
    elif min_vm_s > 0:
        lengths = calibrate(names, specs, tierkit_run, min_vm_s, progress, factory, tmo or 600)
    else:
        lengths = {n: 1.0 for n in names}
    specs = {**specs, **{n: length_specs(lengths[n], {n: specs[n]})[n] for n in names}}
    traces = record_traces(names, work, progress, specs)
    if repeats < 1:
        raise ValueError(f"--repeats: {repeats} must be at least 1")
    kern = run_kernel(names, policies, fast_free_mib, tierkit_run, progress, factory, specs=specs, repeats=repeats,
                      run_timeout_s=tmo or 300)
    res = compare(kern, traces, work, progress, scales, specs)
    res.update({"date": time.strftime("%Y-%m-%d"), "kernel": kern["kernel"], "min_free_kbytes": kern["min_free_kbytes"],
                "watermark_scale_factor": kern["watermark_scale_factor"], "fast_free_mib_target": fast_free_mib, "repeats": repeats,
                "lengths": lengths, "min_vm_s": min_vm_s if length is None else None,
                "vm": "testbed (QEMU TCG), node 0 512 MiB (shrunk by hugetlb pages), node 1 1 GiB"
                      + (", paced by the slow-tier plugin" if slow_tier else ""),
                "slow_tier": _slow_tier_dict() if slow_tier else None,
                "goals": {"ratio_within": RATIO_GOAL, "residency_points_within": RESIDENCY_GOAL_POINTS},
                "elapsed_s": round(time.time() - t, 1)})
    if out is not None:
        _say(progress, f"wrote {out} and {write_results(res, out, table(res))}")
    if img_dir is not None:
        for img in plot(res, img_dir):
            _say(progress, f"wrote {img}")
    _say(progress, f"done in {time.time() - t:.0f} s")
    return res
