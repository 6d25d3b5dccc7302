"""``tierkit workloads``: list the project's test workloads, and trace one under the tracer.
A thin layer over :mod:`tierkit.workloads`; errors are :class:`TierkitError`, which
``tierkit.cli.main`` prints as one line with exit status 2."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from . import workloads as wl
from ._core import TierkitError

workloads_app = typer.Typer(help="The project's own test workloads: C programs with known memory behaviour.",
                            no_args_is_help=True, rich_markup_mode=None)


def _human(b: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b} B"


@workloads_app.command("list")
def list_cmd(json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False) -> None:
    """Every workload: access pattern, what is hot, footprint per size, own options."""
    if json_out:
        rows = []
        for w in wl.WORKLOADS.values():
            rows.append({"name": w.name, "pattern": w.pattern, "description": w.description, "hot": w.hot,
                         "options": w.options, "footprint_bytes": dict(w.footprint_bytes)})
        print(json.dumps(rows, indent=2))
        return
    nw = max(len(n) for n in wl.WORKLOADS)
    pw = max(len(w.pattern) for w in wl.WORKLOADS.values())
    print(f"{'name':<{nw}}  {'pattern':<{pw}}  {'small':>9}  {'medium':>9}  {'large':>9}  options")
    for w in wl.WORKLOADS.values():
        f = w.footprint_bytes
        print(f"{w.name:<{nw}}  {w.pattern:<{pw}}  {_human(f['small']):>9}  {_human(f['medium']):>9}  "
              f"{_human(f['large']):>9}  {w.options or '-'}")
        print(f"{'':<{nw}}  {w.description}\n{'':<{nw}}  hot: {w.hot}")
    print("\nevery workload also takes --seed S, --work F (scale the work, not the footprint) and --plan;"
          " see docs/workloads.md")


@workloads_app.command("trace")
def trace_cmd(
    name: Annotated[str, typer.Argument(help="workload name (see 'tierkit workloads list')")],
    extra_args: Annotated[Optional[List[str]], typer.Argument(help="arguments for the workload, after --")] = None,
    size: Annotated[str, typer.Option("--size", help="small, medium or large")] = "small",
    out: Annotated[Path, typer.Option("--out", "-o", help="output trace (.tkt)")] = ...,  # type: ignore[assignment]  # required
    cache: Annotated[Optional[str], typer.Option("--cache", help="cache hierarchy the tracer filters through: a spec, a preset or 'none'")] = None,
    context: Annotated[int, typer.Option("--context", help="call-stack frames recorded per allocation site")] = 4,
    slice_: Annotated[Optional[str], typer.Option("--slice", help="a slice marker every this many instructions (e.g. 50M), for per-phase analysis")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress lines while recording")] = False,
) -> None:
    """Build a workload and record its trace with the Valgrind tracer (allocation sites included)."""
    wl._check_name(name)
    wl._check_size(size)
    if context < 0:
        raise TierkitError(f"--context: {context} is negative")
    r = wl.trace(name, size, out, cache=cache, context=context, slice=slice_, force=force,
                 extra_args=tuple(extra_args or ()), progress=False if quiet else None)
    msg = f"wrote {out}: workload {name} --size {size}" + (f" {' '.join(extra_args)}" if extra_args else "")
    s = r.get("summary", r) if isinstance(r, dict) else {}
    if isinstance(s, dict) and "accesses" in s:
        msg += f", {s['accesses']:,} accesses"
        if "allocation_sites" in s:
            msg += f", {s['allocation_sites']:,} allocation sites"
    print(msg)
