"""Triton 3.6's interpreter under numpy 2.4: a tensor used as an index (a loop bound) converted
as Triton 3.7.1 and later convert it, installed at import when tritonml interprets on Triton
before 3.8.
"""
from __future__ import annotations

import importlib

from .. import backend as _backend
from .registry import INTERPRETER_MODULE, private
from .versions import RELEASE

# A scalar in the interpreter is a one-element numpy array of shape (1,), and Triton 3.6 turns it
# into a Python int (``range(start, tensor_end)``, an index) with ``int(data)``, which numpy 2.4
# refuses for arrays of rank > 0 ("only 0-dimensional arrays can be converted to Python scalars":
# every kernel with a loop failed); 3.7.1 and later read ``int(data.squeeze())``.
# ``_patch_lang_tensor`` installs that method on every launch, so before 3.8 it is wrapped to
# install the later one (on 3.7.1 the same method again; 3.7.0, torch 2.12.0's, was not looked at).
# Checked: 3.6.0, 3.7.1, 3.8.0 (``triton/runtime/interpreter.py``, ``_patch_lang_tensor``).
INDEX_NEEDS_SQUEEZE = RELEASE < (3, 8)


def _squeezing_index_patch(original):
    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    patch_lang_tensor.__wrapped__ = original
    return patch_lang_tensor


if INDEX_NEEDS_SQUEEZE and _backend.INTERPRET:
    _interpreter = importlib.import_module(INTERPRETER_MODULE)
    _interpreter._patch_lang_tensor = _squeezing_index_patch(
        private(f"{INTERPRETER_MODULE}._patch_lang_tensor"))
