"""Chooses between compiled Triton (CUDA) and Triton's interpreter (CPU), once, at import.

Triton decides whether ``@triton.jit`` produces compiled or interpreted kernels when a kernel is
decorated, reading ``TRITON_INTERPRET``; its own standard library (``tl.cumsum`` and friends) is
decorated when triton is first imported. So the choice is made before tritonml imports triton:
this module is imported first by ``tritonml/__init__.py`` and by every kernel module.

Rules:
- ``TRITON_INTERPRET`` set by the user wins, then Triton's knob if the user set it in code.
- Otherwise, with no usable CUDA device, the interpreter is switched on (CPU tensors run the same
  kernels through it); with a CUDA device, kernels are compiled.
- If triton was already imported in compiled mode (torch imports it for ``torch.compile`` and for
  nested jagged tensors) on a machine without a GPU, the interpreter is switched on all the same:
  tritonml's kernels are decorated after this choice, so they are interpreted. Only Triton's own
  standard library (``tl.sum``, ``tl.cumsum``...) was decorated in compiled mode;
  ``triton_compat.interpreting`` runs those functions through the interpreter during each
  interpreted launch.
"""
from __future__ import annotations

import os
import sys

import torch


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return value.strip().lower() in ("1", "true", "on", "yes")


def _cuda_usable() -> bool:
    try:
        return torch.cuda.is_available()
    except Exception:  # a broken driver behaves as no GPU
        return False


def _decide() -> bool:
    requested = _env_flag("TRITON_INTERPRET")
    # Triton imported before tritonml: it reads this knob (``TRITON_INTERPRET``, unless set in
    # code) whenever a function is decorated, so tritonml's kernels follow what is chosen here.
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    if requested is None:
        requested = ((knobs is not None and bool(knobs.runtime.interpret))  # set in code
                     or not _cuda_usable())
        os.environ["TRITON_INTERPRET"] = "1" if requested else "0"
    if knobs is not None and bool(knobs.runtime.interpret) != requested:
        knobs.runtime.interpret = requested
    return requested


INTERPRET: bool = _decide()
"""True when kernels run through Triton's interpreter (CPU tensors), False when compiled (CUDA)."""


def check_device(name: str, tensor: torch.Tensor) -> None:
    """Raise if ``tensor`` lives where the chosen backend cannot run kernels."""
    if INTERPRET:
        if tensor.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name}: tensors on {tensor.device} are not supported; use cpu or cuda")
        return
    if tensor.device.type != "cuda":
        raise ValueError(
            f"{name}: tensor is on {tensor.device}, but tritonml is running compiled Triton kernels, "
            "which need CUDA tensors. Move it to cuda, or set TRITON_INTERPRET=1 before importing "
            "tritonml to run CPU tensors through Triton's interpreter.")


def describe() -> dict:
    """Versions and backend, for ``tritonml info``."""
    import numpy
    import triton

    info = {
        "tritonml backend": "interpreted (TRITON_INTERPRET=1, CPU tensors)" if INTERPRET
        else "compiled (CUDA tensors)",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
        "cuda available": str(_cuda_usable()),
    }
    if _cuda_usable():
        props = torch.cuda.get_device_properties(0)
        info["device"] = f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs)"
    else:
        info["device"] = "cpu (no CUDA device)"
    return info
