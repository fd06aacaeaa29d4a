"""The routing tests' shared reset: imported by a test module, this autouse fixture leaves
routing as tritonml starts (nothing routed, deterministic mode off, deterministic routing on for
CUDA) after each of its tests, whatever the test switched on."""
import pytest
import torch

from tritonml.routing import deterministic_routing, disable


@pytest.fixture(autouse=True)
def no_routing_after_each_test():
    yield
    disable()
    torch.use_deterministic_algorithms(False)
    deterministic_routing(True, devices="cuda")
