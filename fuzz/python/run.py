"""Run the Python readers' fuzz targets (targets.py) under atheris, coverage-guided.

    python fuzz/python/run.py SECONDS [TARGET...]     # each target SECONDS (default: all)

A target's corpus is ``fuzz/corpus/py-TARGET/`` (seeded from valid inputs the first time);
an input that breaks the contract is written to ``fuzz/artifacts/py-TARGET/`` and the run
exits 1 after printing the command that reproduces it:

    python fuzz/python/run.py repro TARGET FILE
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUZZ = HERE.parent


def _one(name: str, seconds: int) -> int:
    """Fuzz one target in this process (atheris owns it until the time is up)."""
    import atheris

    with atheris.instrument_imports(include=["tierkit"]):
        import tierkit.cli  # noqa: F401
        import tierkit.guidance  # noqa: F401
        import tierkit.learned  # noqa: F401
        import tierkit.replaying  # noqa: F401
        import tierkit.studies  # noqa: F401
        import tierkit.untrusted  # noqa: F401
        import tierkit.validate  # noqa: F401
    sys.path.insert(0, str(HERE))
    import targets

    corpus = FUZZ / "corpus" / f"py-{name}"
    arts = FUZZ / "artifacts" / f"py-{name}"
    corpus.mkdir(parents=True, exist_ok=True)
    arts.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        for i, data in enumerate(targets.seed_inputs(name)):
            (corpus / f"seed-{i}").write_bytes(data)
    fn = targets.TARGETS[name]
    atheris.Setup([sys.argv[0], str(corpus), f"-max_total_time={seconds}", "-timeout=60", "-rss_limit_mb=4096",
                   f"-artifact_prefix={arts}/", "-print_final_stats=1"], fn)
    atheris.Fuzz()
    return 0


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--one"]:
        return _one(args[1], int(args[2]))
    if args[:1] == ["repro"]:
        sys.path.insert(0, str(HERE))
        import targets

        targets.TARGETS[args[1]](Path(args[2]).read_bytes())
        print("no contract broken")
        return 0
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz/python: atheris is not installed (pip install atheris; it is in tierkit[test])", file=sys.stderr)
        return 0 if os.environ.get("CI") != "true" else 1
    seconds = int(args[0]) if args else 10
    sys.path.insert(0, str(HERE))
    import targets

    names = args[1:] or list(targets.TARGETS)
    bad = 0
    for name in names:
        # each target in a process of its own: atheris exits the process when it is done
        p = subprocess.run([sys.executable, __file__, "--one", name, str(seconds)], capture_output=True, text=True)
        log = FUZZ / "artifacts" / f"py-{name}" / "last-run.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(p.stdout + p.stderr)
        stats = [ln for ln in p.stderr.splitlines() if ln.startswith(("stat::number_of_executed_units", "Done "))]
        runs = next((ln.split(":")[-1].strip() for ln in stats if "executed_units" in ln), "?")
        ok = p.returncode == 0
        print(f"py-{name:<10} {runs:>8} runs in {seconds} s  {'ok' if ok else 'FAILED'}")
        if not ok:
            bad += 1
            tail = "\n".join(p.stderr.splitlines()[-25:])
            crash = next((ln.split()[-1] for ln in p.stderr.splitlines() if "Test unit written to" in ln), None)
            print(tail)
            if crash:
                print(f"reproduce: python {__file__} repro {name} {crash}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
