"""Which model a scale's learning rates were calibrated on, and the note when another model uses them.

A scale of ``recipes/defaults.toml`` gives each method its rate (``[<scale>.lr]``), chosen for
the scale's own model (``[<scale>.base] model``): the demo and cpu rates are the best of the
He et al. 2021 figure 4 grid for minilm-l6 on rt (recipes/README.md, "Demo-scale calibration"),
the paper rates the papers' for BERT-base. A model swapped in (``reproduce --model``, ``train
--preset ... --model``) trains at those rates unchanged, so the command says so in one line
(:func:`lr_note`), with how to choose the new model's: the same grid, by the same rule.
"""

from __future__ import annotations

# The recipe whose demo grid is the calibration grid ({2e-5, 1e-4, 5e-4, 2.5e-3} x methods x seeds).
CALIBRATION_RECIPE = "he2021/fig4"


def calibrated_on(scale_defaults: dict) -> str | None:
    """The model a scale's learning rates were calibrated on: its base model where the scale
    gives rates per method (``lr``), else None. ``scale_defaults``: one scale of
    ``defaults.toml`` (``{"base": {...}, "lr": {...}}``)."""
    if not scale_defaults.get("lr"):
        return None
    return scale_defaults.get("base", {}).get("model")


def lr_note(
    scale: str, scale_defaults: dict, model: str | None, lr_flag: bool = False, data: str | None = None
) -> str | None:
    """One line when ``model`` trains at the rates of ``scale`` calibrated on another model;
    None when it is that model (or no model is swapped in, or the scale gives no rates).

    Parameters
    ----------
    scale : str
        The scale (preset) name, e.g. ``demo``.
    scale_defaults : dict
        That scale of ``defaults.toml``.
    model : str or None
        The model swapped in.
    lr_flag : bool
        The command takes ``--lr`` (``train``): the line names it as the other way.
    data : str, optional
        The user's data swapped in too (``--data``): the grid's command names it.
    """
    calibrated = calibrated_on(scale_defaults)
    if model is None or calibrated is None or model == calibrated:
        return None
    command = f"robustkit reproduce {CALIBRATION_RECIPE} --model {model}{f' --data {data}' if data else ''} --store S"
    return (
        f"the {scale} learning rates ([{scale}.lr] of recipes/defaults.toml) were calibrated on {calibrated}, not "
        f"{model}: choose {model}'s on the same grid, e.g. `{command}`, each method at its best mean last validation "
        f'score (recipes/README.md, "Demo-scale calibration")' + (", or give --lr" if lr_flag else "")
    )


__all__ = ["CALIBRATION_RECIPE", "calibrated_on", "lr_note"]
