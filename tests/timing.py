"""Time limits of the tests, for a loaded machine.

A limit in a test (a subprocess's timeout, a thread's join, a barrier's wait, a process group's
timeout) is a hang detector, never a measurement: it must not fire on a machine several times
slower than the one it was written on (a 2-core CI machine busy with other work, xdist workers
sharing it). Each limit is written for an unloaded machine and passes through ``limit()``, which
multiplies it by ``TIME_SCALE``: ``$TRITONML_TEST_TIME_SCALE`` when set (a positive number), else
3, so the suite tolerates a machine three times slower than the limits' own estimate.

A test that compares elapsed times compares ratios of repeated measurements (the minimum of
several), never a duration with a constant, and is marked ``quiet_machine``: under pytest-xdist
it runs while the other workers wait between their tests (``machine_share``), since a 2-core
machine with another worker busy slows the parts of a measurement unevenly (pure Python more
than loading torch's libraries: the ratio of ``import tritonml`` to ``import torch`` went from
0.22 idle to 0.32 beside another worker).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import tempfile

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


# The workers of one pytest-xdist run share this id (None outside xdist: one process, nothing to
# share); their lock files are named by it.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_LOCK_FILES: dict = {}


def _lock_file(name: str):
    if name not in _LOCK_FILES:
        if not _LOCK_FILES:
            atexit.register(lambda: [f.close() for f in _LOCK_FILES.values()])
        path = os.path.join(tempfile.gettempdir(), f"tritonml-tests-{_RUN}-{name}.lock")
        _LOCK_FILES[name] = open(path, "a+")
    return _LOCK_FILES[name]


@contextlib.contextmanager
def machine_share(quiet: bool):
    """Run one test as the workers of this xdist run share the machine: any number of ordinary
    tests at once, a ``quiet`` one alone. A readers-writer lock over two ``flock`` files: every
    test passes the turnstile, ordinary tests hold the room shared, a quiet test holds the
    turnstile while it waits for the room exclusively (so the others, finishing their current
    test, wait at the turnstile instead of starving it) and until it is done."""
    if _RUN is None:
        yield
        return
    import fcntl  # POSIX only, as the suite's machines are

    turnstile, room = _lock_file("turnstile"), _lock_file("room")
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(room, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
    finally:
        if not quiet:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(room, fcntl.LOCK_UN)
        if quiet:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
