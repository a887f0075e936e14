"""Import a ``.py`` file of a user's own (an analysis, figure or attack outside the package) as a
module, so that its functions load by ``"module:function"`` as robustkit's do.

The standard library's recipe (``importlib.util.spec_from_file_location``), written once for the
analysis and figure registries and the attack registry.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from robustkit.errors import RobustkitError


def import_file(path: str | Path, name: str) -> ModuleType:
    """Run the module file ``path`` as the module ``name`` (in ``sys.modules`` from before it
    runs: dataclasses and pickling look their module up; taken out again if it fails)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RobustkitError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
