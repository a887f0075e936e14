import pytest

from robustkit import store
from robustkit.errors import SweepError
from robustkit.sweep import expand_grid, run_sweep, tsp_jobs

GRID = """
[base]
model = "bert-tiny"
task = "rt"
train_size = 32
epochs = 1
batch_size = 16
max_length = 24
adapter_size = 8

[grid]
method = ["houlsby", "full"]
seed = [0, 1]
tsp_step = [0, 2]
"""


def _write(tmp_path, text):
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_grid_expands_to_the_product_of_axes(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    assert len(specs) == 8 and len({s.run_id for s in specs}) == 8
    jobs = tsp_jobs(specs)
    assert len(jobs) == 2  # one TSP run per method, shared by both seeds
    assert all(steps == [2] for steps, _ in jobs.values())


@pytest.mark.parametrize(
    "text, named",
    [
        (GRID.replace("seed = [0, 1]", "seeds = [0, 1]"), "seeds"),
        (GRID + "\n[extra]\nx = 1\n", "extra"),
        (GRID.replace('task = "rt"', 'task = "nope"'), "nope"),
        (GRID.replace("seed = [0, 1]", "seed = 3"), "seed"),
        ("[grid\n", "not valid TOML"),
    ],
)
def test_bad_grids_are_named(tmp_path, text, named):
    with pytest.raises(SweepError, match=named):
        expand_grid(_write(tmp_path, text))


def test_missing_grid_file_is_named(tmp_path):
    with pytest.raises(SweepError, match="missing.toml"):
        expand_grid(tmp_path / "missing.toml")


def test_sweep_trains_once_and_skips_complete_runs(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    first = run_sweep(specs, tmp_path / "runs", jobs=2, progress=False)
    assert list(first.status.unique()) == ["complete"], first.error.tolist()
    runs = store.load_runs(tmp_path / "runs")
    assert len(runs) == 8 and set(runs.status) == {"complete"}
    assert len(store.load_runs(tmp_path / "runs", include_tsp=True)) == 10
    second = run_sweep(specs, tmp_path / "runs", jobs=1, progress=False)
    assert set(second.status) == {"skipped"}


def test_a_run_locked_by_another_sweep_is_reported_not_failed(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))[:1]
    run_dir = tmp_path / "runs" / specs[0].run_id
    run_dir.mkdir(parents=True)
    with store.run_lock(run_dir):
        result = run_sweep(specs, tmp_path / "runs", progress=False)
    assert list(result.status) == ["locked"]
    assert not (run_dir / "manifest.json").exists()


def test_adapter_size_and_method_settings_are_grid_axes(tmp_path):
    text = GRID.replace('method = ["houlsby", "full"]', "adapter_size = [8, 64, 256]").replace(
        "adapter_size = 8\n", 'adapter_sharing = "layer"\nadapter_init_std = 1e-3\n')
    specs = expand_grid(_write(tmp_path, text))
    assert len(specs) == 3 * 2 * 2 and len({s.run_id for s in specs}) == 12
    assert sorted({s.adapter_size for s in specs}) == [8, 64, 256]
    assert {(s.adapter_sharing, s.adapter_init_std) for s in specs} == {("layer", 1e-3)}
    topk = expand_grid({"base": {"model": "bert-tiny", "method": "topk"}, "grid": {"top_k": [1, 2]}})
    assert [s.top_k for s in topk] == [1, 2]
