"""A store the user cannot write is analysed all the same (issue #39 item 8): the analyses
compute and return their results without caching them, and say so once per store.

Tests run as root here, where file modes do not stop a write, so the store's ``.cache`` is made
unwritable the way that stops root too: a file in its place, under which no folder can be made
(a non-root run also takes away the write permission of every folder)."""

from __future__ import annotations

import logging
import os
import shutil
import stat

import pandas as pd
import pytest

from robustkit.analysis import registry

LANDSCAPE = {"alphas": "0:1:3", "splits": ["validation"], "checkpoint": "best"}


@pytest.fixture
def read_only_store(tiny_store, tmp_path):
    store = tmp_path / "runs"
    shutil.copytree(tiny_store, store, ignore=shutil.ignore_patterns(".cache"))
    (store / ".cache").write_text("not a folder: no cache can be written under it\n")
    folders = [store, *[p for p in store.rglob("*") if p.is_dir()]]
    if os.geteuid() != 0:
        for folder in folders:
            folder.chmod(folder.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield store
    for folder in folders:
        folder.chmod(folder.stat().st_mode | stat.S_IWUSR)


def test_landscape_of_a_read_only_store_is_computed_not_cached(read_only_store, tiny_store, tmp_path, caplog):
    writable = tmp_path / "writable"
    shutil.copytree(tiny_store, writable, ignore=shutil.ignore_patterns(".cache"))
    expected = registry.get("landscape").run(writable, progress=False, **LANDSCAPE)
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        first = registry.get("landscape").run(read_only_store, progress=False, **LANDSCAPE)
        again = registry.get("landscape").run(read_only_store, progress=False, **LANDSCAPE)
    for frame in (first, again):
        pd.testing.assert_frame_equal(
            frame.drop(columns="path", errors="ignore"), expected.drop(columns="path", errors="ignore")
        )
    said = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(said) == 1 and str(read_only_store) in said[0] and "not cached" in said[0], said
    assert (read_only_store / ".cache").is_file()  # nothing was made in its place


def test_an_attack_cache_in_a_read_only_store_is_kept_elsewhere(read_only_store):
    from robustkit.analysis.attack_cache import writable

    path = read_only_store / ".cache" / "attack" / "run-pwws-0123.jsonl"
    elsewhere = writable(path, path)
    assert elsewhere != path and elsewhere.name == path.name and elsewhere.parent.is_dir()
    with open(elsewhere, "a") as out:  # the attack appends its lines there
        out.write("{}\n")
