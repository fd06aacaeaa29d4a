"""A torch dispatch mode that logs the ops a block dispatches, for tests that check which ops
(tritonml's own or torch's) a call or its gradient runs."""
from torch.utils._python_dispatch import TorchDispatchMode


class OpLog(TorchDispatchMode):
    """``with OpLog() as log: ...``; ``log.ops``: each dispatched op's name, in order."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))
