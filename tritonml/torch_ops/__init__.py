"""tritonml's ops registered with torch (``torch.ops.tritonml``): fake kernels, autograd, vmap,
and the public functions that call them. See docs/torch.md."""
# importing registers the ops
from . import cumextreme, extremes, moments, nanreduce, reduce, scan  # noqa: F401
