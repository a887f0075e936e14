#!/usr/bin/env python3
"""Check that commit subjects are at most 72 characters (CI runs it from .ci/run).

The rule holds from commit ce025fc on: commits up to and including it are history and exempt.
What is checked:

- when the base commit is an ancestor of HEAD (a clone with full history, as CI has): every
  commit in ``git rev-list BASE..HEAD`` (merges and commits brought in by them included);
- otherwise (a shallow clone that lacks the base, or a branch that does not contain it): only
  HEAD's own subject, with a note on stderr saying so.

The subject is git's ``%s`` (the commit message's first paragraph, lines joined by spaces);
its length is counted in characters, not bytes. Each offending commit is printed on one line,
``<short hash> <length> <subject>``, on stdout, and the exit status is 1; otherwise the exit
status is 0. A one-line summary goes to stderr either way. Standard library only, so it runs before any virtualenv
exists.

    python3 tools/check_commits.py [--base REV] [--max-length 72] [--repo PATH]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

BASE = "ce025fc513f4b1d217e3c16d29602e3775222a7c"  # the last commit before the rule
MAX_LENGTH = 72


def _git(repo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, encoding="utf-8", errors="replace", check=check
    )


def is_ancestor(repo: str, base: str) -> bool:
    """Whether ``base`` is a commit in this repository's history and an ancestor of HEAD."""
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", check=False).returncode:
        return False
    return _git(repo, "merge-base", "--is-ancestor", base, "HEAD", check=False).returncode == 0


def commits_to_check(repo: str, base: str) -> tuple[list[tuple[str, str]], bool]:
    """The (short hash, subject) of each commit the rule covers, newest first, and whether the
    base was found (False: only HEAD is checked)."""
    found = is_ancestor(repo, base)
    spec = [f"{base}..HEAD"] if found else ["-1", "HEAD"]
    out = _git(repo, "log", "--format=%h%x00%s%x1e", *spec).stdout
    commits = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if record:
            short, _, subject = record.partition("\x00")
            commits.append((short, subject))
    return commits, found


def offenders(commits: list[tuple[str, str]], max_length: int = MAX_LENGTH) -> list[str]:
    """One line per commit whose subject is longer than ``max_length`` characters."""
    return [f"{short} {len(subject)} {subject}" for short, subject in commits if len(subject) > max_length]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=BASE, help="commits after this one are checked (default: %(default).7s)")
    parser.add_argument(
        "--max-length", type=int, default=MAX_LENGTH, help="longest subject allowed (default: %(default)s)"
    )
    parser.add_argument("--repo", default=".", help="the repository (default: the current directory)")
    args = parser.parse_args(argv)

    commits, found = commits_to_check(args.repo, args.base)
    if not found:
        print(
            f"check_commits: {args.base[:7]} is not an ancestor of HEAD here (shallow clone?): "
            "checking HEAD's subject only",
            file=sys.stderr,
        )
    bad = offenders(commits, args.max_length)
    for line in bad:
        print(line)
    if bad:
        print(
            f"check_commits: {len(bad)} of {len(commits)} commit subject(s) over "
            f"{args.max_length} characters (put the why in the body)",
            file=sys.stderr,
        )
        return 1
    since = f"since {args.base[:7]}" if found else "(HEAD only)"
    print(
        f"check_commits: {len(commits)} commit subject(s) {since} within {args.max_length} characters", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
