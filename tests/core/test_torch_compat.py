"""Private torch API is used in one module, tritonml/core/torch_compat.py, and what it relies on is
there in the installed torch."""
from __future__ import annotations

import re

import pytest
import torch

from tests.private_api import REPO, offenders, uses
from tritonml.core import torch_compat as _torch_compat

COMPAT = REPO / "tritonml" / "core" / "torch_compat.py"

# Text that reaches into torch's private API: private modules and names under ``torch``, private
# names fetched with getattr, and the private attributes of tensors tritonml has needed.
PRIVATE_TORCH = re.compile("|".join((
    r"\btorch(?:\.[A-Za-z]\w*)*\._(?!_)\w*",                    # torch._C, torch.utils._x
    r"^\s*from\s+torch(?:\.[\w.]+)?\s+import\s+.*\b_[a-z]\w*",  # from torch.utils import _x
    r"\bgetattr\(\s*torch(?:\.\w+)*\s*,\s*[\"']_(?!_)",         # getattr(torch._C..., "_x")
    r"\.(?:_is_zerotensor|_version|_base|_is_view|_cdata|_typed_storage)\b",
)), re.MULTILINE)


def private_torch_uses(text: str) -> list:
    """(line number, matched text) of each private torch reference in ``text``."""
    return uses(PRIVATE_TORCH, text)


def test_installed_torch_has_every_private_name_the_compat_module_relies_on():
    assert _torch_compat.missing() == []


# Lines the scan must flag, and lines it must leave alone.
PRIVATE_LINES = (
    "from torch.utils._python_dispatch import _get_current_dispatch_mode", "t._is_zerotensor()",
    "from torch.utils import _python_dispatch", "n = torch._C._len_torch_function_stack()",
    "torch.overrides._push_mode(m)", "if torch._is_zerotensor(t):", "version = out._version",
    "enabled = torch.autograd.profiler._is_profiler_enabled",
    'level = getattr(torch.autograd.forward_ad, "_current_level", -1)',
    "from torch._subclasses.fake_tensor import FakeTensorMode",
)
PUBLIC_LINES = (
    "from torch.overrides import TorchFunctionMode", "torch.library.wrap_triton(kernel)",
    "print(torch.__version__)", "from .core import torch_compat as _torch_compat",
    "_torch_compat.is_zerotensor(t)", "import torch as _torch", "self._ptr = 1 << 20",
)


def test_the_scan_flags_private_torch_api_and_leaves_public_api_alone():
    assert [line for line in PRIVATE_LINES if not private_torch_uses(line)] == []
    assert [line for line in PUBLIC_LINES if private_torch_uses(line)] == []


def test_the_entries_answer_as_torch_does():
    assert _torch_compat.current_dispatch_mode() is None
    assert not _torch_compat.is_zerotensor(torch.zeros(2))
    t = torch.zeros(2)
    before = _torch_compat.tensor_version(t)
    t.add_(1)
    assert _torch_compat.tensor_version(t) == before + 1
    assert not _torch_compat.forward_ad_active() and not _torch_compat.profiler_enabled()
    with torch.autograd.forward_ad.dual_level():
        assert _torch_compat.forward_ad_active()
    assert _torch_compat.peek_functorch_interpreter() is None
    assert torch.func.vmap(lambda x: torch.tensor(_torch_compat.is_functorch_wrapped(x)))(t).all()


@pytest.mark.source_tree
def test_no_module_but_the_compat_module_touches_private_torch_api():
    found = offenders(PRIVATE_TORCH, COMPAT)
    assert not found, ("private torch API belongs in tritonml/core/torch_compat.py only:\n"
                       + "\n".join(found))
