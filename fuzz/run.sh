#!/usr/bin/env bash
# Build tierkit's libFuzzer targets and run each for a budget (docs/fuzzing.md).
#
#   fuzz/run.sh PROFILE SECONDS [TARGET...]
#
# PROFILE: smoke (what `make test` builds: opt-level 1, quicker to build) or release (what
# `make fuzz` builds). SECONDS: the time each target runs (seed corpus first, then
# mutations). Without TARGETs, every target of fuzz/Cargo.toml runs, one after the other.
#
# The targets are built with stable Rust and libFuzzer's coverage instrumentation, without a
# sanitizer: tierkit-core is safe Rust, so what fuzzing can find is a panic, an integer
# overflow (overflow checks and debug assertions are on), a hang or an allocation beyond the
# memory limit, all of which need no sanitizer and no nightly toolchain. `cargo +nightly
# fuzz run TARGET` builds the same targets with AddressSanitizer for those who want it.
#
# Exit status: 0 when every target ran clean; 1 when one crashed, hung or ran out of memory
# (its input is under fuzz/artifacts/TARGET/, the reproduction command is printed); 0 with
# one line saying why when the toolchain cannot be had (no C++ compiler, crates not
# fetchable), except under CI=true, where that is a failure too.
set -uo pipefail
cd "$(dirname "$0")"
PROFILE=${1:?usage: fuzz/run.sh PROFILE SECONDS [TARGET...]}
SECONDS_EACH=${2:?usage: fuzz/run.sh PROFILE SECONDS [TARGET...]}
shift 2

skip() {
    if [ "${CI:-}" = "true" ]; then
        echo "fuzz: FAILED: $1 (CI=true: fuzzing is required)" >&2
        exit 1
    fi
    echo "fuzz: skipped: $1"
    exit 0
}

command -v cargo >/dev/null || skip "no cargo on PATH"
command -v c++ >/dev/null || command -v g++ >/dev/null || command -v clang++ >/dev/null || skip "no C++ compiler (libFuzzer is C++)"
cargo fetch -q 2>/dev/null || skip "the fuzz crates (libfuzzer-sys) cannot be fetched (offline?)"

HOST=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR=$PWD/target
# libFuzzer's coverage feedback, as cargo-fuzz gives it; --target keeps these flags off build
# scripts and proc macros (which cannot link the coverage callbacks)
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"

ALL=$(sed -n 's/^name = "\(.*\)"/\1/p' Cargo.toml | grep -v '^tierkit-fuzz$')
TARGETS=${*:-$ALL}
start=$(date +%s)
if ! cargo build -q --profile "$PROFILE" --target "$HOST" --bins; then
    echo "fuzz: FAILED: the targets do not build" >&2
    exit 1
fi
echo "fuzz: built $(echo $TARGETS | wc -w) targets ($PROFILE) in $(( $(date +%s) - start )) s; ${SECONDS_EACH} s each"

BIN=$CARGO_TARGET_DIR/$HOST/$PROFILE
# seconds one input may take before it counts as a hang (unoptimised builds are slower)
TIMEOUT=10
[ "$PROFILE" = smoke ] && TIMEOUT=30
# the targets write each input to a file here (tierkit's readers take paths); removed at exit
TIERKIT_FUZZ_SCRATCH=$(mktemp -d /dev/shm/tierkit-fuzz.XXXXXX 2>/dev/null || mktemp -d)
export TIERKIT_FUZZ_SCRATCH
trap 'rm -rf "$TIERKIT_FUZZ_SCRATCH"' EXIT
failed=()
printf '%-22s %12s %10s %8s  %s\n' target executions "exec/s" corpus result
for t in $TARGETS; do
    mkdir -p corpus/$t artifacts/$t
    log=artifacts/$t/last-run.log
    opts=(-max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$PWD/artifacts/$t/")
    [ -f dict/$t.dict ] && opts+=(-dict="$PWD/dict/$t.dict")
    # new inputs go to corpus/ (not committed); seeds/ is read only
    "$BIN/$t" "${opts[@]}" "$PWD/corpus/$t" "$PWD/seeds/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    size=$(ls corpus/$t | wc -l)
    if [ $rc -eq 0 ]; then
        result=ok
    else
        result="FAILED (exit $rc)"
        failed+=("$t")
    fi
    printf '%-22s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$size" "$result"
    if [ $rc -ne 0 ]; then
        grep -m1 -A12 -E "panicked|ERROR: libFuzzer|==ERROR|SUMMARY" "$log" | sed 's/^/    /'
        crash=$(ls -t artifacts/$t/ | grep -v last-run.log | head -1)
        echo "    input: fuzz/artifacts/$t/$crash"
        echo "    reproduce: fuzz/target/$HOST/$PROFILE/$t fuzz/artifacts/$t/$crash"
    fi
done
echo "fuzz: $(echo $TARGETS | wc -w) targets in $(( $(date +%s) - start )) s in all"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (logs: fuzz/artifacts/TARGET/last-run.log)" >&2
    exit 1
fi
