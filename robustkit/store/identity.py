"""The identity columns of a run (:data:`IDENTITY`): every setting two runs may differ in, which
analyses pool and refuse to pool by. Apart from :mod:`robustkit.store.tables` (pandas) so that
an analysis module can name its columns at import and stay light (its registration and
``--help`` import it)."""

from __future__ import annotations

from robustkit.methods.registry import option_columns
from robustkit.specs.spec import SPEC_FIELDS

# Every field of the run spec is an identity column, so that analyses and figures can see every
# setting in which two runs differ (and refuse to pool them: robustkit.analysis.pooling); the
# nine that name a run come first. ``data_dir`` says where data was read, not what was run.
# ``method_options`` is one column per option of every method (``lora.r``, ``prefix.length``;
# missing for runs of other methods), so that no analysis pools runs of different options.
_NAMING = ["model", "task", "method", "seed", "tsp_step", "lr", "train_size", "adapter_size"]
OPTION_COLUMNS = option_columns()
# ``import_id`` names an imported run (its source folder and a digest of its files; None for runs
# trained here): settings nobody recorded are unknown, and two imports whose known settings agree
# are still two different runs, so no analysis ever pools an import with another run.
IMPORT_ID = "import_id"
IDENTITY = [
    "run_id",
    *_NAMING,
    *(f for f in SPEC_FIELDS if f not in _NAMING and f not in ("data_dir", "method_options")),
    *OPTION_COLUMNS,
    IMPORT_ID,
]
