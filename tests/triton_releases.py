"""What the compile tests allow Triton before 3.8 to compile differently from 3.9, each with its
reason, in one place. The kernels take two other forms before 3.8
(tritonml/core/triton_compat/versions.py: ``FAST_ROW_GATHER``, ``LOOP_CARRIES_STATUS``), and 3.6's
ptxas and passes allocate otherwise (benchmarks/README.md, "A GPU session"). Checked on 3.6.0, the
oldest supported release, which ``.ci/run`` compiles every specialization with
(``pytest --compile-only``).
"""
from __future__ import annotations

import triton
from packaging.version import Version

RELEASE = Version(triton.__version__).release[:2]
BEFORE_3_8 = RELEASE < (3, 8)

# The tall look-back tile (4,096 rows) of an int64/uint64 exclusive scan keeps 16 bytes of stack
# on sm_80 (3.9: at most 8): its last-row sum of bits (``row_of`` without the gather) holds one
# more 64-bit value live across the tile's fold.
LOOKBACK_TALL_64_BIT_STACK = 16


def allowed_lookback_spill(record) -> bool:
    case = record["case"]
    return (BEFORE_3_8 and case["regime"] == "lookback tall" and record["arch"] == 80
            and case["dtype"] in ("int64", "uint64") and case["exclusive"]
            and not record.get("local_bytes", 0)
            and record.get("stack_bytes", 0) <= LOOKBACK_TALL_64_BIT_STACK)


# Chunked scans keep an 8-byte stack frame that their loops touch two to four times (the
# count-carrying poll, ``kernels.lookback.wait_counting``; four in the int32 exclusive rows on sm_80):
# stack accesses of a counter, never a spill of data.
CHUNKED_STACK_BYTES, CHUNKED_LOOP_ACCESSES = 8, 4


def allowed_chunked_stack(record) -> bool:
    return (BEFORE_3_8 and not record.get("local_bytes", 0)
            and record.get("stack_bytes", 0) <= CHUNKED_STACK_BYTES
            and record["local_accesses_in_loops"] <= CHUNKED_LOOP_ACCESSES)


# The segment kernel's SUM reduction of a 1-D float32 x, a program walking several tiles, takes
# ptxas's 255 registers on sm_90 (3.9: 177, what the time model charges; two programs of 4
# warps per SM either way); its forward sum scan 128 (3.9: 64): two programs per SM instead of
# four. Segmented scans of a 1-D x run slower on 3.6 than the model says.
SEGMENT_FLAT_SUM_REGISTERS_SM90 = 255
SEGMENT_FLAT_SCAN_REGISTERS_SM90 = 128
