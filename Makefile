# make demo : set up everything on a fresh machine, then compare every policy on a real trace
# make dist : the wheel and the sdist into dist/ (docs/install.md)
# make test : set up everything, then the lint steps, every test (Rust, Python, VM) and every fuzz target briefly
# make fuzz : run every fuzz target (docs/fuzzing.md); FUZZ_SECONDS=600 is the total, split evenly
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)
RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml $(wildcard platforms/*.toml)
DEMO_TRACE := data/traces/sqlite3-orders.tkt
ALLOC_LIB := target/release/libtierkit_alloc.so

.PHONY: dist lint fuzz-campaign bench-sweep bench-mix alloc bench-alloc bench-alloc-stress all demo test setup build rust-test py-test fuzz fuzz-smoke bench clean workloads tracer bench-tracer traces experiments-migration experiments-guided experiments-guided-suite experiments-learned experiments-learned-honest experiments-tiering experiments-mixes experiments-tiering-cores bench-guidance bench-learn bench-run experiments-live validate-kernel validate-kernel-paced validate-timing validate-guided validate-guided-programs

all: build

$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.5,<2"
	touch $@

# release build of the extension, installed into the venv with the package's dependencies:
# .core with only what the simulator and the demo need (no PyTorch: about 0.5 GB), .built with
# the test tools, PyTorch and Ray too (tierkit[test,ml,ray]: the learned schedulers, sweep --executor ray; about 6 GB, most of it
# PyTorch's CUDA libraries), which make test and the studies use
# (cargo's progress is shown: a build from scratch takes minutes, more on a loaded machine)
$(VENV)/.core: $(VENV)/.deps $(RUST_SRC)
	@echo "make: building tierkit's Rust extension (release, thin LTO: about 3 minutes on 2 idle cores, more when busy) and installing its Python dependencies"
	$(VENV)/bin/maturin develop --release
	touch $@
$(VENV)/.built: $(VENV)/.deps $(RUST_SRC)
	@echo "make: building tierkit's Rust extension (release, thin LTO: about 3 minutes on 2 idle cores, more when busy) and installing the test tools, PyTorch and Ray (about 6 GB)"
	$(VENV)/bin/maturin develop --release -E test,ml,ray
	touch $@ $(VENV)/.core

setup build: $(VENV)/.built workloads tracer $(ALLOC_LIB)

# the test workloads (C programs with known memory behaviour) into workloads/build/
workloads:
	$(MAKE) -s -C workloads

# the Valgrind tool behind 'tierkit trace record', built against the installed Valgrind into
# tracer/build/ (make TRACER=no skips it: then recording is unavailable)
TRACER ?= yes
tracer:
ifneq ($(TRACER),no)
	$(MAKE) -s -C tracer
endif

rust-test:
	cargo test -p tierkit-core --quiet
	cargo test -p tierkit-run --quiet
	cargo test --release -p tierkit-alloc --quiet

# the preloaded allocator behind 'tierkit run --guidance' (docs/guidance.md); it builds jemalloc
# 5.3 from the tikv-jemalloc-sys crate's sources (about a minute on 2 cores, once)
alloc: $(ALLOC_LIB)
$(ALLOC_LIB): $(RUST_SRC)
	cargo build --release -q -p tierkit-alloc

# the Python suite on every core (pytest-xdist; PYTEST_WORKERS=1 runs it in one process); the
# workloads are built first, so that the workers' tests only find them built
PYTEST_WORKERS ?= auto
py-test: $(VENV)/.built tracer workloads $(ALLOC_LIB)
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests

test: $(VENV)/.built tracer $(ALLOC_LIB) lint rust-test py-test test-vm fuzz-smoke

# the lint steps of make test: rustfmt (rustfmt.toml), clippy with warnings denied, ruff and
# mypy (pyproject.toml; mypy checks the package against python/tierkit/_core.pyi, which
# tests/test_stub.py checks against the extension)
PY_LINTED = python tests fuzz/python bench experiments data testbed workloads
lint: $(VENV)/.built
	cargo fmt --all -- --check
	cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
	cargo clippy --workspace --all-targets -q -- -D warnings
	$(VENV)/bin/ruff check -q $(PY_LINTED)
	$(VENV)/bin/mypy

# libFuzzer targets for every parser (fuzz/, docs/fuzzing.md), built with stable Rust.
# `make fuzz` builds them optimised and runs each for FUZZ_SECONDS / (number of targets)
# seconds; `make test` builds them quicker to compile (opt-level 0) and runs each for
# FUZZ_SMOKE_SECONDS, so that CI exercises every target. A crash, hang or out-of-memory fails
# the build. Without a C++ compiler or the fuzz crates (offline), the step says why and is
# skipped, except under CI=true, where it fails.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 3
FUZZ_TARGETS = $(shell sed -n 's/^name = "\(.*\)"/\1/p' fuzz/Cargo.toml | grep -vc '^tierkit-fuzz$$')
# the Python readers' targets (fuzz/python/targets.py) run under atheris for PY_FUZZ_SECONDS
# each after the Rust targets; in make test they run on their seeds and fixed mutations
# (tests/test_py_fuzz.py)
PY_FUZZ_SECONDS ?= 60
fuzz: $(VENV)/.built
	fuzz/run.sh release $$(( $(FUZZ_SECONDS) / $(FUZZ_TARGETS) > 0 ? $(FUZZ_SECONDS) / $(FUZZ_TARGETS) : 1 ))
	$(PY) fuzz/python/run.py $(PY_FUZZ_SECONDS)

# a mutation campaign over every Python-side input, each run in a process of its own with a
# time and memory limit (docs/fuzzing.md, "The campaign"); about 10 minutes on 2 cores
CAMPAIGN_RUNS ?= 3200
fuzz-campaign: $(VENV)/.built
	$(PY) fuzz/python/campaign.py --runs $(CAMPAIGN_RUNS) --out target/py-campaign

fuzz-smoke:
	fuzz/run.sh smoke $(FUZZ_SMOKE_SECONDS)

# the wheel and the sdist of docs/install.md into dist/: the wheel for CPython >= 3.11 (abi3) on
# glibc >= 2.17 (manylinux2014, linked with zig from the ziglang package), built in target/dist so
# that target/release stays as the other targets built it, then checked by auditwheel; the sdist
# with the tracer's, workloads' and allocator's sources (pyproject.toml, [tool.maturin] include)
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
$(VENV)/.dist-deps: $(VENV)/.deps
	$(PY) -m pip install -q "ziglang==0.17.1" "auditwheel>=6,<7"
	touch $@
dist: $(VENV)/.dist-deps
	@echo "make dist: building the wheel of tierkit $(VERSION) (a release build linked for glibc 2.17: several minutes), then the sdist, into dist/"
	CARGO_TARGET_DIR=target/dist $(VENV)/bin/maturin build --release --zig --compatibility manylinux2014 --out dist
	$(VENV)/bin/maturin sdist --out dist
	$(VENV)/bin/auditwheel show dist/tierkit-$(VERSION)-cp311-abi3-*.whl

# the test workloads too: the README's tour records workloads/build/gups
demo: $(VENV)/.core workloads
	$(VENV)/bin/tierkit compare $(DEMO_TRACE) --platform dram-pmem --fast-capacity 0.2 --policies all,guided:strategy=thermos --out demo-out --force

bench: $(VENV)/.built
	cargo bench -p tierkit-core --bench throughput

# tierkit sweep: a 40-cell study on 1 and on every core, then re-run from its store (bench/README.md)
bench-sweep: $(VENV)/.built
	$(PY) bench/sweep.py --workers $$(nproc)

# many cores: a 16-program mix's throughput against one program's, and the
# bandwidth saturation plot docs/img/mix-saturation.png (bench/README.md "mix")
bench-mix: $(VENV)/.built
	$(PY) bench/mix.py

# traces of real programs from Debian packages, each on a train and a ref input, into
# data/traces/real/ with suite.json (data/recipes/record_traces.py, data/traces/README.md);
# INSTALL=1 installs missing programs with apt-get; about 6 minutes on two cores
traces: $(VENV)/.built tracer
	$(PY) data/recipes/record_traces.py $(if $(INSTALL),--install)

# the tracer's overhead against native, valgrind --tool=none and cachegrind (bench/README.md)
bench-tracer: $(VENV)/.built tracer
	$(PY) bench/tracer_overhead.py

# the overhead of tierkit run's daemon on the program, on this host and in the testbed VM
# (bench/README.md); about 5 minutes
bench-run: $(VENV)/.built workloads target/release/tierkit-run testbed
	$(PY) bench/run_overhead.py

# the preloaded allocator's overhead against glibc and jemalloc (sqlite3, xz, workloads, a
# malloc/free microbenchmark; bench/README.md), about 5 minutes; and its one-minute stress
bench-alloc: $(VENV)/.built workloads $(ALLOC_LIB)
	$(PY) bench/alloc_overhead.py
bench-alloc-stress: $(VENV)/.built $(ALLOC_LIB)
	$(PY) bench/alloc_stress.py

# the study of tierkit run's policies placing a program with a known hot set in the testbed VM
# (docs/real-linux.md); about 2 minutes
experiments-live: $(VENV)/.built target/release/tierkit-run testbed
	$(PY) experiments/live_placement.py

# tierkit's models of Linux's tiering policies against the kernel in the testbed VM, on
# the same four workloads (docs/validation.md), each run calibrated to at least 8 s in the VM; about 10
# minutes (traces cached per length in target/validation)
validate-kernel: $(VENV)/.built workloads tracer target/release/tierkit-run testbed
	$(PY) -m tierkit.cli validate --out experiments/results/validation.json --img-dir docs/img

# the kernel validation twice in VMs paced by the slow-tier plugin, on an idle and on a loaded
# host, side by side (docs/validation.md, "Reproducible under the slow tier"; about 30 minutes)
validate-kernel-paced: $(VENV)/.built workloads tracer target/release/tierkit-run testbed
	$(PY) experiments/kernel_reproducible.py

# predicted runtimes against runtimes measured in the testbed VM with a slow tier that is really
# slower (docs/validation.md, "Predicted runtimes against measured ones"); about 25 minutes
validate-timing: $(VENV)/.built workloads tracer target/release/tierkit-run testbed
	$(PY) -m tierkit.cli validate --timing --out experiments/results/validation_timing.json --img-dir docs/img

# guidance applied by the preloaded allocator in the testbed VM against the simulated
# guided run, on sites and bfs (docs/guidance.md, "Checked in the VM"); 3.5 minutes (traces reused)
validate-guided: $(VENV)/.built workloads tracer target/release/tierkit-run $(ALLOC_LIB) testbed
	$(PY) -m tierkit.cli validate --guided --out experiments/results/guided_vm.json --img-dir docs/img

# the same for two real programs of the suite (Debian's sqlite3 and xz, carried into the VM;
# docs/guidance.md, "Real programs of the suite"): about a minute and a half
validate-guided-programs: $(VENV)/.built tracer target/release/tierkit-run $(ALLOC_LIB) testbed
	$(PY) -m tierkit.cli validate --guided --programs sqlite3,xz --img-dir docs/img

# the study of dynamic migration on hbm-pcm (docs/experiments.md); about 6 minutes
experiments-migration: $(VENV)/.built
	experiments/dynamic_migration.sh

# speed of profiling, the strategies and guided runs (bench/README.md)
bench-guidance: $(VENV)/.built
	$(PY) bench/guidance.py

# speed and accuracy of Kleio's per-page predictors (bench/README.md); needs PyTorch
bench-learn: $(VENV)/.built
	$(PY) bench/learn.py

# The studies of docs/experiments.md are study files (experiments/*/study.yaml) run by
# `tierkit sweep` into target/experiments/NAME (a result store: a re-run runs only what is not
# stored yet); a script then makes the tables from the store.
SWEEP = $(VENV)/bin/tierkit sweep

# the study of guidance by allocation site on hbm-ddr3; records the workloads once
# (a minute or two with Valgrind), then about 5 minutes of simulation on 2 cores
experiments-guided: $(VENV)/.built workloads tracer
	$(SWEEP) experiments/guided/study.yaml --out target/experiments/guided
	$(PY) experiments/guided_placement.py target/experiments/guided

# 000's and 002's studies of guidance on the suite of real programs (docs/experiments.md,
# "Guidance on real programs"); records the suite first if it is missing (make traces, about
# 7 minutes), then about 25 minutes of simulation on 2 cores
experiments-guided-suite: $(VENV)/.built tracer
	$(PY) data/recipes/record_traces.py $(if $(INSTALL),--install)
	$(SWEEP) experiments/guided-suite/study.yaml --out target/experiments/guided-suite
	$(PY) experiments/guided_suite.py target/experiments/guided-suite

# the study of Cori, Kleio and Kleoniki on dram-pmem; needs PyTorch
experiments-learned: $(VENV)/.built workloads tracer
	$(SWEEP) experiments/learned/study.yaml --out target/experiments/learned
	$(PY) experiments/learned_scheduling.py target/experiments/learned

# Kleio and Kleoniki scored as a running system would (docs/learned.md): every fallback, perfect
# classes, the controls and the inference cost on the SPEC traces (SPEC_TRACES), the learned
# workloads and dot/sqlite3 of the guided-placement suite; missing traces are skipped. About 5
# minutes on 2 cores.
experiments-learned-honest: $(VENV)/.built workloads tracer
	$(PY) experiments/kleio_honest.py --shared $(SPEC_TRACES)

# the study of seed 001 with many programs: 4- and 16-program mixes on hbm-pcm; needs the
# shared SPEC traces (SPEC_TRACES, default ../shared/traces); about 2 minutes on 2 cores
SPEC_TRACES ?= $(abspath ../shared/traces)
experiments-mixes: $(VENV)/.built workloads tracer
	SPEC_TRACES=$(SPEC_TRACES) $(SWEEP) experiments/mixes/study.yaml --out target/experiments/mixes

# the study of seed 004's setting with many cores: the tiering policies on gups's threads
# (8 and 16 cores) and on mixes of 8 and 16 workload-suite programs, on the whole socket's
# dram-dcpmm; records the workloads once, then about 6 minutes of simulation on 2 cores
experiments-tiering-cores: $(VENV)/.built workloads tracer
	$(SWEEP) experiments/tiering-cores/study.yaml --out target/experiments/tiering-cores
	$(PY) experiments/tiering_cores.py target/experiments/tiering-cores

# the study of HyPlacer and the OS tiering policies on dram-dcpmm; records six workloads
# once (seconds), then about 4 minutes of simulation on 2 cores
experiments-tiering: $(VENV)/.built workloads tracer
	$(SWEEP) experiments/tiering/study.yaml --out target/experiments/tiering
	$(PY) experiments/os_tiering.py target/experiments/tiering

# the real-Linux testbed (docs/real-linux.md): a QEMU VM image from Debian packages (Linux 6.12
# cloud kernel, busybox-static) into testbed/build/, installing qemu-system-x86 when missing
.PHONY: testbed test-vm
testbed:
	$(MAKE) -s -C testbed

# tierkit run's Linux side as a binary of its own, carried into the testbed VM by its tests
target/release/tierkit-run: $(RUST_SRC)
	cargo build --release -q -p tierkit-run

# the real-Linux tests (pytest -m vm) in the testbed VM; where it cannot be built they skip with
# one line saying why, except with CI=true, where that is a failure
test-vm: $(VENV)/.built workloads target/release/tierkit-run
	@$(MAKE) -s -C testbed || [ "$$CI" != true ]
	TIERKIT_VM_TESTS=1 $(PY) -m pytest -m vm tests -rs

clean:
	rm -rf $(VENV) target demo-out dist workloads/build tracer/build fuzz/target fuzz/corpus fuzz/artifacts testbed/build
