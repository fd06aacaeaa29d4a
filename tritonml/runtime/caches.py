"""The registry of tritonml's process-wide caches, and the one ``clear()`` that empties them all.

Every module that keeps something between calls registers it here when it is imported: the
launchers' plans, the compiled kernels relaunched directly, the resident workspaces, the combine
functions generated for user reductions, and (from tritonml/tuning.py) the tuner's remembered
answers, tables and cache files. ``clear()`` empties each of them, so the next call rebuilds what
it needs exactly as a first call would: after the tuning cache changed under this process, to free
the device memory the resident workspaces hold, or in tests.

What is registered is a cache: dropping it loses time, never a result. Per-thread state (the
active launch recorders, tuning targets and routing modes) is not a cache and is not registered.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, TypeVar

_C = TypeVar("_C")

# Caches are registered at import and cleared from any thread.
_lock = threading.Lock()


@dataclass(frozen=True)
class Cache:
    name: str
    clear: Callable[[], None]
    size: Callable[[], int]


_registry: dict[str, Cache] = {}


def register(name: str, cache: _C, *, lock: Any = None) -> _C:
    """Register ``cache`` under ``name`` and return it: a container with ``clear()`` and ``len()``
    (a dict, a set), or a ``functools.lru_cache``/``functools.cache`` function. ``lock``: the lock
    the cache's owner takes around changes, taken here around clearing and sizing too."""
    owner: Any = cache  # duck-typed: a container or an lru_cache function
    if hasattr(owner, "cache_clear"):
        clear, size = owner.cache_clear, lambda: owner.cache_info().currsize
    else:
        clear, size = owner.clear, owner.__len__
    if lock is not None:
        clear, size = _locked(lock, clear), _locked(lock, size)
    with _lock:
        _registry[name] = Cache(name, clear, size)
    return cache


def _locked(lock: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
    def call():
        with lock:
            return fn()
    return call


def clear() -> None:
    """Empty every registered cache.

    The launchers' plans, the compiled kernels relaunched directly, the resident workspaces (their
    device memory is freed), the combine functions generated for user reductions, and the tuner's
    remembered answers, tables and cache files: the next call rebuilds what it needs exactly as a
    first call would. A cache only saves time, so clearing one never changes a result. Per-thread
    state (launch recorders, tuning targets, routing modes) is not a cache and is kept.

    Example:
        >>> from tritonml import runtime
        >>> runtime.clear()
        >>> set(runtime.sizes().values())
        {0}
    """
    with _lock:
        caches = list(_registry.values())
    for cache in caches:
        cache.clear()


def sizes() -> Dict[str, int]:
    """{name: number of entries} of every registered cache.

    Returns:
        A dict from each registered cache's name (``"tuner.answers"``, ...) to its number of
        entries.

    Example:
        >>> import torch, tritonml
        >>> from tritonml import runtime
        >>> runtime.clear()
        >>> _ = tritonml.cumulative_sum(torch.ones(4), 0)
        >>> sum(runtime.sizes().values()) > 0     # the call's plan is remembered
        True
    """
    with _lock:
        caches = list(_registry.values())
    return {cache.name: cache.size() for cache in caches}
