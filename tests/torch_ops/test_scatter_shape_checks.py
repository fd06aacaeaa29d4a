"""Every public scatter and index function refuses an index (bincount: an input) of the wrong
shape or rank with an error naming it, before any kernel launches: the shape rules are all
static, so none of them waits for the pass that reads the index's values (docs/scatter.md,
"Checks")."""
from __future__ import annotations

import pytest
import torch

import tritonml
from tritonml.runtime import trace

ROWS = torch.randn(6, 2)
LINE = torch.tensor([0, 2, 2, 1, 0])            # one entry short of ROWS's 6 rows
SORTED_LINE = torch.tensor([0, 0, 1, 2, 2])
WIDE = torch.zeros(6, 3, dtype=torch.int64)     # wider than src
DEEP = torch.zeros(6, 2, 1, dtype=torch.int64)  # one dim more than src

# (call, the message's start): each index is in range (and sorted where asked), so only its
# shape is wrong, and reading its values would find nothing to refuse
CASES = {
    "scatter_reduce, rank": (lambda: tritonml.scatter_reduce(torch.zeros(4, 2), 0, LINE, ROWS,
                                                             "sum"), "index: must have as many"),
    "scatter_reduce, size": (lambda: tritonml.scatter_reduce(torch.zeros(4, 2), 0, WIDE, ROWS,
                                                             "amax"), "index: size 3 of dim 1"),
    "scatter_add, rank": (lambda: tritonml.scatter_add(torch.zeros(4, 2), 0, DEEP, ROWS),
                          "index: must have as many"),
    "scatter_add, size": (lambda: tritonml.scatter_add(torch.zeros(4, 2), 0, WIDE, ROWS),
                          "index: size 3 of dim 1"),
    "index_add, rank": (lambda: tritonml.index_add(torch.zeros(4, 2), 0, WIDE[:, :2], ROWS),
                        "index: must be 1-D"),
    "index_reduce, rank": (lambda: tritonml.index_reduce(torch.zeros(4, 2), 0, WIDE[:, :2], ROWS,
                                                         "mean"), "index: must be 1-D"),
    "bincount, rank": (lambda: tritonml.bincount(WIDE), "input: must be 1-D"),
    "bincount, weights": (lambda: tritonml.bincount(LINE, torch.ones(6)), "weights: must have"),
    "scatter, size": (lambda: tritonml.scatter(ROWS, LINE, 0, dim_size=4),
                      "index: shape (5, 1) does not broadcast"),
    "scatter, rank": (lambda: tritonml.scatter(ROWS, DEEP, 0, dim_size=4, reduce="mean"),
                      "index: has 3 dims"),
    "scatter_max, size": (lambda: tritonml.scatter_max(ROWS, LINE, 0, dim_size=4),
                          "index: shape (5, 1)"),
    "scatter_min, rank": (lambda: tritonml.scatter_min(ROWS, DEEP, 0), "index: has 3 dims"),
    "segment_coo, size": (lambda: tritonml.segment_coo(torch.randn(6), SORTED_LINE,
                                                       dim_size=3), "index: shape (5,)"),
    "segment_coo, size of rows": (lambda: tritonml.segment_coo(ROWS.t(), SORTED_LINE),
                                  "index: shape (5, 1)"),
    "segment_coo, rank": (lambda: tritonml.segment_coo(torch.randn(6), SORTED_LINE.reshape(1, 5),
                                                       dim_size=3, reduce="max"),
                          "index: has 2 dims"),
    "segment_max_coo, size": (lambda: tritonml.segment_max_coo(torch.randn(6), SORTED_LINE),
                              "index: shape (5,)"),
    "segment_min_coo, rank": (lambda: tritonml.segment_min_coo(torch.randn(6),
                                                               SORTED_LINE.reshape(1, 5)),
                              "index: has 2 dims"),
}


def test_wrong_shapes_raise_before_any_launch():
    # one function for all: each case is a check that launches nothing, and the fast tier keeps
    # every one
    failures = []
    for name, (call, message) in CASES.items():
        with trace.record() as rec:
            try:
                call()
            except ValueError as error:
                if not str(error).startswith(message):
                    failures.append(f"{name}: {error}")
            else:
                failures.append(f"{name}: nothing raised")
        if rec.launches:
            failures.append(f"{name}: {[launch.name for launch in rec.launches]} launched "
                            "before the error")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("form", (tritonml.scatter, tritonml.segment_coo))
def test_right_shapes_still_launch(form):
    # the same arguments but for the index's length run (the test above is not vacuous)
    with trace.record() as rec:
        form(torch.randn(6), torch.tensor([0, 0, 1, 2, 2, 2]), dim_size=3)
    assert rec.launches
