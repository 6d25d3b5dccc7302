"""tierkit: decide which data belongs in which memory tier, and prove it with numbers.

The same operations as the ``tierkit`` command, from Python::

    import tierkit
    df = tierkit.compare("trace.tkt", platform="dram-pmem", policies="all", fast_capacity=0.2)
"""
from ._core import TierkitError, TierkitInternalError, __version__
from .api import (
    all_policies,
    cache_presets,
    compare,
    convert,
    detect_format,
    platform,
    platforms,
    policies,
    read_trace,
    record,
    run,
    simulate,
    synth,
    timeseries,
    trace_info,
    write_trace,
)
from .policy import HotPromote, Migrate, PeriodicPolicy, PeriodView, Swap

__all__ = [
    "TierkitError", "TierkitInternalError", "__version__",
    "all_policies", "cache_presets", "compare", "convert", "detect_format", "platform", "platforms",
    "policies", "read_trace", "record", "run", "simulate", "synth", "timeseries", "trace_info", "write_trace",
    "HotPromote", "Migrate", "PeriodicPolicy", "PeriodView", "Swap",
]
