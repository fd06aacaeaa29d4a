"""Each check of a scan call runs once: the public functions check what must precede torch's
dispatcher, and the op's launcher skips exactly those for the same tensors
(``tritonml.launchers.scan_checks.prechecked``), but checks everything for any other caller."""
from __future__ import annotations

import collections

import pytest
import torch

import tritonml
from tritonml.core import checks as _checks
from tritonml.launchers.scan import SUM, cumulative_scan

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="runs in Triton's interpreter")


@pytest.fixture
def readable_checks(monkeypatch):
    """Counts ``check_readable`` calls by argument name."""
    counts = collections.Counter()
    original = _checks.check_readable

    def counting(name, t):
        counts[name] += 1
        return original(name, t)
    monkeypatch.setattr(_checks, "check_readable", counting)
    return counts


def test_the_op_path_checks_each_tensor_once(readable_checks):
    x = torch.randn(3, 70, requires_grad=True)   # requires grad: through the torch op
    initial = torch.randn(3)
    tritonml.cumulative_sum(x, -1, initial=initial, reverse=True)
    assert readable_checks == {"x": 1, "initial": 1}


def test_the_recurrence_op_path_checks_each_tensor_once(readable_checks):
    gates = torch.rand(2, 9, requires_grad=True)
    tokens, initial = torch.randn(2, 9), torch.randn(2)
    tritonml.linear_recurrence(gates, tokens, 1, initial=initial)
    assert readable_checks == {"gates": 1, "tokens": 1, "initial": 1}


def test_a_direct_op_call_and_the_launcher_check_everything(readable_checks):
    x = torch.randn(3, 40)
    torch.ops.tritonml.cumulative_sum(x, 1)
    cumulative_scan(torch.randn(2, 41), 0, SUM)
    assert readable_checks == {"x": 2}
    with pytest.raises(ValueError, match="axis: 2 is out of range"):
        torch.ops.tritonml.cumulative_sum(x, 2)


def test_errors_keep_their_messages_on_the_op_path():
    x = torch.randn(3, 5, requires_grad=True)
    with pytest.raises(ValueError, match="initial: shape"):
        tritonml.cumulative_sum(x, 1, initial=torch.randn(4))
    with pytest.raises(TypeError, match="reverse"):
        tritonml.cumulative_sum(x, 1, reverse=1)
