"""Installing without a clone (docs/install.md), checked cheaply: the licence and the metadata,
the sdist's and the wheel's extra files (pyproject.toml's include lists against the tree), the
installed layout's lookups and `tierkit setup`'s command line, and the PyTorch hint. Building the
wheel itself is `make dist`'s (minutes), not the suite's."""
import fnmatch
import os
import re
import shlex
import tomllib
from pathlib import Path, PurePosixPath

import pytest
from packaging.requirements import Requirement

import tierkit
from conftest import ROOT
from tierkit import api, installed, setup_cmd
from tierkit import workloads as wl

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MATURIN = PYPROJECT["tool"]["maturin"]


def version() -> str:
    return tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def patterns(fmt: str, key: str = "include") -> list[str]:
    out = []
    for p in MATURIN.get(key, []):
        if isinstance(p, str):
            out.append(p)
        else:
            formats = [p["format"]] if isinstance(p["format"], str) else p["format"]
            if fmt in formats:
                out.append(p["path"])
    return out


def matches(path: str, pattern: str) -> bool:
    """As the glob crate maturin uses walks: one component per pattern component ('**' any)."""
    parts, pats = PurePosixPath(path).parts, PurePosixPath(pattern).parts
    if "**" in pats:
        i = pats.index("**")
        head, tail = pats[:i], pats[i + 1:]
        return (len(parts) >= len(head) + len(tail) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, head))
                and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts[len(parts) - len(tail):], tail)))
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, pats))


def shipped(path: str, fmt: str) -> bool:
    return (any(matches(path, p) for p in patterns(fmt))
            and not any(matches(path, p) for p in patterns(fmt, "exclude")))


def sources() -> list[str]:
    """What `tierkit setup` builds from: the tracer's, the workloads' and the allocator's
    sources, as the tree holds them."""
    files = [f for d in ("tracer", "workloads") for f in (ROOT / d).iterdir() if f.is_file()]
    files += [ROOT / "crates" / "tierkit-alloc" / "Cargo.toml", *sorted((ROOT / "crates" / "tierkit-alloc" / "src").glob("*.rs"))]
    return [str(f.relative_to(ROOT)) for f in files]


def test_the_licence_is_mit_as_pyproject_says():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c)" in text and "the tierkit authors" in text
    assert "Permission is hereby granted, free of charge" in text
    assert PYPROJECT["project"]["license"] == {"text": "MIT"}
    assert "License :: OSI Approved :: MIT License" in PYPROJECT["project"]["classifiers"]
    assert shipped("LICENSE", "sdist")


def test_metadata_is_complete():
    p = PYPROJECT["project"]
    assert p["readme"] == "README.md" and p["requires-python"] == ">=3.11" and p["description"]
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in p["classifiers"])
    # the extras the docs name
    assert {"ml", "ray", "test"} <= set(p["optional-dependencies"])
    # abi3: one wheel for every CPython from 3.11 on
    cargo = tomllib.loads((ROOT / "crates" / "tierkit-py" / "Cargo.toml").read_text())
    assert "abi3-py311" in cargo["dependencies"]["pyo3"]["features"]


def test_the_changelog_has_this_version_and_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## Unreleased" in text
    assert re.search(rf"^## {re.escape(version())}\b", text, re.M), version()
    assert shipped("CHANGELOG.md", "sdist")


def test_the_sdist_carries_the_tracer_workloads_and_allocator_sources():
    srcs = sources()
    assert any(s.startswith("tracer/") and s.endswith(".c") for s in srcs)
    assert sum(s.startswith("workloads/") and s.endswith(".c") for s in srcs) >= 12
    missing = [s for s in srcs if s.startswith(("tracer/", "workloads/")) and not shipped(s, "sdist")]
    assert not missing, missing


def test_the_package_carries_them_for_tierkit_setup():
    """In the wheel (and so in what pip builds from the sdist), as tierkit/_sources: links
    into the tree here, which maturin follows."""
    src = ROOT / "python" / "tierkit" / "_sources"
    assert (src / "tracer").resolve() == (ROOT / "tracer").resolve()
    assert (src / "workloads").resolve() == (ROOT / "workloads").resolve()
    assert (src / "tierkit-alloc").resolve() == (ROOT / "crates" / "tierkit-alloc").resolve()
    assert (src / "Cargo.lock").resolve() == (ROOT / "Cargo.lock").resolve()
    assert (src / "Cargo.workspace.toml").resolve() == (ROOT / "Cargo.toml").resolve()
    for s in sources():
        rel = s.replace("crates/tierkit-alloc", "tierkit-alloc", 1)
        for fmt in ("wheel", "sdist"):
            assert shipped(f"python/tierkit/_sources/{rel}", fmt), (s, fmt)
    for f in ("Cargo.lock", "Cargo.workspace.toml"):
        assert shipped(f"python/tierkit/_sources/{f}", "wheel")
    # never what a build left there
    assert not shipped("python/tierkit/_sources/workloads/build/gups", "wheel")
    assert not shipped("python/tierkit/_sources/tracer/build/lib/tierkit-amd64-linux", "sdist")


def test_the_sdist_carries_what_the_crates_read_from_outside_their_folders():
    """include_str!/include_bytes! and #[path] reaching out of a crate of the extension: cargo
    packages none of it, so the sdist's include list must."""
    wanted = set()
    for crate in ("tierkit-core", "tierkit-run", "tierkit-py"):
        for f in (ROOT / "crates" / crate / "src").rglob("*.rs"):
            for m in re.finditer(r'(?:include_str!|include_bytes!)\("([^"]+)"\)|#\[path = "([^"]+)"\]', f.read_text()):
                # both relative to the folder of the file that names them
                target = Path(os.path.normpath(f.parent / (m.group(1) or m.group(2))))
                if ROOT / "crates" / crate not in target.parents:
                    wanted.add(str(target.relative_to(ROOT)))
    assert wanted  # the platforms, at least
    missing = sorted(w for w in wanted if not shipped(w, "sdist"))
    assert not missing, missing


def test_setup_help(cli):
    rc, out, err = cli("setup", "--help")
    assert rc == 0, err
    assert "--prefix" in out and "--parts" in out and "tracer" in out


def test_setup_refuses_an_unknown_part_in_one_line(cli, tmp_path):
    rc, out, err = cli("setup", "--prefix", tmp_path / "d", "--parts", "tracer,gpu")
    assert rc == 2 and err.count("\n") == 1 and "--parts: unknown part 'gpu'" in err, err
    assert not (tmp_path / "d").exists()


def test_setup_copies_sources_without_a_builds_leftovers(tmp_path):
    n = setup_cmd._copy_files(installed.SOURCES / "workloads", tmp_path / "workloads")
    assert n == len(list((ROOT / "workloads").glob("*.[ch]"))) + 1  # and the Makefile
    assert not (tmp_path / "workloads" / "build").exists()
    setup_cmd._alloc_workspace(tmp_path / "alloc")
    ws = tomllib.loads((tmp_path / "alloc" / "Cargo.toml").read_text())
    assert ws["workspace"]["members"] == ["tierkit-alloc"] and ws["workspace"]["package"]["version"] == version()
    assert (tmp_path / "alloc" / "tierkit-alloc" / "src" / "lib.rs").is_file()


@pytest.fixture
def installed_layout(tmp_path, monkeypatch):
    """This package as a pip-installed one sees it: no clone, the data folder under tmp_path."""
    monkeypatch.setattr(installed, "in_clone", lambda: False)
    for v in ("TIERKIT_TRACER_DIR", "TIERKIT_WORKLOADS", "TIERKIT_ALLOC_LIB"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("TIERKIT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_an_installed_tierkit_looks_in_the_data_folder(installed_layout, monkeypatch):
    assert installed.data_dir() == installed_layout
    assert api.tracer_dir() == installed_layout / "tracer" / "build" / "lib"
    with pytest.raises(tierkit.TierkitError, match=r"the workloads are not set up .*run 'tierkit setup'"):
        wl.source_dir()
    (installed_layout / "workloads").mkdir(parents=True)
    (installed_layout / "workloads" / "Makefile").write_text("all:\n")
    assert wl.source_dir() == installed_layout / "workloads"


def test_data_folder_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("TIERKIT_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert installed.data_dir() == tmp_path / "tierkit"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert installed.data_dir() == tmp_path / "home" / ".local" / "share" / "tierkit"


def test_an_installed_tierkit_without_the_tracer_says_run_setup(installed_layout, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda n: f"/usr/bin/{n}")  # Valgrind installed
    with pytest.raises(tierkit.TierkitError, match=r"^tracer: the tierkit Valgrind tool is not built .*run 'tierkit setup'"):
        api._ensure_tracer()


def test_run_guidance_finds_the_installed_allocator(installed_layout, monkeypatch):
    # allocator_for_run sets TIERKIT_ALLOC_LIB in os.environ for the tierkit-run it starts:
    # recorded here so that teardown takes it away again (a later test in this process would
    # otherwise preload this test's empty library)
    monkeypatch.setenv("TIERKIT_ALLOC_LIB", "unset-by-teardown")
    monkeypatch.delenv("TIERKIT_ALLOC_LIB")
    argv = ["--guidance", "g.json", "--", "true"]
    why = installed.allocator_for_run(argv)
    assert why and "run 'tierkit setup'" in why and "\n" not in why
    assert installed.allocator_for_run(["--policy", "first-touch", "--", "prog", "--guidance"]) is None
    lib = installed_layout / "lib" / installed.ALLOC_LIB
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    assert installed.allocator_for_run(["--guidance=g.json", "--", "true"]) is None
    assert os.environ["TIERKIT_ALLOC_LIB"] == str(lib)


def test_the_pytorch_hint_installs_as_written():
    """The line the learned schedulers print is a pip command whose requirements parse, and
    they are the `ml` extra's."""
    from tierkit.learned.lstm import NO_TORCH

    cmd = NO_TORCH.split(": ", 1)[1]
    words = shlex.split(cmd)
    assert words[:2] == ["pip", "install"], cmd
    reqs = [Requirement(w) for w in words[2:]]
    assert [str(r) for r in reqs] == [str(Requirement(r)) for r in PYPROJECT["project"]["optional-dependencies"]["ml"]]
    assert all(r.name == "torch" for r in reqs)
