"""``python -m robustkit``: the ``robustkit`` command."""

from robustkit.cli import main

if __name__ == "__main__":  # importing this module (e.g. to check that every module imports) runs nothing
    raise SystemExit(main())
