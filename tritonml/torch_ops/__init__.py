"""tritonml's ops registered with torch (``torch.ops.tritonml``): fake kernels, autograd, vmap,
and the public functions that call them. See docs/torch.md."""
from . import reduce, scan  # noqa: F401  (importing registers the ops)
