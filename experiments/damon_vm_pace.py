"""How often the kernel's DAMON tiering schemes really run in the testbed VM
(docs/validation.md, "DAMON tiering"): each workload of `tierkit validate` under `tierkit-run
--policy damon-tiering`, set up as validate does (node 0 shrunk to 64 MiB free), with the
`damon:damon_aggregated` tracepoint on. The tracepoint fires once per region at every
aggregation of a kdamond, so bursts of events per kdamond (one event per region, back to back) are its aggregations; the
schemes apply at every 10th (mtier.c's 1 s apply interval at 100 ms aggregations). Prints, per
workload, the VM seconds, each kdamond's aggregations, and the applications they imply per VM
second (1 where kdamond keeps DAMON's pace). About a minute.

    TIERKIT_TESTBED_BUILD=... python experiments/damon_vm_pace.py [WORKLOAD,...]
"""
import json
import sys

from tierkit import validate as v
from tierkit.testbed import FileSet, Testbed, VMConfig

T = "/sys/kernel/tracing"


def main() -> int:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(v.WORKLOADS)
    files = FileSet().add_binary(v.ROOT / "target" / "release" / "tierkit-run")
    for n in names:
        files.add_binary(v.ROOT / "workloads" / "build" / v.WORKLOADS[n][1])
    with Testbed(VMConfig(fast_mib=512, slow_mib=1024), files) as vm:
        for i, n in enumerate(names):
            prog = " ".join([v.WORKLOADS[n][1], *v.WORKLOADS[n][2]])
            pre = (f"mountpoint -q {T} || mount -t tracefs nodev {T}; echo 0 > {T}/tracing_on; echo > {T}/trace; "
                   f"echo 8192 > {T}/buffer_size_kb; echo 1 > {T}/events/damon/damon_aggregated/enable; echo 1 > {T}/tracing_on; ")
            post = (f"; echo 0 > {T}/tracing_on; echo 0 > {T}/events/damon/damon_aggregated/enable; "
                    f"grep -o '^ *kdamond[^ ]* *\\[[0-9]*\\] [^ ]* *[0-9.]*' {T}/trace | awk '{{t = $NF + 0; if (t - last[$1] > 0.02) n[$1]++; last[$1] = t}} "
                    f"END {{for (k in n) print k, n[k]}}' > $OUT/agg{i}; grep -c . {T}/trace > $OUT/events{i}; grep -o 'LOST[^#]*' {T}/trace | head -1 > $OUT/lost{i}")
            r = vm.run(pre + v._vm_script(i, prog, "damon-tiering", 64) + post, timeout_s=300)
            rep = json.loads(r.files[f"run{i}"].decode().strip().splitlines()[-1])
            # events of one aggregation come back to back (one per region); aggregations are
            # 100 ms apart: a gap over 20 ms starts the next one
            aggs = {}
            for line in r.files.get(f"agg{i}", b"").decode().splitlines():
                kd, cnt = line.split()
                aggs[kd] = int(cnt)
            aggs = dict(sorted(aggs.items()))
            wall = rep["wall_s"]
            lost = r.files.get(f"lost{i}", b"").decode().strip()
            if lost:
                print(f"{n}: the trace buffer overflowed ({lost}): counts are lower bounds", file=sys.stderr)
            print(json.dumps({"workload": n, "vm_s": round(wall, 2), "aggregations": aggs,
                              "applications_per_vm_s": {kd: round(a / 10 / wall, 2) for kd, a in aggs.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
