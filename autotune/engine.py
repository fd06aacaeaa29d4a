"""A small, general tuning engine: pick one config out of candidates for a key, time it once, remember it.

Nothing here knows about tritonml's kernels. A caller brings

- a key: a dict of JSON-able values naming the problem (``make_key`` adds library versions, and
  ``log2_bucket`` turns sizes into buckets so nearby shapes share one result);
- candidates: configs as plain dicts of JSON-able values;
- optionally a cost model (config -> float, lower is better), used when nothing can be timed;
- optionally a benchmark (config -> seconds), used when timing is on (on a GPU). ``bench_with``
  builds one from "make a callable for this config" and a timer (by default Triton's ``do_bench``).

``tune`` returns a ``Choice``: the config and where it came from. Timing runs once per key; its
winner goes to the persistent cache (``cache.py``) and is "cached" from then on, in this process and
in later ones. ``tune`` does not store modeled choices: they are cheap to recompute. A caller may
record one (``record_modeled``, for a listing such as ``tritonml tune --show``); lookups skip such
entries, so a later GPU run still times that key.

Timing is on unless ``TRITONML_AUTOTUNE=0`` (also ``false``, ``off``, ``no``) is in the environment;
``set_timing(True/False)`` and the ``timing(...)`` context manager override the environment in this
process, ``set_timing(None)`` returns to it. ``using_timer(timer)`` replaces ``do_bench`` in
benchmarks built by ``bench_with`` (tests inject a deterministic timer this way).
"""
from __future__ import annotations

import functools
import json
import math
import operator
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterable, Sequence

from .cache import TuningCache, default_cache, key_string

AUTOTUNE_ENV = "TRITONML_AUTOTUNE"
_OFF_VALUES = ("0", "false", "off", "no")

Config = dict
CostModel = Callable[[Config], float]
Benchmark = Callable[[Config], float]

# Where a choice came from.
TIMED = "timed"        # the fastest candidate by the benchmark, just measured
CACHED = "cached"      # a timed winner read back from the cache (memory or file)
MODELED = "modeled"    # the cost model's lowest candidate; timing off or no benchmark given
DEFAULT = "default"    # neither timing nor a cost model: the first candidate, as the caller ordered them


@dataclass(frozen=True)
class Choice:
    config: Config
    source: str                    # TIMED, CACHED, MODELED or DEFAULT
    seconds: float | None = None   # the winner's measured time, for TIMED and CACHED


# ---------------------------------------------------------------------------------------------
# Keys

def log2_bucket(n: int) -> int:
    """The size bucket of ``n``: the smallest power of two >= n, and 0 for 0.

    So 0 -> 0, 1 -> 1, 2 -> 2, 3 -> 4, 4 -> 4, 5 -> 8; for k >= 2, 2**k - 1 and 2**k share bucket 2**k while
    2**k + 1 is in 2**(k+1). Sizes in one bucket round to the same power-of-two tile, which is what
    a tile config depends on.
    """
    if isinstance(n, bool):
        raise TypeError("log2_bucket takes an integer size, not a bool")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"log2_bucket takes a size >= 0, got {n}")
    return 0 if n == 0 else 1 << (n - 1).bit_length()


@functools.lru_cache(maxsize=None)
def _dist_version(name: str) -> str | None:
    # Installed metadata, not ``import torch``: building a key must not import heavy libraries.
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


VERSION_FIELDS = ("triton", "torch", "version")


def make_key(*, version: str, **fields: Any) -> dict:
    """A tuning key: ``fields`` plus the installed triton and torch versions and the caller's
    ``version`` (bump it when the kernels change, so old timings stop applying).

    Put everything a timing depends on into ``fields``: the kernel's name, the device (name or
    compute capability), dtypes, size buckets (``log2_bucket``), flags.
    """
    clash = set(fields) & set(VERSION_FIELDS)
    if clash:
        raise ValueError(f"make_key fields {sorted(clash)} are reserved for versions")
    key = dict(fields, triton=_dist_version("triton"), torch=_dist_version("torch"),
               version=str(version))
    key_string(key)  # raises TypeError/ValueError now if a field is not JSON-able
    return key


# ---------------------------------------------------------------------------------------------
# Timing switch

_timing_override: bool | None = None


def timing_enabled() -> bool:
    """Whether ``tune`` may time candidates: ``set_timing``'s value if set, else the environment."""
    if _timing_override is not None:
        return _timing_override
    return os.environ.get(AUTOTUNE_ENV, "1").strip().lower() not in _OFF_VALUES


def set_timing(enabled: bool | None) -> None:
    """Turn timing on or off for this process (overriding ``TRITONML_AUTOTUNE``); None follows it again."""
    global _timing_override
    _timing_override = None if enabled is None else bool(enabled)


@contextmanager
def timing(enabled: bool | None):
    """``set_timing(enabled)`` for the duration of a ``with`` block, then the previous setting."""
    global _timing_override
    previous = _timing_override
    set_timing(enabled)
    try:
        yield
    finally:
        _timing_override = previous


# ---------------------------------------------------------------------------------------------
# Benchmarks

def do_bench_seconds(fn: Callable[[], Any]) -> float:
    """Median time of ``fn()`` in seconds by ``triton.testing.do_bench`` (GPU only; imports triton)."""
    from triton.testing import do_bench
    return do_bench(fn, return_mode="median") / 1e3


Timer = Callable[[Callable[[], Any]], float]
_timer_override: Timer | None = None


@contextmanager
def using_timer(timer: Timer | None):
    """Benchmarks from ``bench_with`` without a timer of their own time with ``timer`` (None:
    ``do_bench_seconds``) while the block runs, in every thread."""
    global _timer_override
    previous = _timer_override
    _timer_override = timer
    try:
        yield
    finally:
        _timer_override = previous


def bench_with(build: Callable[[Config], Callable[[], Any]], timer: Timer | None = None) -> Benchmark:
    """A benchmark for ``tune``: ``build(config)`` makes a no-argument callable (allocating outside
    the timed region), ``timer`` times it (default: ``using_timer``'s, else ``do_bench_seconds``)."""
    def benchmark(config: Config) -> float:
        time_fn = timer or _timer_override or do_bench_seconds
        return time_fn(build(config))
    return benchmark


# ---------------------------------------------------------------------------------------------
# Choosing

# One timing at a time per process: timings running side by side on one GPU disturb each other, and
# a second caller of the same key should wait and then find the first one's result in the cache.
_timing_lock = threading.Lock()


def _canonical(config: Config) -> str:
    if not isinstance(config, dict):
        raise TypeError(f"a config is a dict, got {type(config).__name__}")
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _cached_choice(cache: TuningCache, key: dict, by_text: dict[str, Config]) -> Choice | None:
    entry = cache.get(key)
    # A recorded modeled choice is for listings only: it must not keep the key from being timed.
    if entry is None or entry.get("source") == MODELED:
        return None
    config = by_text.get(_canonical(entry["config"]))
    # A stored winner that is no longer a candidate (the space changed) does not count.
    if config is None:
        return None
    seconds = entry.get("seconds")
    return Choice(config, CACHED, float(seconds) if isinstance(seconds, (int, float)) else None)


def _time(candidates: Sequence[Config], benchmark: Benchmark) -> tuple[Config, float]:
    best: tuple[Config, float] | None = None
    errors = []
    for config in candidates:
        try:
            seconds = float(benchmark(config))
        except Exception as exc:  # a config that fails to compile or launch is not a winner
            errors.append(exc)
            continue
        if not math.isfinite(seconds) or seconds < 0:
            errors.append(ValueError(f"benchmark gave {seconds!r} for {config}"))
            continue
        if best is None or seconds < best[1]:
            best = (config, seconds)
    if best is None:
        raise RuntimeError(f"every one of {len(candidates)} candidates failed to run") from errors[-1]
    return best


def _by_text(candidates: Sequence[Config]) -> dict[str, Config]:
    by_text: dict[str, Config] = {}
    for config in candidates:
        by_text.setdefault(_canonical(config), config)
    return by_text


def lookup(key: dict, candidates: Iterable[Config], *, cache: TuningCache | None = None) -> Choice | None:
    """The timed winner stored for ``key`` if it is still among ``candidates`` ("cached"), else None."""
    cache = default_cache() if cache is None else cache
    return _cached_choice(cache, key, _by_text(list(candidates)))


def record_modeled(key: dict, config: Config, *, cache: TuningCache | None = None) -> None:
    """Store ``config`` for ``key`` marked ``"source": "modeled"``, unless a timed winner is
    stored there already. Lookups skip such entries (see the module docstring)."""
    cache = default_cache() if cache is None else cache
    _canonical(config)
    existing = cache.get(key)
    if existing is None or existing.get("source") == MODELED:
        cache.put(key, {"config": config, "source": MODELED})


def tune(key: dict, candidates: Iterable[Config], *, cost_model: CostModel | None = None,
         benchmark: Benchmark | None = None, cache: TuningCache | None = None) -> Choice:
    """Choose a config for ``key`` among ``candidates``.

    In order: a cached timed winner that is still a candidate ("cached"); else, when timing is on
    and a ``benchmark`` is given, time every candidate once, store the fastest and return it
    ("timed"; candidates whose benchmark raises are skipped); else the cost model's lowest ("modeled");
    else the first candidate ("default"). Ties go to the earlier candidate.
    """
    candidates = list(candidates)
    if not candidates:
        raise ValueError("tune needs at least one candidate config")
    by_text = _by_text(candidates)
    cache = default_cache() if cache is None else cache

    choice = _cached_choice(cache, key, by_text)
    if choice is not None:
        return choice
    if benchmark is not None and timing_enabled():
        with _timing_lock:
            choice = _cached_choice(cache, key, by_text)  # another thread may have timed it
            if choice is not None:
                return choice
            config, seconds = _time(candidates, benchmark)
            cache.put(key, {"config": config, "seconds": seconds, "source": TIMED})
            return Choice(config, TIMED, seconds)
    if cost_model is not None:
        return Choice(min(candidates, key=cost_model), MODELED)
    return Choice(candidates[0], DEFAULT)
