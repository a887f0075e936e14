"""OpenAttack 2.1.1 on Python 3.12+: the one import-system call it makes that 3.12 removed.

``import OpenAttack`` runs ``OpenAttack/data/__init__.py``, which lists its data modules with
``pkgutil.iter_modules`` and loads each with ``module_finder.find_loader(name)[0].load_module()``.
``importlib.machinery.FileFinder.find_loader`` was deprecated in 3.4 and removed in 3.12, so on
3.12 and 3.13 the import fails with ``AttributeError: 'FileFinder' object has no attribute
'find_loader'``. :func:`restore_find_loader` puts back the method as Python 3.11 defines it (in
terms of ``find_spec``, which every version has), only where it is missing: on 3.11 nothing is
touched. ``load_module``, the other deprecated call on that line, still exists in 3.12 and 3.13.

It is applied when :mod:`robustkit.attacks` is imported, i.e. before any of robustkit's modules
imports OpenAttack; code that imports OpenAttack without going through robustkit first calls
it itself. Nothing else in OpenAttack 2.1.1 uses what 3.12 removed (its sources name no
``find_module``, ``imp``, ``distutils``, ``asyncore`` or ``SafeConfigParser``).
"""

from __future__ import annotations

from importlib.machinery import FileFinder


def _find_loader(self: FileFinder, fullname: str):
    """``FileFinder.find_loader`` as CPython 3.11 implements it: ``(loader, portions)``, the
    loader None (and portions empty) when the finder has no such module."""
    spec = self.find_spec(fullname)
    if spec is None:
        return None, []
    return spec.loader, spec.submodule_search_locations or []


def restore_find_loader() -> bool:
    """Give ``FileFinder`` its ``find_loader`` back where this Python removed it (3.12+).

    Returns
    -------
    bool
        True if the method was added now; False where it exists already (Python 3.11, or an
        earlier call), which is left as it is.
    """
    if hasattr(FileFinder, "find_loader"):
        return False
    FileFinder.find_loader = _find_loader
    return True
