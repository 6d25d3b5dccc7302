#!/usr/bin/env python3
"""The autonuma-tiering model with and without each of its changes (kernel watermarks,
other programs' pages, kswapd's nap, node 0's second zone), on the traces and clocks of a `tierkit validate` run
(docs/validation.md, "Model changes"). Usage: experiments/validation_variants.py WORKLOAD... [--json PATH]"""
import json
import sys
from pathlib import Path
from tierkit import validate as v
args = sys.argv[1:]
js = args[args.index('--json') + 1] if '--json' in args else 'experiments/results/validation-autonuma.json'
d = json.load(open(js))
w = Path('target/validation')  # where tierkit validate keeps its traces
for r in d['results']:
    if r['workload'] not in args:
        continue
    n, kp, K = r['workload'], r['model_params']['node0'], r['clock']['time_scale']
    free = r['kernel']['node0_free_bytes']
    # one zone: the largest zone's watermarks plus the floor the allocator leaves in the other
    wm = ",".join(f"wmark_{k}_pages={kp['zone_watermarks'][k] + kp['other_zones_floor_pages']}" for k in ("min", "low", "high", "promo"))
    # two zones: the largest zone's watermarks as they are, the small zone its own
    z2 = v.zone_model_params(kp['zones'], kp['fast_other_pages'])
    z2 = z2 if 'dma_zone_pages' in z2 else None
    base = v.MODEL_ARGS["autonuma-tiering"]
    variants = {
        "formula wm, nap off": (free, f"{base},kswapd_nap_ms=1e9"),
        "formula wm, nap": (free, base),
        "real wm, nap off": (free, f"{base},{wm},kswapd_nap_ms=1e9"),
        "real wm + others, nap off": (free + kp['fast_other_pages'] * 4096, f"{base},{wm},fast_other_pages={kp['fast_other_pages']},kswapd_nap_ms=1e9"),
        "real wm + others, nap": (free + kp['fast_other_pages'] * 4096, f"{base},{wm},fast_other_pages={kp['fast_other_pages']}"),
    }
    if z2 is not None:
        variants["two zones + others, nap"] = (free + kp['fast_other_pages'] * 4096, v.model_args("autonuma-tiering", z2))
    for name, (fb, spec) in variants.items():
        plat = w / f"var-{n}.toml"
        plat.write_text(v.platform_toml(fb))
        res = v.simulate(Path(f"target/validation/{n}.tkt"), plat, spec, K)
        mc = v.model_counts(res, "autonuma-tiering")
        mres = v.model_residency(res, "autonuma-tiering", fb // 4096, K)
        print(n, name, mc, "res", round(v._mean_residency(mres, res['runtime_ns'] / 1e9 * K) * 100), flush=True)
    print(n, "kernel", {k: r['kernel'][k] for k in ('promotions', 'demotions', 'hint_faults')}, round(r['kernel']['residency_mean'] * 100))
