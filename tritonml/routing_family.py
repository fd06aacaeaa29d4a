"""How routing (tritonml/routing.py) reads and runs torch's scan and reduce family: torch's
argument signatures for ``Route.arguments``, var's ``correction`` spellings for ``Route.read``,
and one ``Route.family`` function per torch function, calling the tritonml public function of
the same meaning (tritonml/torch_ops/: cumextreme, extremes, moments, nanreduce), which returns
torch's result type.

A family function takes ``(x, dims, keepdim, arguments)``: x as torch got it, ``dims`` the dim as
routing read it (an int for the scans, a tuple of ints, or None for every dim), torch's
``keepdim`` and its bound arguments.
"""
from __future__ import annotations

import inspect

from .torch_ops import cumextreme as _cumextreme, extremes as _extremes
from .torch_ops import moments as _moments, nanreduce as _nanreduce

# torch's argument names and defaults
CUM_ARGS = inspect.signature(lambda input, dim, *, out=None: None)
WITH_INDEX_ARGS = inspect.signature(lambda input, dim, keepdim=False, *, out=None: None)
AMINMAX_ARGS = inspect.signature(lambda input, *, dim=None, keepdim=False, out=None: None)
# var's three overloads in one: (input, dim, unbiased, keepdim), (input, dim, *, correction,
# keepdim) and (input, unbiased), told apart by ``read_correction``
VAR_ARGS = inspect.signature(lambda input, dim=None, unbiased=None, keepdim=False, *,
                             correction=None, out=None: None)


def read_correction(arguments: dict):
    """var/std/var_mean/std_mean: ``correction`` from torch's spellings (default 1, the legacy
    ``unbiased`` as 1 or 0, ``var(x, True)``), or None where torch raises or reads it otherwise."""
    dim, unbiased, correction = arguments["dim"], arguments["unbiased"], arguments["correction"]
    if isinstance(dim, bool):            # var(x, True): the (input, unbiased) overload
        if unbiased is not None or arguments["keepdim"] is not False:
            return None
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None or not isinstance(unbiased, bool):
            return None
        correction = 1 if unbiased else 0
    elif correction is None:
        correction = 1
    elif isinstance(correction, bool) or not isinstance(correction, (int, float)):
        return None
    return dict(arguments, dim=dim, correction=correction)


def cummax(x, dim, keepdim, arguments):
    return _cumextreme.cummax(x, dim)


def cummin(x, dim, keepdim, arguments):
    return _cumextreme.cummin(x, dim)


def logcumsumexp(x, dim, keepdim, arguments):
    return _cumextreme.logcumsumexp(x, dim)


def max_with_indices(x, dims, keepdim, arguments):
    return _extremes.max_with_indices(x, dims[0], keepdim)


def min_with_indices(x, dims, keepdim, arguments):
    return _extremes.min_with_indices(x, dims[0], keepdim)


def aminmax(x, dims, keepdim, arguments):
    return _extremes.aminmax(x, dim=dims, keepdim=keepdim)


def _moment(function):
    def run(x, dims, keepdim, arguments):
        return function(x, dims, keepdim=keepdim, correction=arguments["correction"])
    return run


MOMENTS = {"var": _moment(_moments.var), "std": _moment(_moments.std),
           "var_mean": _moment(_moments.var_mean), "std_mean": _moment(_moments.std_mean)}


def nansum(x, dims, keepdim, arguments):
    return _nanreduce.nansum(x, dims, keepdim, dtype=arguments["dtype"])


def nanmean(x, dims, keepdim, arguments):
    return _nanreduce.nanmean(x, dims, keepdim, dtype=arguments["dtype"])
