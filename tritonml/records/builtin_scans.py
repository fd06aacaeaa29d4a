"""The built-in scans, one declarative record each: ``SUM`` and ``PRODUCT`` (DirectML's
CUMULATIVE_SUMMATION / CUMULATIVE_PRODUCT, ``tritonml.cumulative_sum`` / ``cumulative_product``)
and ``LINEAR_RECURRENCE`` (``tritonml.linear_recurrence``).

A record says everything the layers above the kernels need to know about a scan, and they read it
rather than branching on the scan's name:

- the launchers (tritonml/launchers/scan.py, scan_work.py, recurrence.py): the combine's two
  kernel forms (``ScanCombine.forms``), the identity (padding of partial tiles, the first output
  of an exclusive scan, the carry of an empty scan), the state dtype, whether a chunk may be
  folded out of order (``commutative``);
- the tuner (``tritonml_autotune.select.choose_scan``): the name and the bytes read and held per
  element, passed as plain data (``element_bytes``);
- autograd (tritonml/torch_ops/scan.py, cumextreme.py, segment.py, recurrence.py): ``backward``
  and ``jvp`` (reverse and forward mode), plain functions of torch tensors that run the scans and
  shifts they need through the ``Scans`` they are given (whole axis, or restarted per
  segment), so derivatives are themselves differentiable, on tritonml's kernels
  (``scan(LINEAR_RECURRENCE, (gates, tokens), ...)`` runs a linear recurrence);
- distributed (tritonml/distributed/scan.py): ``fold``, the ``ReduceFunction`` that folds the shards'
  totals into each rank's carry.

Forward mode: the tangent of a scan is a scan. A sum's is the sum of the tangents (torch's
cumsum is ``auto_linear``); a product's is the linear recurrence ``dy[i] = x[i] * dy[i-1] +
dx[i] * (product before i)``, and its gradient the reverse recurrence times the product before
each element: nothing is divided out, so both are exact with zeros, and so are their own
derivatives (docs/semantics.md, "Gradients at zeros"); a linear recurrence's is the same
recurrence over the tangent tokens ``dtokens + dgates * h[t-1]``. ``torch.ops.tritonml.*`` called
directly have backward formulas only (``torch.library``'s ``register_autograd`` takes no jvp); the
public functions carry both.

The kinds of record (``ScanCombine``, ``StateScan``) and how to add one: scan_combine.py.
"""
from __future__ import annotations

import torch

from ..kernels import combine as _combine
from .scan_combine import ScanCombine, StateScan, shift_along


# ---------------------------------------------------------------------------------------------
# Gradients (torch tensors; ``scan`` runs a differentiable scan on tritonml's kernels)
# ---------------------------------------------------------------------------------------------
def _sum_backward(scan, x, output, initial, grad, axis, reverse, exclusive):
    # Each output is a sum of the inputs before it in traversal order, so each input receives
    # the sum of the gradients after it: the same scan in the other direction. Every output
    # holds the initial once, so it receives the sum of all of them.
    grad_x = scan(SUM, grad, axis, not reverse, exclusive)
    grad_initial = None
    if initial is not None:
        grad_initial = grad.sum(axis) if grad.dim() else grad
    return grad_x, grad_initial


def _inclusive_product_grad(scan, x, exclusive_product, grad, axis: int, reverse: bool):
    """The gradient in x of an inclusive product of x, for ``grad``, from x's exclusive product
    ``exclusive_product``.

    d y_i / d x_j = prod_{k <= i, k != j} x_k (traversal order), so the gradient of x_j is
    prod_{k < j} x_k (the exclusive product) times r_j = sum_{i >= j} grad_i prod_{j < k <= i}
    x_k, the linear recurrence r_j = grad_j + x_{j+1} r_{j+1} run the other way. Nothing is
    divided out: exact with any zeros, and a polynomial in x made of differentiable scans, so its
    derivatives of every order are exact too (a zero's own factor stays in every other term).
    """
    later = scan(LINEAR_RECURRENCE, (scan.shift(x, axis, True, reverse), grad), axis,
                 not reverse, False)
    return exclusive_product * later


def _put_first(first, rest, axis: int, reverse: bool):
    """``rest`` with ``first`` (its shape without ``axis``) put first in traversal order."""
    first = first.unsqueeze(axis)
    return torch.cat([rest, first], axis) if reverse else torch.cat([first, rest], axis)


def _product_backward(scan, x, output, initial, grad, axis, reverse, exclusive):
    """An exclusive product is the inclusive one shifted a step, so its gradient is the inclusive
    gradient of the shifted ``grad``. With an initial, the scan is the inclusive product of
    ``z``, x with the initial put first in traversal order: its outputs are z's inclusive products
    after the initial's (inclusive) or up to the last element's (exclusive), so the gradient is
    z's inclusive gradient for ``grad`` padded with a 0 on the other side, split back."""
    if initial is None:
        if exclusive:
            grad = scan.shift(grad, axis, True, reverse)
            before = output
        else:
            before = scan(PRODUCT, x, axis, reverse, True)
        return _inclusive_product_grad(scan, x, before, grad, axis, reverse), None
    scalar = x.dim() == 0
    if scalar:  # a 0-d x acts as shape [1]
        x, grad = x.unsqueeze(0), grad.unsqueeze(0)
    n = x.shape[axis]
    z = _put_first(initial, x, axis, reverse)
    zero = torch.zeros_like(initial.unsqueeze(axis))
    # zero where z's product holds no output: the initial's own (inclusive) or the last (exclusive)
    padded = torch.cat([grad, zero], axis) if exclusive != reverse else \
        torch.cat([zero, grad], axis)
    grad_z = _inclusive_product_grad(scan, z, scan(PRODUCT, z, axis, reverse, True), padded, axis,
                                     reverse)
    grad_x = grad_z.narrow(axis, 0 if reverse else 1, n)
    grad_initial = grad_z.narrow(axis, n if reverse else 0, 1).squeeze(axis)
    return grad_x.squeeze(0) if scalar else grad_x, grad_initial


def _shift_earlier(h, initial, axis: int, reverse: bool):
    """h[t] <- h[t - 1] in traversal order, the first position ``initial`` (or 0)."""
    n = h.shape[axis]
    first = (initial.unsqueeze(axis) if initial is not None
             else torch.zeros_like(h.narrow(axis, 0, min(n, 1))))
    if n == 0:
        return h
    if reverse:
        return torch.cat([h.narrow(axis, 1, n - 1), first.expand_as(h.narrow(axis, 0, 1))], axis)
    return torch.cat([first.expand_as(h.narrow(axis, 0, 1)), h.narrow(axis, 0, n - 1)], axis)


def _recurrence_backward(recurrence, gates, output, initial, grad, axis, reverse):
    """The gradient of h = linear_recurrence(gates, tokens, initial) as ``(grad_gates,
    grad_tokens, grad_initial)``: the same recurrence run the other way with the gates shifted
    one step (Martin & Cundy, "Parallelizing linear recurrent neural nets over sequence length",
    ICLR 2018); ``recurrence(gates, tokens, axis, reverse, initial)`` runs it differentiably."""
    scalar = gates.dim() == 0
    if scalar:  # a 0-d sequence acts as shape [1]
        gates, output, grad = gates.unsqueeze(0), output.unsqueeze(0), grad.unsqueeze(0)
    grad_h = recurrence(shift_along(gates, axis, True, reverse), grad, axis, not reverse, None)
    grad_gates = grad_h * _shift_earlier(output, initial, axis, reverse)
    grad_initial = None
    if initial is not None:
        n = gates.shape[axis]
        if n == 0:
            grad_initial = torch.zeros_like(initial)
        else:
            first = n - 1 if reverse else 0
            grad_initial = (gates.select(axis, first) * grad_h.select(axis, first))
    if scalar:
        grad_h, grad_gates = grad_h.squeeze(0), grad_gates.squeeze(0)
    return grad_gates, grad_h, grad_initial


# ---------------------------------------------------------------------------------------------
# Tangents (forward mode; ``scan(record, t, axis, reverse, exclusive, initial=None)`` runs a
# differentiable scan, so a tangent is differentiable in the primal too: jacrev of jacfwd)
# ---------------------------------------------------------------------------------------------
def _sum_jvp(scan, x, output, initial, x_tangent, initial_tangent, axis, reverse, exclusive):
    # Linear: the same scan of the tangents, the initial's tangent as its initial.
    tangent = x_tangent if x_tangent is not None else torch.zeros_like(output)
    return scan(SUM, tangent, axis, reverse, exclusive, initial_tangent)


def _inclusive_product_tangent(scan, x, exclusive_product, tangent, axis: int, reverse: bool):
    """The tangent of an inclusive product of x for x's ``tangent``, from x's exclusive product.

    d y_i = sum_{j <= i} dx_j prod_{k <= i, k != j} x_k (traversal order) = x_i d y_{i-1} + dx_i
    prod_{k < i} x_k: the linear recurrence with gates x over the tokens dx times the exclusive
    product. Nothing is divided out, so it is exact with any zeros, and so are its derivatives
    of every order (jacrev of jacfwd, jacfwd of jacfwd).
    """
    return scan(LINEAR_RECURRENCE, (x, tangent * exclusive_product), axis, reverse, False)


def _product_jvp(scan, x, output, initial, x_tangent, initial_tangent, axis, reverse, exclusive):
    """Without an initial: the inclusive tangent, shifted a step for an exclusive scan (whose
    first output, 1, is constant). With one: the inclusive tangent of ``z``, x with the initial
    put first in traversal order (and their tangents likewise), whose products after the
    initial's (inclusive) or up to the last element's (exclusive) are the outputs."""
    if x_tangent is None:
        x_tangent = torch.zeros_like(x)
    scalar = x.dim() == 0
    if scalar:  # a 0-d x acts as shape [1]
        x, x_tangent, output = x.unsqueeze(0), x_tangent.unsqueeze(0), output.unsqueeze(0)
    if initial is None:
        before = output if exclusive else scan(PRODUCT, x, axis, reverse, True)
        tangent = _inclusive_product_tangent(scan, x, before, x_tangent, axis, reverse)
        if exclusive:
            tangent = scan.shift(tangent, axis, False, reverse)
    else:
        n = x.shape[axis]
        if initial_tangent is None:
            initial_tangent = torch.zeros_like(initial)
        z = _put_first(initial, x, axis, reverse)
        tangent_z = _inclusive_product_tangent(
            scan, z, scan(PRODUCT, z, axis, reverse, True),
            _put_first(initial_tangent, x_tangent, axis, reverse), axis, reverse)
        tangent = tangent_z.narrow(axis, 1 if exclusive == reverse else 0, n)
    return (tangent.squeeze(0) if scalar else tangent).to(output.dtype)


def _recurrence_jvp(recurrence, gates, output, initial, gates_tangent, tokens_tangent,
                    initial_tangent, axis, reverse):
    """The tangent of h = linear_recurrence(gates, tokens, initial): differentiating
    h[t] = gates[t] h[t-1] + tokens[t] gives dh[t] = gates[t] dh[t-1] + (dtokens[t] + dgates[t]
    h[t-1]), dh[-1] = dinitial: the same recurrence over other tokens. Tangents are None where
    their input has none."""
    scalar = gates.dim() == 0
    if scalar:  # a 0-d sequence acts as shape [1]
        gates, output = gates.unsqueeze(0), output.unsqueeze(0)
    tokens = torch.zeros_like(output)
    if tokens_tangent is not None:
        tokens = tokens_tangent.reshape(output.shape)
    if gates_tangent is not None:
        tokens = tokens + gates_tangent.reshape(output.shape) * _shift_earlier(
            output, initial, axis, reverse)
    tangent = recurrence(gates, tokens.to(gates.dtype), axis, reverse, initial_tangent)
    return tangent.squeeze(0) if scalar else tangent


def _logcumsumexp_backward(scan, x, output, initial, grad, axis, reverse, exclusive):
    """torch's logcumsumexp_backward: exp(reverse_logcumsumexp(log|grad| - result) + x), for the
    positive and the negative parts of grad (the smallest float standing for log 0), its scans
    run on this record, so double backward works too. An exclusive scan is the inclusive one
    shifted a step: the inclusive gradient of the shifted ``grad``."""
    if grad.dim() == 0 or grad.numel() == 0:
        return (torch.zeros_like(grad) if exclusive else grad), None
    if exclusive:
        grad = scan.shift(grad, axis, True, reverse)
        output = scan(LOGCUMSUMEXP, x, axis, reverse, False)
    lowest = torch.finfo(grad.dtype).min
    log_abs = grad.abs().log()
    parts = []
    for part in (grad > 0, grad < 0):
        logs = torch.where(part, log_abs, torch.full_like(log_abs, lowest))
        parts.append((scan(LOGCUMSUMEXP, logs - output, axis, not reverse, False) + x).exp())
    return parts[0] - parts[1], None


def _logcumsumexp_jvp(scan, x, output, initial, x_tangent, initial_tangent, axis, reverse,
                      exclusive):
    """sum_{j<=i} exp(x_j - y_i) t_j as the linear recurrence o_i = exp(y_{i-1} - y_i) o_{i-1} +
    exp(x_i - y_i) t_i, which stays exact where torch's exp(x - max) underflows; 0 where y_i =
    -inf (every term exp(-inf): torch's jvp masks those too). Exclusive: the inclusive tangent
    shifted a step (the first output, -inf, is constant)."""
    if x_tangent is None:
        x_tangent = torch.zeros_like(x)
    if x.dim() == 0 or x.numel() == 0:
        return torch.zeros_like(x_tangent) if exclusive else x_tangent
    y = scan(LOGCUMSUMEXP, x, axis, reverse, False) if exclusive else output
    live = y > float("-inf")
    zero = torch.zeros_like(y)
    gates = torch.where(live, torch.exp(scan.shift(y, axis, False, reverse, float("-inf")) - y),
                        zero)
    tokens = torch.where(live, torch.exp(x - y) * x_tangent, zero)
    tangent = scan(LINEAR_RECURRENCE, (gates, tokens), axis, reverse, False)
    return scan.shift(tangent, axis, False, reverse) if exclusive else tangent


# ---------------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------------
SUM = ScanCombine("sum", _combine.add, 0, state=_combine.add_values, commutative=True,
                  backward=_sum_backward, fold="SUM", jvp=_sum_jvp)
PRODUCT = ScanCombine("product", _combine.mul, 1, state=_combine.mul_values, commutative=True,
                      backward=_product_backward, fold="MULTIPLY", jvp=_product_jvp)
# h[t] = gates[t] * h[t-1] + tokens[t]: the state (a, b) is the affine map h -> a * h + b, and
# composing maps is associative (not commutative); only b, h itself, is stored.
LINEAR_RECURRENCE = StateScan("linear_recurrence", _combine.compose_affine, (1, 0),
                              stored=(False, True), backward=_recurrence_backward,
                              jvp=_recurrence_jvp)
# torch.cummax / cummin: (value, index) pairs, the later of equal extremes kept (torch's rule;
# kernels/combine.py: _later_extreme). The value's identity is the input dtype's losing value
# (tritonml.records.ready_reductions.losing_value), filled in per call: None here. Public functions:
# tritonml/torch_ops/cumextreme.py.
CUMMAX = StateScan("cummax", _combine.cummax_pairs, (None, -1), stored=(True, True))
CUMMIN = StateScan("cummin", _combine.cummin_pairs, (None, -1), stored=(True, True))
# torch.logcumsumexp: log(exp(tally) + exp(x)), stable (tritonml/kernels/combine.py: log_add_exp);
# -inf is its identity. Its public function: tritonml/torch_ops/cumextreme.py.
LOGCUMSUMEXP = ScanCombine("logcumsumexp", _combine.log_add_exp, float("-inf"), commutative=True,
                           backward=_logcumsumexp_backward, jvp=_logcumsumexp_jvp)
