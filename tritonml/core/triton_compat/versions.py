"""Which Triton release is installed, the releases tritonml supports, and what depends on it.

A Triton outside ``SUPPORTED_RELEASES`` gets one warning when this module is imported. The flags
choose the form of the constructs Triton 3.6 compiles badly or not at all (what torch 2.11 pins,
and the H100 machines lent for benchmarks carry): kernels/combine.py ``row_of``,
kernels/lookback.py ``wait_published``. Only ``triton.__version__`` is read here.
"""
from __future__ import annotations

import triton


def release(version: str) -> tuple:
    """(major, minor) of a Triton version string ("3.6.0", "3.9.0+git1234")."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


RELEASE = release(triton.__version__)

# The Triton releases tritonml is tested with: the oldest is what torch 2.11 pins, the newest what
# torch 2.15 pins (README, "Supported versions"; tests/test_supported_versions.py). pyproject.toml
# caps neither end's future (a newer torch may pin a newer Triton): a Triton outside the range
# gets one warning at import instead.
SUPPORTED_RELEASES = ((3, 6), (3, 9))


def unsupported_triton_message(version: str):
    """The warning for Triton ``version``, or None where it is in ``SUPPORTED_RELEASES``."""
    oldest, newest = SUPPORTED_RELEASES
    if oldest <= release(version) <= newest:
        return None
    return (f"tritonml is tested with Triton {oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]} "
            f"(what torch 2.11 to 2.15 pin), and triton {version} is installed: kernels may fail "
            f"to compile or run")


def _warn_if_unsupported() -> None:
    import warnings

    message = unsupported_triton_message(triton.__version__)
    if message is not None:
        # Attributed to the module that imported tritonml.core.triton_compat: above it are this
        # module and the package's __init__, which imports this module first (import machinery
        # frames are not counted).
        warnings.warn(message, RuntimeWarning, stacklevel=4)


_warn_if_unsupported()

# ``tl.gather`` of one row of a tile compiles to a few shuffles from Triton 3.8 on. Triton 3.6
# (what the H100 machines lent for benchmarks carry) lowers it to one warp shuffle per element and
# source register: 32,768 in a 4,096-row tile, and minutes of ptxas. There ``row_of`` sums the
# row's bits instead, which costs a few more registers or loads in flight elsewhere (measured on
# 3.9: tritonml/kernels/combine.py), so it is not the choice where the gather is cheap.
FAST_ROW_GATHER = RELEASE >= (3, 8)

# A look-back's wait loop that carries the status words it polls compiles from Triton 3.8 on, with
# a thread's loads of several words all in flight in each poll. Triton 3.6's layout pass
# (``TritonGPURemoveLayoutConversions``) fails on it (the chunked scan's float16 rows), so there
# the loop carries a count of unpublished words instead (``kernels.lookback.wait_counting``).
LOOP_CARRIES_STATUS = RELEASE >= (3, 8)
