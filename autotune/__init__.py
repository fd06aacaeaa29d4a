"""Tile-size choice for tritonml's kernels (installed as the package ``tritonml_autotune``).

``select`` is what the launchers ask: a config per problem, from the persistent cache (``engine``,
``cache``), the shipped tables (``shipped``, ``tables/``), timing candidates (``candidates``) on a
GPU, or the cost model (``cost``, on ``problem``'s sizes, ``compiled``'s registers and ``model``).
``heuristics`` (numbers in ``spaces``) gives the first candidate and the interpreter's config;
``devices`` holds the GPUs' facts and the active target; ``suite`` the benchmark suite's problems.
Nothing here imports tritonml (tests/autotune/test_autotune_engine.py checks): the launchers hand the
tuner plain layouts, dtypes and names; the repository's tools that need both live in benchmarks/.
"""


def caches() -> tuple:
    """``(name, cache, lock)`` of every cache the tuner keeps between calls (``lock`` None where
    the cache needs none): tritonml registers them with its runtime, so one
    ``tritonml.runtime.clear()`` forgets the tuner's answers along with the plans built on them."""
    from . import cache, compiled, engine, select, shipped
    return (("select.answers", select._memo, select._memo_lock),
            ("select.cuda_facts", select._cuda_facts, None),
            ("select.version", select.version, None),
            ("shipped.tables", shipped._entries, None),
            ("compiled.usage", compiled._table, None),
            ("engine.versions", engine._dist_version, None),
            ("cache.files", cache._default, cache._default_lock))
