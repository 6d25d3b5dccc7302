#!/bin/sh
# ReMap-table lookup latency with CACTI 7.0 (docs/remap-latency.md).
# Usage: bench/cacti/run.sh CACTI_DIR > bench/cacti/results.csv
# CACTI_DIR: a built checkout of github.com/HewlettPackard/cacti (commit 1ffd8df, `make opt`);
# the runs happen there (CACTI reads tech_params/ from its working directory).
# One row per (node, organisation, objective, UCA banks, entries): CACTI's access and cycle
# time, the array's height x width and its partitioning (Ndwl, Ndbl, Nspd of the data array).
# The fully associative table is also tried in 2, 4 and 8 banks: one bank has at most 512
# subarrays (CACTI's MAXDATAN), which the largest tables outgrow.
set -eu
cacti=$(cd "$1" && pwd)
tmpl=$(cd "$(dirname "$0")" && pwd)/remap.cfg.in
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "tech_nm,org,objective,banks,entries,size_bytes,access_ns,cycle_ns,height_mm,width_mm,ndwl,ndbl,nspd"
for tech in 0.022 0.032; do
  for org in fa sa4 sa8 sa16; do
    case $org in
      fa) assoc=0 search=1 bankings="1 2 4 8" ;;
      sa*) assoc=${org#sa} search=0 bankings=1 ;;
    esac
    for obj in ed2 delay; do
      for banks in $bankings; do
        for entries in 1024 2048 4096 8192 16384 32768 65536 131072 262144; do
          size=$((entries * 16))
          cfg=$work/$tech-$org-$obj-$banks-$entries.cfg
          sed -e "s/@SIZE@/$size/" -e "s/@ASSOC@/$assoc/" -e "s/@SEARCH@/$search/" -e "s/@TECH@/$tech/" \
            -e "s/^-UCA bank count 1$/-UCA bank count $banks/" "$tmpl" > "$cfg"
          if [ $obj = delay ]; then
            # the alternative objective: all weight on delay, no deviation filter (a 0% or 1% filter
            # leaves no organisation for some inputs): the fastest organisation, whatever its energy
            sed -i -e 's/^-Optimize ED or ED^2 (ED, ED^2, NONE): .*/-Optimize ED or ED^2 (ED, ED^2, NONE): "NONE"/' \
              -e 's/^-design objective (weight delay, dynamic power, leakage power, cycle time, area) .*/-design objective (weight delay, dynamic power, leakage power, cycle time, area) 100:0:0:0:0/' \
              -e 's/^-deviate (delay, dynamic power, leakage power, cycle time, area) .*/-deviate (delay, dynamic power, leakage power, cycle time, area) 100000:100000:100000:100000:100000/' "$cfg"
          fi
          out=$work/out
          (cd "$cacti" && ./cacti -infile "$cfg") > "$out" 2>&1 || { echo "cacti failed: $cfg" >&2; cat "$out" >&2; exit 1; }
          awk -v t="$tech" -v o="$org" -v b="$obj" -v k="$banks" -v e="$entries" -v s="$size" '
            /Access time \(ns\):/ { acc = $4 }
            /Cycle time \(ns\):/ { cyc = $4 }
            /Cache height x width \(mm\):/ { h = $6; w = $8 }
            /Best Ndwl :/ { ndwl = $4 }
            /Best Ndbl :/ { ndbl = $4 }
            /Best Nspd :/ { nspd = $4 }
            END {
              if (acc == "") { print "no access time for " t " " o " " b " " k " " e > "/dev/stderr"; exit 1 }
              printf "%d,%s,%s,%d,%d,%d,%s,%s,%s,%s,%s,%s,%s\n", t * 1000 + 0.5, o, b, k, e, s, acc, cyc, h, w, ndwl, ndbl, nspd
            }' "$out"
        done
      done
    done
  done
done
