"""Curvature of a loss from Hessian-vector products: the top eigenvalue (power iteration) and
the trace (Hutchinson's estimator), for a whole parameter set or one block of it.

The Hessian H is never formed: ``H v = d/d theta (grad L(theta) . v)`` (Pearlmutter 1994) costs
about two backward passes, over the tensors named as parameters only (an adapter run's products
touch nothing of the frozen base but its activations). The loss may be given as *parts*
(micro-batches, L = sum_k w_k L_k) whose graphs are built, used and freed in turn: memory for
one part's activations plus three parameter-sized buffers, at about 1.5-2x the time. A *block*
(one layer, one module) gives H_BB, the curvature of the loss when only that block moves.

- :func:`top_eigenvalue`: lambda_max by power iteration from a seeded Gaussian start (a second,
  shifted iteration where the eigenvalue of largest magnitude is negative), with the residual
  ``||H v - lambda v||`` of its last iterate (a guaranteed bound), the products used and whether
  the relative change fell below ``tol``;
- :func:`hutchinson_trace`: tr(H) = E[v^T H v] for Rademacher v, with its standard error over
  the samples, and every block's trace from the same products.

Written by hand rather than with PyHessian, tested against exact Hessians. The derivations
(memory, blocks, the estimators' variances) and why not PyHessian: ``docs/analyses.md``,
"robustkit/measures/hessian.py".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

# Power iteration stops when |lambda_k - lambda_{k-1}| <= tol * |lambda_k| (PyHessian's rule
# and default tolerance).
DEFAULT_TOL = 1e-3
DEFAULT_ITERATIONS = 100
DEFAULT_SAMPLES = 50


@dataclass(frozen=True)
class EigenEstimate:
    """The top eigenvalue of a (block of a) Hessian by power iteration.

    Attributes
    ----------
    value : float
        Rayleigh quotient v^T H v of the last unit iterate v: the eigenvalue of largest
        magnitude, signed. Units: loss units per (parameter unit)^2.
    residual : float
        ||H v - value * v||: some eigenvalue of H lies within ``residual`` of ``value``.
    iterations : int
        Hessian-vector products used.
    converged : bool
        Before the iteration cap, the change of the estimate relative to its value (of H's
        eigenvalue, in the shifted second phase too) fell below the tolerance, with a residual
        no larger than the value; the curvature figure draws the others as no result.
    history : tuple of float
        The Rayleigh quotient after each iteration (of H, shifted back, in the second phase).
    dominant : float
        The eigenvalue of largest magnitude (the first phase's estimate): ``value`` itself unless
        it was negative.
    """

    value: float
    residual: float
    iterations: int
    converged: bool
    history: tuple[float, ...] = field(repr=False, default=())
    dominant: float = math.nan


@dataclass(frozen=True)
class TraceEstimate:
    """Hutchinson's estimate of the trace of a (block of a) Hessian.

    Attributes
    ----------
    value : float
        Mean of v^T H v over the samples (units as :attr:`EigenEstimate.value`).
    std_error : float
        Standard deviation of the samples (ddof 1) / sqrt(samples); NaN for one sample.
    samples : int
        Rademacher vectors used (one Hessian-vector product each).
    """

    value: float
    std_error: float
    samples: int


class HessianVectorProduct:
    """v -> H v for the Hessian of ``loss()`` with respect to ``parameters``.

    Parameters
    ----------
    loss : callable, or sequence of (float, callable)
        ``loss() -> Tensor`` (a scalar), a function of ``parameters`` through autograd; or the
        loss as weighted parts ``[(w_1, loss_1), ...]`` meaning sum_k w_k loss_k() (micro-batches
        of one batch: w_k the part's share of the loss's terms, as
        :func:`robustkit.analysis.curvature.micro_batches` splits a batch). Parts are
        differentiated one at a time and their graphs freed before the next, so ``retain``
        does not apply to them.
    parameters : sequence of Tensor
        The tensors differentiated (``requires_grad``); H is over them alone.
    retain : bool
        Build the gradient's graph once and reuse it for every product (one backward of the
        graph per product; memory for the graph stays allocated until this object is freed).
        False: recompute the loss and gradient at each product (less memory, about twice the
        time). Ignored for a loss in parts.

    Attributes
    ----------
    products : int
        Hessian-vector products computed so far.
    """

    def __init__(
        self,
        loss: Callable[[], Tensor] | Sequence[tuple[float, Callable[[], Tensor]]],
        parameters: Sequence[Tensor],
        retain: bool = True,
    ) -> None:
        self.parameters = list(parameters)
        if not self.parameters:
            raise ValueError("no parameters: the Hessian of a loss with respect to nothing is empty")
        if not all(p.requires_grad for p in self.parameters):
            raise ValueError("every parameter must require grad")
        # exactly one of the two: the loss whole (its graph reusable), or its weighted parts
        self._loss = loss if callable(loss) else None
        self._parts = [] if callable(loss) else [(float(w), part) for w, part in loss]
        if self._loss is None and not self._parts:
            raise ValueError("a loss in parts needs at least one part")
        self._retain = retain
        self._gradient: tuple[Tensor, ...] | None = None
        self.products = 0

    def gradient(self) -> tuple[Tensor, ...]:
        """The loss's gradient: with its graph, for differentiating once more (a loss in one
        part); summed over the parts and detached (a loss in parts)."""
        if self._gradient is not None:
            return self._gradient
        if self._loss is None:
            total = [torch.zeros_like(p) for p in self.parameters]
            for weight, part in self._parts:
                for t, g in zip(total, torch.autograd.grad(part(), self.parameters, allow_unused=True)):
                    if g is not None:
                        t.add_(g, alpha=weight)
            return tuple(total)
        gradient = torch.autograd.grad(self._loss(), self.parameters, create_graph=True)
        if self._retain:
            self._gradient = gradient
        return gradient

    def __call__(self, vector: Sequence[Tensor], block: Sequence[int] | None = None) -> list[Tensor]:
        """H v, or H_BB v_B for a block.

        Parameters
        ----------
        vector : sequence of Tensor
            One tensor per parameter (or per parameter of ``block``), each of its shape.
        block : sequence of int, optional
            Indices into ``parameters``: v is zero outside them and only H v on them is
            returned (the diagonal block H_BB).

        Returns
        -------
        list of Tensor
            Shaped like ``vector``.
        """
        indices = list(range(len(self.parameters))) if block is None else list(block)
        if len(vector) != len(indices):
            raise ValueError(f"expected {len(indices)} tensors, got {len(vector)}")
        chosen = [self.parameters[i] for i in indices]
        if self._loss is not None:
            gradient = self.gradient()
            result = self._product([gradient[i] for i in indices], chosen, vector, retain=True)
        else:
            result = [torch.zeros_like(p) for p in chosen]
            for weight, part in self._parts:
                # one part's graph at a time: built here, freed when `gradient` goes out of scope
                gradient = torch.autograd.grad(part(), self.parameters, create_graph=True, allow_unused=True)
                product = self._product([gradient[i] for i in indices], chosen, vector, retain=False)
                del gradient
                for total, h in zip(result, product):
                    total.add_(h, alpha=weight)
        self.products += 1
        return result

    @staticmethod
    def _product(
        gradient: list[Tensor | None], parameters: list[Tensor], vector: Sequence[Tensor], retain: bool
    ) -> list[Tensor]:
        """d(gradient . v)/d parameters, zero where the loss does not reach a parameter."""
        # allow_unused / None: a parameter the loss does not reach (a head not in the graph) has a zero block
        pairs = [(g, p, v) for g, p, v in zip(gradient, parameters, vector) if g is not None and g.requires_grad]
        products = (
            torch.autograd.grad(
                [g for g, _, _ in pairs],
                parameters,
                grad_outputs=[v for _, _, v in pairs],
                retain_graph=retain,
                allow_unused=True,
            )
            if pairs
            else [None] * len(parameters)
        )
        return [torch.zeros_like(p) if h is None else h.detach() for p, h in zip(parameters, products)]


def _dot(a: Sequence[Tensor], b: Sequence[Tensor]) -> float:
    return float(sum((x.double() * y.double()).sum() for x, y in zip(a, b)))


def _norm(a: Sequence[Tensor]) -> float:
    return math.sqrt(_dot(a, a))


def _random(like: Sequence[Tensor], generator: torch.Generator, kind: str) -> list[Tensor]:
    """Seeded random tensors shaped like ``like``, drawn on the CPU (the same numbers on every
    device), then moved to each tensor's device."""
    out = []
    for tensor in like:
        if kind == "rademacher":
            draw = torch.randint(0, 2, tensor.shape, generator=generator, dtype=torch.int8).to(tensor.dtype) * 2 - 1
        else:
            draw = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
        out.append(draw.to(tensor.device))
    return out


def top_eigenvalue(
    hvp: HessianVectorProduct,
    block: Sequence[int] | None = None,
    max_iterations: int = DEFAULT_ITERATIONS,
    tol: float = DEFAULT_TOL,
    seed: int = 0,
) -> EigenEstimate:
    """The largest eigenvalue of H (or of its block H_BB) by power iteration.

    Parameters
    ----------
    hvp : HessianVectorProduct
    block : sequence of int, optional
        Indices of the parameters forming the block (default: all).
    max_iterations : int
        Cap on Hessian-vector products per power iteration (a second one runs where the
        eigenvalue of largest magnitude is negative).
    tol : float
        Stop when the Rayleigh quotient changes by at most ``tol`` times its magnitude.
    seed : int
        Seed of the Gaussian start vectors.

    Returns
    -------
    EigenEstimate
    """
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
    like = [hvp.parameters[i] for i in (range(len(hvp.parameters)) if block is None else block)]
    first = _power(lambda v: hvp(v, block), like, max_iterations, tol, seed)
    if not first.value < 0:
        return EigenEstimate(first.value, first.residual, first.iterations, first.converged, first.history, first.value)
    shift = first.value  # ~ the most negative eigenvalue: H - shift I has eigenvalues >= 0
    # converged on the eigenvalue sought, mu + shift: judged on the shifted mu, a top eigenvalue near
    # 0 beside a large negative one "converged" at any value (issue #55: 1e-4 with bars to 0.1)
    second = _power(
        lambda v: [h - shift * x for h, x in zip(hvp(v, block), v)], like, max_iterations, tol, seed + 1, shift
    )
    # (H - shift I) v - mu v = H v - (mu + shift) v: the residual carries over unchanged
    return EigenEstimate(
        second.value + shift,
        second.residual,
        first.iterations + second.iterations,
        second.converged,
        first.history + tuple(h + shift for h in second.history),
        first.value,
    )


def _power(
    product: Callable[[list[Tensor]], list[Tensor]],
    like: Sequence[Tensor],
    max_iterations: int,
    tol: float,
    seed: int,
    shift: float = 0.0,
) -> EigenEstimate:
    """Power iteration of a symmetric operator (H - ``shift`` I) from a seeded Gaussian start;
    converged when its Rayleigh quotient changes by at most ``tol`` times the magnitude of the
    eigenvalue of H it estimates (quotient + ``shift``) and its residual is at most that
    magnitude (a slowly moving quotient far from any eigenvalue is not converged)."""
    generator = torch.Generator().manual_seed(seed)
    v = _random(like, generator, "gaussian")
    v = _scaled(v, 1.0 / _norm(v))
    history: list[float] = []
    value = residual = math.nan
    converged = False
    for _ in range(max_iterations):
        hv = product(v)
        value = _dot(v, hv)
        residual = _norm([h - value * x for h, x in zip(hv, v)])
        # a quotient that stalls is not an eigenvalue: converged also needs the residual bound to
        # resolve it (some eigenvalue within ``residual`` of it, that bound not reaching 0)
        converged = (
            bool(history) and abs(value - history[-1]) <= tol * abs(value + shift) and residual <= abs(value + shift)
        )
        history.append(value)
        size = _norm(hv)
        if converged or size == 0.0 or not math.isfinite(size):
            break  # a zero H v: v lies in the null space, whose eigenvalue 0 is exact
        v = _scaled(hv, 1.0 / size)
    return EigenEstimate(value, residual, len(history), converged or residual == 0.0, tuple(history), value)


def _scaled(tensors: Sequence[Tensor], factor: float) -> list[Tensor]:
    return [t * factor for t in tensors]


def hutchinson_trace(
    hvp: HessianVectorProduct,
    blocks: Mapping[str, Sequence[int]] | None = None,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> dict[str, TraceEstimate]:
    """tr(H) and tr(H_BB) of every block, from the same Rademacher samples.

    Parameters
    ----------
    hvp : HessianVectorProduct
    blocks : mapping of str to sequence of int, optional
        Block name -> parameter indices (need not cover every parameter; may overlap).
    samples : int
        Rademacher vectors (one Hessian-vector product each, over every parameter).
    seed : int
        Seed of the vectors.

    Returns
    -------
    dict of str to TraceEstimate
        ``"all"`` (the whole Hessian) and one entry per block.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    blocks = {"all": list(range(len(hvp.parameters))), **dict(blocks or {})}
    generator = torch.Generator().manual_seed(seed)
    draws: dict[str, list[float]] = {name: [] for name in blocks}
    for _ in range(samples):
        v = _random(hvp.parameters, generator, "rademacher")
        hv = hvp(v)
        for name, indices in blocks.items():
            draws[name].append(_dot([v[i] for i in indices], [hv[i] for i in indices]))
    return {name: _trace(values) for name, values in draws.items()}


def _trace(values: list[float]) -> TraceEstimate:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return TraceEstimate(mean, math.nan, n)
    variance = sum((x - mean) ** 2 for x in values) / (n - 1)
    return TraceEstimate(mean, math.sqrt(variance / n), n)
