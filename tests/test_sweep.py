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


@pytest.mark.slow
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


class _RecordingExecutor:
    """An Executor that trains nothing: it records the jobs and answers ``complete``."""

    def __init__(self):
        self.jobs = []

    def run(self, jobs):
        self.jobs = list(jobs)
        return [{"run_id": job.run_id, "status": "complete", "error": None} for job in jobs]


def test_sweep_hands_every_job_to_its_executor_tsp_first(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    executor = _RecordingExecutor()
    results = run_sweep(specs, tmp_path / "runs", executor=executor)
    assert list(results.run_id) == [s.run_id for s in specs] and set(results.status) == {"complete"}
    tsp = [job for job in executor.jobs if job.is_tsp]
    assert executor.jobs[:len(tsp)] == tsp and len(tsp) == 2  # one TSP run per method, before the runs
    assert [job.spec for job in executor.jobs[len(tsp):]] == specs
    for job in executor.jobs[len(tsp):]:
        assert job.needs == (job.spec.tsp_spec().run_id if job.spec.tsp_step else None)
        assert job.store == str((tmp_path / "runs").resolve())  # absolute: a Slurm job must find it
    assert {job.tsp_steps for job in tsp} == {(2,)}


def test_unknown_executor_is_named(tmp_path):
    with pytest.raises(SweepError, match="'nope'"):
        run_sweep(expand_grid(_write(tmp_path, GRID))[:1], tmp_path / "runs", executor="nope")


def test_local_executor_does_not_try_runs_whose_tsp_run_failed(tmp_path, monkeypatch):
    from robustkit import executors
    from robustkit.jobs import Job

    specs = expand_grid(_write(tmp_path, GRID))
    with_tsp = [s for s in specs if s.tsp_step][:1]
    without = [s for s in specs if not s.tsp_step][:1]
    tsp = with_tsp[0].tsp_spec()
    jobs = [Job(with_tsp[0], "store", needs=tsp.run_id), Job(tsp, "store", tsp_steps=(2,)), Job(without[0], "store")]
    ran = []

    def fake_run_job(job, progress=False):
        ran.append(job.run_id)
        status = "failed" if job.is_tsp else "complete"
        return {"run_id": job.run_id, "status": status, "error": "boom" if job.is_tsp else None}

    monkeypatch.setattr(executors, "run_job", fake_run_job)
    results = executors.LocalExecutor(workers=1, progress=False).run(jobs)
    assert ran == [tsp.run_id, without[0].run_id]  # the TSP run first; the run that needs it never
    assert [r["run_id"] for r in results] == [job.run_id for job in jobs]  # in the order given
    assert results[0] == {"run_id": with_tsp[0].run_id, "status": "failed", "error": "TSP run failed: boom"}


def test_a_needed_job_may_not_need_another(tmp_path):
    from robustkit.jobs import Job, waves

    spec = expand_grid(_write(tmp_path, GRID))[0]
    first, then = waves([Job(spec, "s", needs="x")])
    assert (first, then) == ([], [0])  # a job it needs outside the batch: nothing to wait for
    tsp = spec.tsp_spec()
    with pytest.raises(ValueError, match="need none"):
        waves([Job(tsp, "s", needs=spec.run_id), Job(spec, "s", needs=tsp.run_id)])
