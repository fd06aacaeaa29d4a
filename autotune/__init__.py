"""Tile-size choice for tritonml's kernels (installed as the package ``tritonml_autotune``).

``spaces`` holds the numbers as data; ``heuristics`` turns a canonical layout into a config (what
the launchers use today), for the active target GPU (``devices``: shipped device facts, chosen with
``tritonml.tuning.target`` or ``TRITONML_TARGET``); ``model`` is the time model those facts feed.
``engine`` and ``cache`` are a general tuning engine with a persistent cache (docs/tuning.md), not
yet wired to the launchers.
"""
