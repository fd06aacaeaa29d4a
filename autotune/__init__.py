"""Tile-size choice for tritonml's kernels (installed as the package ``tritonml_autotune``).

``spaces`` holds the numbers as data; ``heuristics`` turns a canonical layout into a config. The
persistent tuner with a cost model is a later issue; its tables will live here too.
"""
