#!/usr/bin/env bash
# Issue 4 experiments: on-the-fly migration (seed 001) and the epoch baselines on the hbm-pcm
# platform, on synthetic migration-friendly and migration-unfriendly traces.
#   make experiments-migration        (or: experiments/dynamic_migration.sh [OUTDIR])
# Traces are generated once into OUTDIR (default target/experiments/migration); each compare
# writes CSV, plots and an HTML page under OUTDIR/<study>. About 6 minutes on 2 cores;
# results and their discussion: docs/experiments.md.
set -euo pipefail
out=${1:-target/experiments/migration}
mkdir -p "$out"
tk() { tierkit "$@"; }
synth() { # name kind args...
  local name=$1; shift
  [ -f "$out/$name.tkt" ] || tk trace synth "$@" --write-ratio 0.3 --seed 1 -q -o "$out/$name.tkt"
}
# friendly: a few pages take most accesses (001 §2, mcf); unfriendly: near-uniform (milc)
synth friendly zipf -n 20M --pages 64K --theta 1.1
synth zipf09 zipf -n 60M --pages 256K --theta 0.9
synth phases phases -n 40M --pages 64K --phases 8
synth unfriendly uniform -n 100M --pages 64K
# issue 14: a fast tier under 256 pages (10% of 4 K pages), where the ReMap table used to pin
# every fast frame before reconciliation or reverse migration could start
synth small zipf -n 2M --pages 4K --theta 0.9
common=(--platform hbm-pcm -c 0.25 --timing detailed -q --force)
S=twindow=64M,migwindow=1600M

echo "== 1. the issue's comparison (defaults) =="
tk compare "$out"/friendly.tkt "$out"/zipf09.tkt "$out"/unfriendly.tkt "${common[@]}" --out "$out/main" \
  --policies interleave:weights=4/4,otf,otf-adaptive:algorithm=3,otf-reverse,hma-epoch,hma-epoch:ar_costs=platform,mempod,fthp,otf:threshold=1000000000

echo "== 2. address reconciliation: hardware, OS, none =="
tk compare "$out"/friendly.tkt "$out"/zipf09.tkt "${common[@]}" --out "$out/ar" \
  --policies interleave:weights=4/4,otf:ar=hw,otf:ar=os,otf:ar=none

echo "== 3. adaptive algorithms =="
tk compare "$out"/friendly.tkt "$out"/zipf09.tkt "$out"/phases.tkt "$out"/unfriendly.tkt "${common[@]}" --out "$out/adaptive" \
  --policies interleave:weights=4/4,otf,otf-adaptive:algorithm=1,otf-adaptive:algorithm=2,otf-adaptive:algorithm=3,otf-adaptive:algorithm=2,rule=prose,otf-adaptive:algorithm=3,rule=prose

echo "== 4. reverse migration by ReMap table size, paper windows and windows x16 =="
tk compare "$out"/friendly.tkt "$out"/zipf09.tkt "$out"/phases.tkt "${common[@]}" --out "$out/reverse" \
  --policies interleave:weights=4/4,otf-reverse:remap=1024,otf-reverse:remap=16384,otf-reverse:remap=65536,otf-reverse:remap=1024,$S,otf-reverse:remap=16384,$S,otf-reverse:remap=65536,$S

echo "== 5. MemPod's epoch on a PCM slow tier =="
tk compare "$out"/friendly.tkt "$out"/unfriendly.tkt "${common[@]}" --out "$out/mempod" \
  --policies interleave:weights=4/4,otf,mempod,mempod:epoch=1ms,mempod:epoch=10ms

echo "== 6. a fast tier under 256 pages (issue 14: the ReMap table pins every fast frame) =="
tk compare "$out"/small.tkt --platform hbm-pcm -c 0.1 --timing detailed -q --force --out "$out/small" \
  --policies interleave:weights=4/4,otf:ar=hw,otf:ar=none,otf-adaptive:algorithm=3,otf-reverse,otf-reverse:remap=65536
