"""tools/check_commits.py (run by .ci/run): commit subjects after the base are at most 72
characters; commits up to the base are exempt; without the base, only HEAD is checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "check_commits.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Isolated from the user's git configuration (signing, hooks, templates).
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def check(repo: Path, base: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo), "--base", base], env=GIT_ENV, capture_output=True, text=True
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_script_defaults_to_the_last_commit_before_the_rule():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "ce025fc" in out.stdout and "72" in out.stdout


def test_short_subjects_pass_and_history_before_the_base_is_exempt(repo):
    commit(repo, "old history " + "x" * 100)  # before the base: exempt
    base = commit(repo, "the base " + "y" * 90)  # the base itself: exempt
    commit(repo, "short subject")
    commit(repo, "s" * 72)  # exactly the limit
    out = check(repo, base)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == "", out.stdout
    assert "2 commit subject(s) since" in out.stderr


def test_a_73_character_subject_fails_with_hash_length_and_subject(repo):
    base = commit(repo, "base")
    commit(repo, "fine")
    long_subject = "L" * 73
    bad = commit(repo, long_subject + "\n\nThe body may be as long as it likes: " + "b" * 200)
    commit(repo, "fine again")
    out = check(repo, base)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [f"{git(repo, 'rev-parse', '--short', bad)} 73 {long_subject}"]


def test_characters_not_bytes_are_counted(repo):
    base = commit(repo, "base")
    commit(repo, "é" * 72)  # 144 bytes, 72 characters
    assert check(repo, base).returncode == 0
    commit(repo, "é" * 73)
    assert check(repo, base).returncode == 1


def test_without_the_base_only_head_is_checked(repo):
    commit(repo, "an old commit whose subject is far too long " + "z" * 60)
    commit(repo, "short head")
    missing = "0" * 40  # not in this history (a shallow clone)
    out = check(repo, missing)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "HEAD's subject only" in out.stderr
    commit(repo, "h" * 73)
    out = check(repo, missing)
    assert out.returncode == 1 and out.stdout.startswith(git(repo, "rev-parse", "--short", "HEAD"))
