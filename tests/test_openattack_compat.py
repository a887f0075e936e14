"""OpenAttack 2.1.1's import on Python 3.12+ (robustkit.attacks.compat), shown on this Python by
removing ``FileFinder.find_loader`` as 3.12 did."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from importlib.machinery import FileFinder

import pytest

from robustkit.attacks import compat


def _run_openattack_data():
    """Run ``OpenAttack/data/__init__.py`` as ``import OpenAttack`` runs it (its ``load_data()``
    calls ``find_loader``), into a fresh module object: the imported one is left as it is."""
    import OpenAttack.data as imported

    spec = importlib.util.spec_from_file_location(
        "OpenAttack.data", imported.__file__, submodule_search_locations=list(imported.__path__)
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def python312(monkeypatch):
    """FileFinder as Python 3.12 has it: without ``find_loader`` (put back after the test)."""
    import OpenAttack.data  # noqa: F401  (imported before the removal, as on 3.11)

    # on 3.12+ the attribute is robustkit.attacks' shim: taken away too
    monkeypatch.delattr(FileFinder, "find_loader")


def test_without_the_shim_openattack_fails_as_on_312(python312):
    with pytest.raises(AttributeError, match="find_loader"):
        _run_openattack_data()


def test_the_shim_loads_every_openattack_data_module(python312):
    import OpenAttack.data as imported

    assert compat.restore_find_loader() is True
    module = _run_openattack_data()
    names = [entry["name"] for entry in module.data_list]
    assert names and names == [entry["name"] for entry in imported.data_list]
    assert "TProcess.NLTKWordNet" in names  # one PWWS reads (robustkit.attacks.offline)


def test_the_shim_answers_as_python_311(tmp_path):
    """(loader, portions) for a module, (None, []) for none: CPython 3.11's contract."""
    (tmp_path / "here.py").write_text("X = 1\n")
    finder = FileFinder(str(tmp_path), (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES))
    loader, portions = compat._find_loader(finder, "here")
    assert loader.get_filename("here") == str(tmp_path / "here.py") and portions == []
    assert compat._find_loader(finder, "absent") == (None, [])


def test_the_shim_leaves_an_existing_method_alone(monkeypatch):
    def own(self, fullname):
        return "own"

    monkeypatch.setattr(FileFinder, "find_loader", own, raising=False)
    assert compat.restore_find_loader() is False
    assert FileFinder.find_loader is own


@pytest.mark.slow
def test_importing_robustkit_attacks_first_lets_openattack_import():
    """A fresh interpreter without ``find_loader`` (3.12's import system): ``import OpenAttack``
    fails alone and works once robustkit.attacks is imported first."""
    remove = "import importlib.machinery as m\nif hasattr(m.FileFinder, 'find_loader'): del m.FileFinder.find_loader\n"
    alone = subprocess.run([sys.executable, "-c", remove + "import OpenAttack"], capture_output=True, text=True)
    assert alone.returncode != 0 and "find_loader" in alone.stderr
    shimmed = subprocess.run(
        [
            sys.executable,
            "-c",
            remove + "import robustkit.attacks\nimport OpenAttack\nprint(len(OpenAttack.data.data_list))",
        ],
        capture_output=True,
        text=True,
    )
    assert shimmed.returncode == 0, shimmed.stderr[-2000:]
    assert int(shimmed.stdout.split()[-1]) > 0
