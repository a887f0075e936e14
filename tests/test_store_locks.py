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


def test_a_lock_dies_with_its_process_and_wait_blocks_until_free(tmp_path):
    """The semantics robustkit relies on: a killed holder leaves no stale lock; ``wait`` waits."""
    import subprocess
    import sys
    import threading
    import time

    run_dir = new_run(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from robustkit.store.locks import run_lock\n"
                               f"with run_lock(Path({str(run_dir)!r})):\n    print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
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
