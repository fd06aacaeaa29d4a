"""The launch guard (``tritonml.runtime.relaunch.spill_free_meta``) through Triton's own
``JITFunction.warmup``, without a GPU: a stand-in driver targets sm_<arch> and, where CUDA's
driver reports a loaded kernel's registers and local bytes (``CompiledKernel.n_regs`` and
``n_spills``), reads them from the compiled cubin (``cuobjdump -res-usage``: registers, stack and
local bytes). Run as ``python -m tests.guard_stand_in_driver`` in a compiled-mode process
(TRITON_INTERPRET=0) with {"arch": ..., "launches": [descriptions]} (tritonml/bench/gpu_compile.py)
on stdin; prints the ``maxnreg`` the guard picks for each launch (null: ptxas's own choice)."""
import json
import sys

import torch

from tritonml.bench import gpu_compile  # (before triton: tritonml chooses the mode)
from tritonml.launchers import segment  # noqa: F401  (registers segment_kernel with the guard)
from tritonml.runtime import relaunch

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402


class _Utils:
    def get_device_properties(self, device):
        return {"max_shared_mem": 227 * 1024, "multiprocessor_count": 132,
                "max_num_regs": 65536, "warpSize": 32}

    def load_binary(self, name, cubin, shared, device):
        usage = gpu_compile._resource_usage(cubin)
        spilled = usage.get("stack_bytes", 0) + usage.get("local_bytes", 0)
        return None, None, usage["registers"], spilled, 1024


class StandInDriver:
    """What ``JITFunction.run(warmup=True)`` and ``CompiledKernel._init_handles`` ask of a
    driver, for one device of sm_<arch> that launches nothing."""

    def __init__(self, arch: int):
        self.target = GPUTarget("cuda", arch, 32)
        self.utils = _Utils()

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target

    def launcher_cls(self, src, metadata):
        return None


def _tensors(value):
    """The description's stand-ins as torch tensors (the guard compiles with mock tensors in
    their place, by dtype)."""
    if isinstance(value, gpu_compile._FakeTensor):
        return torch.empty(1, dtype=value.dtype)
    if isinstance(value, tuple):
        return tuple(_tensors(v) for v in value)
    return value


def main() -> None:
    request = json.load(sys.stdin)
    driver.set_active(StandInDriver(request["arch"]))
    chosen = []
    for desc in request["launches"]:
        kernel = gpu_compile._kernel(desc["kernel"])
        args = tuple(_tensors(gpu_compile._rebuild_value(a)) for a in desc["args"])
        meta = {k: gpu_compile._rebuild_value(v) for k, v in desc["meta"].items()}
        chosen.append(relaunch.spill_free_meta(kernel, (1,), args, meta).get("maxnreg"))
    print(json.dumps(chosen))


if __name__ == "__main__":
    main()
