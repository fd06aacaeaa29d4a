"""tests/timing.py's ``machine_share``: under pytest-xdist a ``quiet_machine`` test runs alone,
and ordinary tests run together. Checked with three processes sharing one run id, each writing
when it entered and left."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.timing import limit

REPO = Path(__file__).resolve().parent.parent
_HOLD = ("import json, sys, time\n"
         "from tests.timing import machine_share\n"
         "quiet, delay, hold = sys.argv[1] == 'quiet', float(sys.argv[2]), float(sys.argv[3])\n"
         "time.sleep(delay)\n"
         "with machine_share(quiet):\n"
         "    start = time.monotonic()\n"
         "    time.sleep(hold)\n"
         "    print(json.dumps([start, time.monotonic()]))\n")


def _spans(kinds):
    env = dict(os.environ, PYTEST_XDIST_TESTRUNUID=f"share-{uuid.uuid4().hex}")
    procs = [subprocess.Popen([sys.executable, "-c", _HOLD, kind, str(delay), str(hold)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
             for kind, delay, hold in kinds]
    out = [proc.communicate(timeout=limit(60))[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return [json.loads(text.strip().splitlines()[-1]) for text in out]


def test_a_quiet_test_waits_for_the_running_ones_and_holds_off_the_next():
    # an ordinary test holds the room; a quiet one arrives, then another ordinary one
    first, quiet, later = _spans([("shared", 0.0, 1.5), ("quiet", 0.5, 1.0), ("shared", 1.0, 0.2)])
    assert quiet[0] >= first[1]      # entered after the running test left
    assert later[0] >= quiet[1]      # the one that came after it waited at the turnstile


def test_ordinary_tests_share_the_room():
    one, two = _spans([("shared", 0.0, 1.5), ("shared", 0.3, 0.2)])
    assert two[0] < one[1]
