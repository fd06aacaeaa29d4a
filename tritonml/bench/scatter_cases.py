"""The scatter cases of ``tritonml bench``: seeded indices, and each (entry, op) made runnable as
``cases.Prepared``.

Three workloads (``cases.SUITE``'s "scatter" group, ``Entry.scatter`` naming the form):

- **GNN aggregation**: messages ``src[E, F]`` summed, averaged or maxed into the ``N`` nodes
  their edges point at, ``tritonml.scatter(src, dst, 0, dim_size=N, reduce=...)`` with the edges
  in random order ("scatter": the index is sorted first), and ``tritonml.segment_coo(src, dst,
  dim_size=N, reduce=...)`` with the edges sorted by destination ("segment_coo": nothing is
  sorted). E = 2**22 edges into N = 2**18 nodes, F = 1, 16, 64; in-degrees from a power law
  (``gnn_index``). Quick: E = 2**12 into N = 2**8.
- **Embedding gradient**: ``tritonml.index_add(zeros(V, D), 0, token_ids, grads)``, token ids
  drawn from a Zipf law over the vocabulary (``zipf_ids``), unsorted.
- **Weighted bincount**: ``tritonml.bincount(ids, weights, minlength=bins)``, Zipf ids.

Peers (``Prepared.torch_fn`` and ``Prepared.peers``): torch's own kernels ("eager": atomics on a
GPU: ``scatter_reduce`` with ``include_self=False``, ``index_add``, ``bincount``), the same under
``torch.use_deterministic_algorithms(True)`` ("deterministic": where torch raises, the row says
so), and torch_scatter's ``scatter`` / ``segment_coo`` where it imports. ``Prepared.parts``
times the sort of an unsorted case apart: ``torch.sort`` of the index's keys as int32
(``sort_keys``), stable, and the gather of src into its order, what
tritonml/torch_ops/scatter_groups.py runs, so its share is reported,
never hidden.

Values are multiples of 1/4096 (``segment_cases.segment_values``): float64 sums of them are
exact, so the float64 references are exact.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from .segment_cases import segment_values

EDGES, NODES = 2 ** 22, 2 ** 18          # GNN: edges into nodes (16 edges a node on average)
QUICK_EDGES, QUICK_NODES = 2 ** 12, 2 ** 8
WIDTHS = (1, 16, 64)                     # GNN feature widths
EDGES_PER_NODE = EDGES // NODES
GNN_REDUCES = ("sum", "mean", "max")
DEGREE_SHAPE = 1.5          # node weights ~ Pareto(1.5) + 1: P(weight >= w) ~ w ** -1.5
TOKENS, VOCAB, EMBED_DIM = 2 ** 19, 2 ** 15, 128     # embedding gradient
QUICK_TOKENS, QUICK_VOCAB = 2 ** 11, 2 ** 7
BINCOUNT_IDS, BINS = 2 ** 24, 2 ** 16
QUICK_BINCOUNT_IDS, QUICK_BINS = 2 ** 14, 2 ** 6
ZIPF_EXPONENT = 1.1          # token frequency ~ rank ** -1.1
FORMS = ("scatter", "segment_coo", "index_add", "bincount")
SORTED_FORMS = ("segment_coo",)
# torch_scatter's reduce name -> torch.scatter_reduce's
TORCH_REDUCE = {"sum": "sum", "mean": "mean", "max": "amax"}


# ---------------------------------------------------------------------------------------------
# Seeded indices
# ---------------------------------------------------------------------------------------------
def gnn_index(edges: int, nodes: int, seed: int = 0) -> torch.Tensor:
    """int64 destination node of each of ``edges`` edges, in random (edge) order: each edge picks
    its node with probability proportional to the node's weight, weights Pareto(DEGREE_SHAPE) + 1
    drawn with ``seed``: power-law in-degrees (a few hubs, many nodes with a handful of edges,
    some with none)."""
    rng = np.random.default_rng(seed)
    weights = rng.pareto(DEGREE_SHAPE, nodes) + 1.0
    return torch.from_numpy(rng.choice(nodes, edges, p=weights / weights.sum()).astype(np.int64))


def zipf_ids(count: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """int64 ids in [0, vocab), id r drawn with probability proportional to (r + 1) ** -1.1
    (token frequencies), in random order."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, vocab + 1, dtype=np.float64) ** -ZIPF_EXPONENT
    return torch.from_numpy(rng.choice(vocab, count, p=p / p.sum()).astype(np.int64))


@dataclass(frozen=True)
class Sizes:
    """One case's sizes: ``elements`` positions scattered (edges, tokens, ids) into ``groups``
    places (nodes, vocabulary rows, bins), each a row of ``width`` values."""
    elements: int
    groups: int
    width: int


def sizes(form: str, shape: tuple) -> Sizes:
    """The sizes an entry of ``form`` has at ``shape``: (edges, width) for the GNN forms, (tokens,
    embedding dim) for index_add, (ids,) for bincount; the groups in the same proportion as at
    the full size."""
    if form in ("scatter", "segment_coo"):
        edges, width = shape
        return Sizes(edges, max(1, edges // EDGES_PER_NODE), width)
    if form == "index_add":
        tokens, width = shape
        return Sizes(tokens, max(1, tokens * VOCAB // TOKENS), width)
    (ids,) = shape
    return Sizes(ids, max(1, ids * BINS // BINCOUNT_IDS), 1)


def index_of(form: str, size: Sizes) -> torch.Tensor:
    """The seeded index of a case: sorted for the sorted forms."""
    if form in ("scatter", "segment_coo"):
        index = gnn_index(size.elements, size.groups)
        return torch.sort(index)[0] if form in SORTED_FORMS else index
    return zipf_ids(size.elements, size.groups)


# ---------------------------------------------------------------------------------------------
# Counting the eager pipeline
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def observed_as_eager():
    """While this is active, tritonml's questions "is a torch dispatch mode active?" (asked to
    skip the checks that read values under tracing, and to go through the registered op rather
    than the launcher) do not see a mode that only observes (``observes_only``, the byte
    counter's): the counted run is the eager pipeline a user's call runs, checks included, the
    segment kernel launched directly. Bench-only: it swaps ``torch_compat.current_dispatch_mode``
    for the block, as the byte counter's own check (``runtime.trace.runs_eagerly``) already
    allows observers."""
    from ..core import torch_compat

    real = torch_compat.current_dispatch_mode

    def seen():
        mode = real()
        return None if getattr(mode, "observes_only", False) else mode

    torch_compat.current_dispatch_mode = seen
    try:
        yield
    finally:
        torch_compat.current_dispatch_mode = real


# Torch ops of the pipeline that are the sort's share: the sort of the index (and the cast of its
# keys to int32 just before it), and the gather of src into its order
# (tritonml/torch_ops/scatter_groups.py, ``sort_into_groups``).
SORT_OPS = ("aten.sort.stable",)
KEY_CAST_OP = "aten._to_copy.default"
GATHER_OPS = ("aten.index_select.default",)


def sort_keys(index: torch.Tensor, groups: int) -> torch.Tensor:
    """The keys the pipeline sorts: the index as int32 where the groups fit (fewer than 2**31:
    half a radix sort's passes of int64 keys), as ``scatter_groups`` casts them."""
    return index.to(torch.int32) if groups <= 2 ** 31 - 1 else index


def sort_share(trace) -> dict:
    """The row fields of a counted run's sort: the bytes counted for the keys' cast, the sort and
    the gather (the sort counted as the interpreter sees it, its input and outputs once: what a
    radix sort on a GPU moves is modeled in ``scatter_model``), and their share of all bytes
    counted."""
    work = trace.torch_work
    moved = sum(w.bytes for k, w in enumerate(work)
                if w.op in SORT_OPS + GATHER_OPS
                or (w.op == KEY_CAST_OP and k + 1 < len(work) and work[k + 1].op in SORT_OPS))
    total = trace.total_bytes - trace.reread_bytes
    return {"sort_bytes": moved, "sort_share_bytes": moved / total if total else 0.0}


# ---------------------------------------------------------------------------------------------
# References and peers
# ---------------------------------------------------------------------------------------------
def reference(reduce: str, src: torch.Tensor, index: torch.Tensor, groups: int) -> torch.Tensor:
    """torch_scatter's result in float64, each group's rows of ``src`` reduced (an empty group
    0): sums by ``index_add_``, means divided by the count, maxima by ``scatter_reduce_``."""
    x = src.to(torch.float64)
    shape = (groups, *x.shape[1:])
    if reduce == "max":
        spread = index.reshape(-1, *[1] * (x.dim() - 1)).expand(x.shape)
        out = torch.full(shape, -math.inf, dtype=torch.float64).scatter_reduce_(0, spread, x,
                                                                               "amax")
        return torch.where(torch.isinf(out), torch.zeros_like(out), out)
    sums = torch.zeros(shape, dtype=torch.float64).index_add_(0, index, x)
    if reduce == "mean":
        counts = torch.bincount(index, minlength=groups).clamp(min=1).to(torch.float64)
        return sums / counts.reshape(-1, *[1] * (x.dim() - 1))
    return sums


def deterministic(fn):
    """``fn`` run under ``torch.use_deterministic_algorithms(True)`` (the previous setting
    restored): torch raises where it has no deterministic kernel, and the row says so."""
    def run(*args):
        before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            return fn(*args)
        finally:
            torch.use_deterministic_algorithms(before)
    return run


def torch_scatter_peer(form: str, reduce: str, groups: int):
    """torch_scatter's function for the GNN forms, None where it does not import."""
    try:
        import torch_scatter  # type: ignore[import-not-found]
    except Exception:   # not installed, or built for another torch
        return None
    if form == "segment_coo":
        return lambda s, i: torch_scatter.segment_coo(s, i, dim_size=groups, reduce=reduce)
    return lambda s, i: torch_scatter.scatter(s, i, 0, dim_size=groups, reduce=reduce)


# ---------------------------------------------------------------------------------------------
# One (entry, op, shape) made runnable
# ---------------------------------------------------------------------------------------------
def prepare_scatter(entry, op: str, dtype: torch.dtype, shape: tuple, device):
    """A ``cases.Prepared`` for a "scatter" entry (``entry.scatter`` names the form) at
    ``shape``."""
    from ..torch_ops import scatter as tritonml_scatter, scatter_forms as tritonml_forms
    from .cases import Prepared

    form = entry.scatter
    size = sizes(form, shape)
    index = index_of(form, size).to(device)
    n = size.groups
    if form == "bincount":
        weights = segment_values(size.elements, dtype).to(device)
        ideal = (index.numel() * 8 + weights.numel() * weights.element_size()
                 + n * weights.element_size())

        def run():
            return tritonml_scatter.bincount(index, weights, minlength=n)

        def bincount_fn(i, w):
            return torch.bincount(i, w, minlength=n)

        return _prepared(Prepared, run, bincount_fn, (index, weights),
                         lambda: reference("sum", weights, index, n).to(weights.device),
                         {"input": weights, "index": index}, ideal,
                         parts={"sort": lambda: weights.index_select(
                             0, torch.sort(sort_keys(index, n), stable=True)[1])})
    src = segment_values(size.elements * size.width, dtype).reshape(
        size.elements, size.width).to(device)
    src_bytes = src.numel() * src.element_size()
    out_bytes = n * size.width * src.element_size()
    if form == "index_add":
        base = torch.zeros(n, size.width, dtype=dtype, device=device)
        # input is read and the result written: both count, as index_add returns a new tensor
        ideal = src_bytes + index.numel() * 8 + 2 * out_bytes

        def run():
            return tritonml_scatter.index_add(base, 0, index, src)

        def index_add_fn(b, i, s):
            return b.index_add(0, i, s)

        return _prepared(Prepared, run, index_add_fn, (base, index, src),
                         lambda: reference("sum", src, index, n).to(device),
                         {"input": src, "index": index}, ideal,
                         parts={"sort": lambda: src.index_select(
                             0, torch.sort(sort_keys(index, n), stable=True)[1])})
    ideal = src_bytes + index.numel() * 8 + out_bytes
    name = TORCH_REDUCE[op]
    if form == "segment_coo":
        def run():
            return tritonml_forms.segment_coo(src, index, dim_size=n, reduce=op)
    else:
        def run():
            return tritonml_forms.scatter(src, index, 0, dim_size=n, reduce=op)

    def torch_fn(s, i):
        spread = i.reshape(-1, 1).expand(s.shape)
        return torch.zeros(n, s.shape[1], dtype=s.dtype, device=s.device).scatter_reduce_(
            0, spread, s, name, include_self=False)

    peers = {}
    scatter_peer = torch_scatter_peer(form, op, n)
    if scatter_peer is not None:
        peers["torch_scatter"] = scatter_peer
    parts = {} if form in SORTED_FORMS else {
        "sort": lambda: src.index_select(0, torch.sort(sort_keys(index, n), stable=True)[1])}
    return _prepared(Prepared, run, torch_fn, (src, index),
                     lambda: reference(op, src, index, n).to(device),
                     {"input": src, "index": index}, ideal, peers=peers, parts=parts)


def _prepared(Prepared, run, torch_fn, inputs, expected, regions, ideal, *,
              peers: Optional[dict] = None, parts: Optional[dict] = None):
    def counted():
        with observed_as_eager():
            return run()

    return Prepared(run, torch_fn, inputs, expected, None, regions, ideal, False, counted,
                    peers={"deterministic": deterministic(torch_fn), **(peers or {})},
                    parts=parts or {}, trace_fields=sort_share if parts else None)
