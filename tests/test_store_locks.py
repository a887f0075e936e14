"""Tests of :mod:`robustkit.store.locks`: one process trains a run at a time."""

import pytest
from conftest import new_run

from robustkit.errors import StoreError
from robustkit.store.locks import run_lock


def test_lock_refuses_a_second_holder(tmp_path):
    run_dir = new_run(tmp_path)
    with run_lock(run_dir):
        with pytest.raises(StoreError, match="another process"):
            with run_lock(run_dir):
                pass
    with run_lock(run_dir):  # released
        pass


def test_a_waiter_on_a_removed_lock_file_locks_the_new_one(tmp_path):
    """A run refused before it wrote anything removes its folder holding the lock
    (remove_unstarted); a process that was waiting on that lock file must not then train under
    a lock on a file nobody else can see: it locks the file at the path instead."""
    import threading

    from robustkit.store.locks import remove_unstarted

    run_dir = tmp_path / "run-a"
    seen = {}

    def waiter():
        with run_lock(run_dir, wait=True):
            seen["lock file there"] = (run_dir / ".lock").is_file()

    with run_lock(run_dir):
        thread = threading.Thread(target=waiter)
        thread.start()
        thread.join(0.5)  # waiting on the lock file that is about to go
        assert thread.is_alive()
        assert remove_unstarted(run_dir) and not run_dir.exists()
    thread.join(10)
    assert seen == {"lock file there": True}


def test_remove_unstarted_keeps_a_folder_with_anything_but_its_lock(tmp_path):
    from robustkit.store.locks import remove_unstarted

    run_dir = new_run(tmp_path)
    with run_lock(run_dir):
        assert not remove_unstarted(run_dir)
    assert (run_dir / "manifest.json").is_file()


def test_a_lock_dies_with_its_process_and_wait_blocks_until_free(tmp_path):
    """The semantics robustkit relies on: a killed holder leaves no stale lock; ``wait`` waits."""
    import subprocess
    import sys
    import threading
    import time

    run_dir = new_run(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from robustkit.store.locks import run_lock\n"
            f"with run_lock(Path({str(run_dir)!r})):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match="another process"):
            with run_lock(run_dir):
                pass
    finally:
        holder.kill()
        holder.wait()
    with run_lock(run_dir):  # the killed holder's lock died with it
        pass
    released = []

    def wait_for_it():
        with run_lock(run_dir, wait=True):
            released.append(time.monotonic())

    with run_lock(run_dir):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        time.sleep(0.3)
        assert not released  # still waiting
        freed = time.monotonic()
    waiter.join(5)
    assert released and released[0] >= freed
