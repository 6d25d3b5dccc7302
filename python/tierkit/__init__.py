"""tierkit: decide which data belongs in which memory tier, and prove it with numbers.

The same operations as the ``tierkit`` command, from Python::

    import tierkit
    df = tierkit.compare("trace.tkt", platform="dram-pmem", policies="all", fast_capacity=0.2)
"""
import functools as _functools
import re as _re
from typing import Callable as _Callable, ParamSpec as _ParamSpec, TypeVar as _TypeVar

from . import api as _api
from .advising import advise as _advise
from ._core import TierkitError, TierkitInternalError, __version__
from .policy import HotPromote, Migrate, PeriodicPolicy, PeriodView, Swap
from .results import Results, plot_runtime, plot_tiers, tiers
from .studies import sweep as _sweep

_P = _ParamSpec("_P")
_R = _TypeVar("_R")
_FLAG = _re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
_QUOTED_COMMAND = _re.compile(r"('tierkit [^']*')")


def _python_names(f: _Callable[_P, _R]) -> _Callable[_P, _R]:
    """The function with its errors naming its parameters (``fast_capacity``) where the code it
    shares with the command line names options (``--fast-capacity``)."""

    @_functools.wraps(f)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return f(*args, **kwargs)
        except TierkitError as e:
            msg = str(e)
            # a command line quoted as advice ('tierkit compare ... --out DIR') keeps its options
            named = "".join(part if part.startswith("'tierkit ") else _FLAG.sub(lambda m: m.group(1).replace("-", "_"), part)
                            for part in _QUOTED_COMMAND.split(msg))
            if named == msg:
                raise
            raise type(e)(named) from None

    return call


advise = _python_names(_advise)
all_policies = _python_names(_api.all_policies)
cache_presets = _python_names(_api.cache_presets)
compare = _python_names(_api.compare)
convert = _python_names(_api.convert)
detect_format = _python_names(_api.detect_format)
guide = _python_names(_api.guide)
heatmap = _python_names(_api.heatmap)
kleio = _python_names(_api.kleio)
kleoniki = _python_names(_api.kleoniki)
load = _python_names(_api.load)
platform = _python_names(_api.platform)
platforms = _python_names(_api.platforms)
policies = _python_names(_api.policies)
profile = _python_names(_api.profile)
profile_sites = _python_names(_api.profile_sites)
read_trace = _python_names(_api.read_trace)
record = _python_names(_api.record)
replay = _python_names(_api.replay)
run = _python_names(_api.run)
run_program = _python_names(_api.run_program)
simulate = _python_names(_api.simulate)
sweep = _python_names(_sweep)
synth = _python_names(_api.synth)
timeseries = _python_names(_api.timeseries)
trace_info = _python_names(_api.trace_info)
tune = _python_names(_api.tune)
tune_trials = _python_names(_api.tune_trials)
write_trace = _python_names(_api.write_trace)

__all__ = [
    "TierkitError", "TierkitInternalError", "__version__",
    "advise", "all_policies", "cache_presets", "compare", "convert", "detect_format", "guide", "heatmap", "kleio", "kleoniki",
    "load", "platform", "platforms", "policies", "profile", "profile_sites", "read_trace", "record", "replay", "run", "run_program",
    "simulate", "sweep", "synth", "timeseries", "trace_info", "tune", "tune_trials", "write_trace",
    "HotPromote", "Migrate", "PeriodicPolicy", "PeriodView", "Swap",
    "Results", "plot_runtime", "plot_tiers", "tiers",
]
