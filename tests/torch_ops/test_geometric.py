"""A torch_geometric training step under ``tritonml.use_tritonml(devices=("cpu",))``: every
aggregation (torch_geometric's in-place ``scatter_add_`` and ``scatter_reduce_``, called while
autograd records) runs tritonml's kernels, the outputs and parameter gradients are torch's own
(torch_geometric without routing, the oracle) within float32's rounding, and two runs give the
same bits."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tritonml.routing import deterministic_routing, use_tritonml
from tritonml.runtime import trace as _trace
from tests.routing_reset import no_routing_after_each_test  # noqa: F401 (autouse)

with warnings.catch_warnings():   # torch_geometric's import calls torch.jit.script, deprecated
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
    from torch_geometric.nn import (GATConv, GCNConv, GINConv, SAGEConv, global_max_pool,
                                    global_mean_pool)

CPU = ("cpu",)
N_NODES, N_EDGES, FEATURES = 12, 40, 8
# float32: each output and gradient element is a sum of at most a few dozen products of values of
# order 1, added in another order than torch's (tritonml sums each group in a fixed order):
# rounding bounded by about n * eps * |terms| with n ~ 50, eps ~ 1.2e-7 (seen: at most 2e-7 of
# max(|torch's value|, 1)); the float32 tolerance docs/routing.md states for the scatter routes
RTOL = ATOL = 1e-5

# torch's scatter and index reductions, as routing sees them (Tensor methods, in place or not)
AGGREGATIONS = frozenset({
    torch.Tensor.scatter_add_, torch.Tensor.scatter_add, torch.scatter_add,
    torch.Tensor.scatter_reduce_, torch.Tensor.scatter_reduce, torch.scatter_reduce,
    torch.Tensor.index_add_, torch.Tensor.index_add, torch.index_add,
    torch.Tensor.index_reduce_, torch.Tensor.index_reduce, torch.index_reduce,
})


class AggregationLaunches(TorchFunctionMode):
    """Entered above routing's mode: each of torch's scatter and index reductions called, and
    whether tritonml's kernels launched while it ran (``record``: the trace being recorded)."""

    def __init__(self, record):
        super().__init__()
        self.record, self.calls = record, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        before = len(self.record.launches)
        result = func(*args, **(kwargs or {}))
        if func in AGGREGATIONS:
            self.calls.append((func.__name__, len(self.record.launches) > before))
        return result


def graph():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N_NODES, FEATURES, generator=g)
    edge_index = torch.randint(0, N_NODES, (2, N_EDGES), generator=g)
    batch = torch.arange(N_NODES) * 2 // N_NODES   # two graphs of six nodes
    return x, edge_index, batch


def layer(name):
    torch.manual_seed(1)
    if name == "GCNConv":
        return GCNConv(FEATURES, FEATURES)
    if name.startswith("SAGEConv"):
        return SAGEConv(FEATURES, FEATURES, aggr=name[len("SAGEConv_"):])
    if name == "GINConv":
        return GINConv(torch.nn.Sequential(torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU(),
                                           torch.nn.Linear(FEATURES, FEATURES)))
    return GATConv(FEATURES, FEATURES // 2, heads=2)


# a layer's aggregations: its own, and those of the two poolings (one each)
LAYERS = ("GCNConv", "SAGEConv_mean", "SAGEConv_max", "GINConv", "GATConv")


def training_step(name, routing):
    """Forward (the layer, then global mean and max pooling), a loss, backward: the outputs, the
    gradients of the parameters and of the node features, and the aggregations seen."""
    model = layer(name)
    x, edge_index, batch = graph()
    x.requires_grad_()
    with _trace.record() as rec:
        with routing():
            with AggregationLaunches(rec) as seen:
                h = model(x, edge_index).relu()
                pooled = torch.cat((global_mean_pool(h, batch), global_max_pool(h, batch)), 1)
                loss = (pooled * torch.linspace(-1, 1, pooled.shape[1])).sum()
        loss.backward()
    grads = [p.grad for p in model.parameters()] + [x.grad]
    return [h.detach(), pooled.detach()], grads, seen.calls


def deterministic():
    """Deterministic mode alone, on the cpu (its default devices are cuda)."""
    class Block:
        def __enter__(self):
            deterministic_routing(True, devices=CPU)
            torch.use_deterministic_algorithms(True)

        def __exit__(self, *exc):
            torch.use_deterministic_algorithms(False)
            deterministic_routing(True, devices="cuda")
    return Block()


class NoRouting:
    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


def test_a_training_step_runs_every_aggregation_on_tritonml_with_torchs_results():
    for name in LAYERS:   # (one test, not parametrized: the fast tier runs every layer)
        want_outputs, want_grads, torch_calls = training_step(name, NoRouting)
        first = training_step(name, lambda: use_tritonml(CPU))
        second = training_step(name, lambda: use_tritonml(CPU))
        outputs, grads, calls = first
        # the same aggregations as torch's run, each launching tritonml's kernels: the layer's
        # own (at least one) and the poolings' (mean: counts and sums; max: one)
        assert [c for c, _ in calls] == [c for c, _ in torch_calls] and len(calls) >= 4, name
        assert all(launched for _, launched in calls), (name, calls)
        assert not any(launched for _, launched in torch_calls), name
        assert all(g is not None for g in grads + want_grads), name
        for got, want in zip(outputs + grads, want_outputs + want_grads):
            torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, msg=name)
        for a, b in zip(first[0] + first[1], second[0] + second[1]):
            assert torch.equal(a, b), name              # the same bits run to run


def test_deterministic_mode_runs_the_aggregations_on_tritonml():
    """Deterministic mode routes the scatter ops without use_tritonml, in place under autograd
    too (the cpu named as its device here; cuda by default)."""
    outputs, grads, calls = training_step("SAGEConv_max", deterministic)
    want_outputs, want_grads, _ = training_step("SAGEConv_max", NoRouting)
    assert calls and all(launched for _, launched in calls), calls
    for got, want in zip(outputs + grads, want_outputs + want_grads):
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
