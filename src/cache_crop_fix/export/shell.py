"""Subprocesses and git, for every stage of the export."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path


class ExportError(RuntimeError):
    """The export cannot proceed; the message says why and what to do."""


def run(
    command: Sequence[str], cwd: Path | None = None, env: dict | None = None, input: str | None = None, check=True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, input=input, capture_output=True, text=True
    )
    if check and result.returncode != 0:
        output = (result.stderr.strip() or result.stdout.strip())[-3000:]
        raise ExportError(f"`{' '.join(map(str, command))}` failed (exit {result.returncode}):\n{output}")
    return result


def git(repo: Path, *args: str, env: dict | None = None, input: str | None = None, check=True) -> str:
    return run(["git", "-C", repo, *args], env=env, input=input, check=check).stdout


def git_env(author: tuple[str, str], date: str, committer: tuple[str, str] | None = None) -> dict:
    (name, email), (committer_name, committer_email) = author, committer or author
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": committer_name,
        "GIT_COMMITTER_EMAIL": committer_email,
        "GIT_COMMITTER_DATE": date,
    }


def rev(repo: Path, ref: str) -> str | None:
    result = run(["git", "-C", repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], check=False)
    return result.stdout.strip() or None


def read_at(repo: Path, commit: str, path: str) -> str | None:
    result = run(["git", "-C", repo, "show", f"{commit}:{path}"], check=False)
    return result.stdout if result.returncode == 0 else None


def write_if_changed(path: Path, content: str) -> bool:
    if path.exists() and path.read_text() == content:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return True
