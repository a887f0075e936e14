"""Run every registered analysis and figure on one store, each in a process of its own.

``python tests/own_data_matrix.py STORE [analysis,figure]`` imports robustkit, torch and matplotlib once, never
reads or registers any data, then forks one child per analysis and per figure: each child starts
with no user task known, as a new notebook kernel or CLI call does, so an analysis that found its
task only because an earlier one registered it fails here. One JSON line per child on stdout:
``{"kind", "name", "ok", "error"}``. Used by ``tests/test_own_data_matrix.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import matplotlib

matplotlib.use("Agg")

from small_params import small  # noqa: E402  (this script's folder is on sys.path)


def _child(kind: str, name: str, store: str) -> None:
    import matplotlib.pyplot as plt

    from robustkit import figures
    from robustkit.analysis import registry

    if kind == "analysis":
        analysis = registry.get(name)
        frame = analysis.run(store, progress=False, **small(analysis.params))
        assert len(frame), f"{name}: an empty frame"
    else:
        figures.draw(name, store, **small(figures.FIGURES[name].parameters))  # drawn; rendering: test_figures_axes
        plt.close("all")


def _import_modules(registry, figures) -> None:
    """Import every module an analysis or figure names (importing reads no data)."""
    import importlib

    import datasets  # noqa: F401
    import seaborn  # noqa: F401
    import transformers  # noqa: F401

    references = [a.compute for a in registry.ANALYSES.values()]
    references += [v for a in registry.ANALYSES.values() for v in a.views]
    for reference in references:
        importlib.import_module(reference.split(":")[0])
    for figure in figures.FIGURES.values():
        for value in vars(figure).values():
            if isinstance(value, str) and ":" in value and value.split(":")[0].startswith("robustkit."):
                importlib.import_module(value.split(":")[0])


def main(store: str, kinds: tuple[str, ...] = ("analysis", "figure")) -> None:
    import torch

    from robustkit import figures
    from robustkit.analysis import registry
    from robustkit.data import user_data

    torch.set_num_threads(1)
    _import_modules(registry, figures)  # once, here: each child then pays only for its work
    assert not user_data._REGISTRY, "the driver must start with no user data known"
    jobs = [("analysis", n) for n in sorted(registry.ANALYSES)] + [("figure", n) for n in sorted(figures.FIGURES)]
    jobs = [(kind, name) for kind, name in jobs if kind in kinds]
    for kind, name in jobs:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run one, report, leave without cleanup of the parent's state
            os.close(read)
            result = {"kind": kind, "name": name, "ok": True, "error": None}
            start = time.perf_counter()
            try:
                _child(kind, name, store)
            except BaseException as error:  # noqa: BLE001 - every failure is reported
                result.update(ok=False, error=f"{type(error).__name__}: {error}", trace=traceback.format_exc())
            result["seconds"] = round(time.perf_counter() - start, 2)
            os.write(write, json.dumps(result).encode())
            os.close(write)
            os._exit(0)
        os.close(write)
        chunks = []
        while chunk := os.read(read, 1 << 16):
            chunks.append(chunk)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        text = b"".join(chunks).decode()
        print(text or json.dumps({"kind": kind, "name": name, "ok": False, "error": f"child died ({status})"}))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("analysis", "figure"))
