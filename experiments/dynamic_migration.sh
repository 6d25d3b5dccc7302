#!/usr/bin/env bash
# Dynamic migration experiments: on-the-fly migration (seed 001) and the epoch baselines on the hbm-pcm
# platform, on synthetic migration-friendly and migration-unfriendly traces.
#   make experiments-migration        (or: experiments/dynamic_migration.sh [OUTDIR])
# Traces are generated once into OUTDIR (default target/experiments/migration); the six
# studies are the study files experiments/migration/N-NAME.yaml, each run by `tierkit sweep`
# into OUTDIR/N-NAME (its result store, results.parquet and an HTML report; a re-run runs only
# what is not stored yet). About 6 minutes on 2 cores, plus about 15 for study 7 (real
# programs; experiments/migration_real.py tabulates it); results and their discussion:
# docs/experiments.md.
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
# study 6: a fast tier under 256 pages (10% of 4 K pages), where the ReMap table used to pin
# every fast frame before reconciliation or reverse migration could start
synth small zipf -n 2M --pages 4K --theta 0.9
# study 7: real programs, linked into one directory: the SPEC CPU2006 traces beside the
# project (../shared/traces, when present) and five programs of the real-program suite
# (make traces), when recorded
real="$out/real"
rm -rf "$real" && mkdir -p "$real"
for f in ${SHARED_TRACES:-../shared/traces}/*.gz; do
  [ -f "$f" ] && ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$real/"
done
for p in sqlite3 xz dot imagick redis; do
  f=data/traces/real/$p-ref.tkt
  [ -f "$f" ] && ln -s "$(pwd)/$f" "$real/"
done
export REAL_MIGRATION_TRACES=$(cd "$real" && pwd)
# the study files name the traces by this directory
export MIGRATION_TRACES=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for study in "$here"/migration/*.yaml; do
  name=$(basename "$study" .yaml)
  if [ "$name" = 7-real ] && [ -z "$(ls -A "$real")" ]; then
    echo "== $name: skipped: no real traces (run make traces; the SPEC traces come from ../shared/traces) =="
    continue
  fi
  echo "== $name =="
  tk sweep "$study" --out "$out/$name" -q
done
