"""The segment kernel's specializations a GPU runs, as recorded launches (tritonml/kernels/
segment.py): every reduce function and scan, each dtype class, both directions, the layouts that
change the tile (the segmented axis contiguous, or strided under a contiguous inner dim), with
the configs chosen for an H100. Used by tests/kernels/test_segment_compile.py and the compile facts."""
from __future__ import annotations

import itertools

import torch

from tritonml import reductions
from tritonml.kernels.combine import compose_affine
from tritonml.bench.gpu_compile import describe
from tritonml.launchers import segment as S
from tritonml.records.builtin_scans import PRODUCT, SUM
from tritonml.records.builtin_reductions import RECORDS, record_of
from tritonml.runtime import trace as _trace
from tritonml_autotune import devices

# (name, shape, axis): segments along one contiguous axis (a [1024, 1] tile), along the contiguous
# axis of many rows (a [16, 64] tile whose inner dim is the rows), and along a strided axis
LAYOUTS = {"flat": ((1 << 20,), 0), "rows": ((64, 1 << 16), 1),
           "columns": ((1 << 14, 256), 0), "flat walk": ((1 << 22,), 0)}
# The flat layouts a 1-D x takes: 2^20 elements are one tile a program on an H100 (``chunk_tiles``
# 1, which Triton specializes as a constant: the walk has no loop); 2^22 are several, the loop
# live, as every larger x runs (a reduction's walk holds more registers than the one tile)
FLAT_LAYOUTS = ("flat", "flat walk")
# Every function on float32 (a float64 state); the other dtype classes (a half type's float32
# state, integers' 64-bit one) on a few; the strided-axis tile on a few more.
REDUCE_DTYPES = (torch.float32,)
ROW_CASES = (("ARGMAX", torch.bfloat16), ("SUM", torch.int32), ("MAX", torch.uint8),
             ("LOG_SUM_EXP", torch.float16))
SCAN_DTYPES = (torch.float32, torch.int64)
COLUMN_CASES = (("SUM", torch.float32), ("ARGMAX", torch.float16), ("LOG_SUM_EXP", torch.float32))


def _record(call, case: dict) -> list:
    with devices.targeting("H100"), _trace.record(execute=False) as rec:
        call()
    descriptions = []
    for launch in rec.launches:
        desc = describe(launch)
        desc["case"] = case
        descriptions.append(desc)
    return descriptions


def segment_launches(layouts=tuple(LAYOUTS)) -> list:
    """Flat and rows (a contiguous axis): every reduce function on float32 and ``ROW_CASES``,
    the float32 scans in both directions, inclusive and exclusive, and a reversed exclusive scan
    of the other dtypes, a user reduction (Welford), ``initial`` and a user combine (affine
    maps); columns: ``COLUMN_CASES`` and a reversed exclusive scan."""
    descriptions = []
    for layout in layouts:
        shape, axis = LAYOUTS[layout]
        offsets = torch.tensor([0, 5, 5, shape[axis] // 2, shape[axis]], dtype=torch.int64)
        rows = layout in FLAT_LAYOUTS + ("rows",)
        dtypes = tuple(dict.fromkeys(REDUCE_DTYPES + tuple(d for _, d in ROW_CASES + COLUMN_CASES)))
        for record, dtype in itertools.product(RECORDS.values(), dtypes):
            case = (record.name, dtype)
            wanted = (case in ROW_CASES or dtype in REDUCE_DTYPES) if rows else \
                case in COLUMN_CASES
            if not wanted:
                continue
            x = torch.empty(shape, dtype=dtype)
            descriptions += _record(
                lambda: S.segment_reduce_axis(x, record, offsets, axis),
                dict(layout=layout, op=record.name, dtype=str(dtype)))
        for record, dtype, reverse, exclusive in itertools.product(
                (SUM, PRODUCT), SCAN_DTYPES, (False, True), (False, True)):
            if (not rows or dtype != torch.float32) and (record, reverse, exclusive) != (
                    SUM, True, True):
                continue
            x = torch.empty(shape, dtype=dtype)
            descriptions += _record(
                lambda: S.segment_scan_axis(x, record, offsets, axis, reverse=reverse,
                                            exclusive=exclusive),
                dict(layout=layout, op=record.name, dtype=str(dtype), reverse=reverse,
                     exclusive=exclusive))
        if not rows:
            continue
        x = torch.empty(shape, dtype=torch.float32)
        descriptions += _record(lambda: S.segment_reduce_axis(x, reductions.welford, offsets,
                                                              axis),
                                dict(layout=layout, op="welford", dtype="torch.float32"))
        descriptions += _record(lambda: S.segment_reduce_axis(x, record_of("SUM"), offsets, axis,
                                                              initial=1.5),
                                dict(layout=layout, op="SUM initial", dtype="torch.float32"))
        # a user's combine that does not commute (a linear recurrence's affine maps, two
        # tensors): chunks fold their tails in traversal order
        descriptions += _record(lambda: S.segment_associative_scan(compose_affine, (x, x), offsets,
                                                                   axis),
                                dict(layout=layout, op="affine", dtype="torch.float32"))
    return descriptions


# The scatter ops' group reductions (tritonml/torch_ops/scatter_groups.py): int64 boundaries, at
# the H100 config they take on every device; a GNN's edges x features along the edges (width 1:
# the flat tile; 16 and 64: a strided axis under contiguous features), each long enough that a
# program walks several tiles (a chunk of one tile specializes its walk to no loop at all)
GROUP_LAYOUTS = {"width 1": ((1 << 22,), 0), "width 16": ((1 << 20, 16), 0),
                 "width 64": ((1 << 18, 64), 0)}
GROUP_FUNCTIONS = (("SUM", None), ("MAX", None), ("MIN", None), ("MULTIPLY", None),
                   ("AVERAGE", 0.0), ("ARGMAX", None))


# torch_scatter's min and max: an empty group's 0 written by the kernel, folded into no other
GROUP_EMPTY = (("MAX", 0), ("MIN", 0))


def group_launches() -> list:
    """The group reductions of the scatter ops on float32, every function they run, at each
    width."""
    descriptions = []
    for layout, (shape, axis) in GROUP_LAYOUTS.items():
        offsets = torch.tensor([0, 5, 5, shape[axis] // 2, shape[axis]], dtype=torch.int64)
        x = torch.empty(shape, dtype=torch.float32)
        for name, initial in GROUP_FUNCTIONS:
            descriptions += _record(
                lambda: S.segment_reduce_axis(x, record_of(name), offsets, axis,
                                              initial=initial),
                dict(layout=layout, op=f"group {name}", dtype=str(x.dtype)))
        for name, empty in GROUP_EMPTY:
            descriptions += _record(
                lambda: S.segment_reduce_axis(x, record_of(name), offsets, axis, empty=empty),
                dict(layout=layout, op=f"group {name} empty", dtype=str(x.dtype)))
    # segment_coo's one pass: the segments from the sorted index itself, width 1
    shape, axis = GROUP_LAYOUTS["width 1"]
    x = torch.empty(shape, dtype=torch.float32)
    ids = torch.zeros(shape[axis], dtype=torch.int64)
    calls = tuple((n, i, None) for n, i in GROUP_FUNCTIONS) + \
        tuple((n, None, e) for n, e in GROUP_EMPTY)
    for name, initial, empty in calls:
        descriptions += _record(
            lambda: S.segment_reduce_ids(x, record_of(name), ids, 1 << 18, axis,
                                         initial=initial, empty=empty),
            dict(layout="width 1 ids", op=f"group {name}" + (" empty" if empty is not None
                                                               else ""), dtype=str(x.dtype)))
    return descriptions
