"""Time limits of the tests, for a loaded machine.

A limit in a test (a subprocess's timeout, a thread's join, a barrier's wait, a process group's
timeout) is a hang detector, never a measurement: it must not fire on a machine several times
slower than the one it was written on (a 2-core CI machine busy with other work, xdist workers
sharing it). Each limit is written for an unloaded machine and passes through ``limit()``, which
multiplies it by ``TIME_SCALE``: ``$TRITONML_TEST_TIME_SCALE`` when set (a positive number), else
3, so the suite tolerates a machine three times slower than the limits' own estimate.

A test that compares elapsed times compares ratios of repeated measurements (the minimum of
several), never a duration with a constant.
"""
from __future__ import annotations

import os

TIME_SCALE_ENV = "TRITONML_TEST_TIME_SCALE"
DEFAULT_TIME_SCALE = 3.0


def _time_scale() -> float:
    text = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not text:
        return DEFAULT_TIME_SCALE
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{TIME_SCALE_ENV}={text!r}: expected a positive number (a factor for the "
                         "tests' time limits)")
    return value


TIME_SCALE: float = _time_scale()


def limit(seconds: float) -> float:
    """``seconds``, a limit written for an unloaded machine, scaled by ``TIME_SCALE``."""
    return seconds * TIME_SCALE
