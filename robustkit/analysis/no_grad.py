"""``torch.no_grad()`` as a decorator that imports torch when the function is first called, so
that a module of model analyses stays light to import (its registration and ``--help`` import
it; torch takes seconds)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def no_grad(function: F) -> F:
    """``function`` run under ``torch.no_grad()`` (no autograd graph is recorded)."""

    @functools.wraps(function)
    def without_gradients(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return function(*args, **kwargs)

    return without_gradients  # type: ignore[return-value]
