"""The per-layer gradient norms logged at every step: the definition, in float64."""

import math

import torch

from robustkit.train.gradnorms import gradient_norms


def _named(shapes: dict[str, tuple[int, ...]], seed: int = 0) -> list[tuple[str, torch.nn.Parameter]]:
    generator = torch.Generator().manual_seed(seed)
    named = []
    for name, shape in shapes.items():
        parameter = torch.nn.Parameter(torch.zeros(shape))
        parameter.grad = torch.randn(shape, generator=generator) * 10.0
        named.append((name, parameter))
    return named


def test_each_group_is_the_l2_norm_of_all_its_gradients():
    named = _named({"a.weight": (7, 5), "b.weight": (3,), "a.bias": (7,), "c.weight": (4, 4), "b.bias": (1,)})
    groups = {
        "a.weight": "layer.0",
        "a.bias": "layer.0",
        "b.weight": "layer.1",
        "b.bias": "layer.1",
        "c.weight": "head",
    }
    norms = gradient_norms(named, groups)
    assert list(norms) == ["layer.0", "layer.1", "head"]  # first-appearance order
    for group, value in norms.items():
        squares = sum(float(p.grad.double().pow(2).sum()) for n, p in named if groups[n] == group)
        assert math.isclose(value, math.sqrt(squares), rel_tol=1e-6)


def test_parameters_without_a_gradient_are_left_out():
    named = _named({"a.weight": (3, 3), "b.weight": (2,)})
    named[1][1].grad = None
    norms = gradient_norms(named, {"a.weight": "layer.0", "b.weight": "layer.1"})
    assert list(norms) == ["layer.0"]
    assert gradient_norms([(n, torch.nn.Parameter(torch.zeros(2))) for n in ("x", "y")]) == {}


def test_names_without_a_group_fall_back_to_the_layer_name_rule():
    named = _named({"bert.encoder.layer.3.output.dense.weight": (2, 2), "bert.encoder.layer.3.output.dense.bias": (2,)})
    norms = gradient_norms(named)
    assert len(norms) == 1
    total = sum(float(p.grad.double().pow(2).sum()) for _, p in named)
    assert math.isclose(next(iter(norms.values())), math.sqrt(total), rel_tol=1e-6)


def test_a_non_finite_gradient_gives_a_non_finite_norm():
    # the divergence rule reads these norms: a NaN or inf must not be summed away
    named = _named({"a.weight": (2, 2), "b.weight": (2,)})
    named[0][1].grad[0, 0] = float("nan")
    named[1][1].grad[0] = float("inf")
    norms = gradient_norms(named, {"a.weight": "layer.0", "b.weight": "layer.1"})
    assert math.isnan(norms["layer.0"]) and math.isinf(norms["layer.1"])
