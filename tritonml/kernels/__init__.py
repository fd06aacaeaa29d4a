"""``@triton.jit`` code only: no torch, no launch logic. See tritonml/launchers for the
launchers."""
# the backend must be chosen before any kernel is defined
from ..core import backend as _backend  # noqa: F401
