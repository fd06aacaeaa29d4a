"""The launch runtime: plans, prepared launches, resident workspaces, scratch buffers and launch
recording, with one registry of the process's caches (``clear()`` empties them all)."""
from . import trace
from .caches import clear, sizes

__all__ = ["clear", "sizes", "trace"]
