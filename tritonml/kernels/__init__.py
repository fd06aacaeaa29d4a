"""``@triton.jit`` code only: no torch, no launch logic. See tritonml/ops for the launchers."""
from .. import _backend  # noqa: F401  (the backend must be chosen before triton is imported)
