"""Tile-size choice for tritonml's kernels (installed as the package ``tritonml_autotune``).

``spaces`` holds the numbers as data; ``heuristics`` turns a canonical layout into a config (what
the launchers use today). ``engine`` and ``cache`` are a general tuning engine with a persistent
cache (docs/tuning.md), not yet wired to the launchers.
"""
