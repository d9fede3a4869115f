"""Stage 1: get the base tree the stack is built on.

Either a contributor's transformers checkout (`--repo`), or by default the PyPI sdist of the target's release made
into a git repository under `build/` (made once, then reused). The sdist has no `tests/utils/`: a stack built on it is
for `pip install`; the pull requests are made with `--repo` on a checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..targets import Target
from .shell import ExportError, git, git_env, read_at, rev, run


BRANCH = "fix-cache-crop"  # the top of the stack; each step also gets `fix-cache-crop-<n>-<name>`
SDIST_IDENTITY = ("transformers sdist import", "cache-crop-fix@users.noreply.invalid")


@dataclass(frozen=True)
class Base:
    repo: Path
    commit: str
    version: str | None  # transformers' `__version__` at `commit`
    description: str  # for people: "transformers v5.14.1 (PyPI sdist)" or "base 0123456789ab"
    is_sdist: bool  # the default base: no upstream tests, the stack is for `pip install` only


def sdist_tag(target: Target) -> str:
    return f"v{target.sdist_version}"


def sdist_message(target: Target) -> str:
    return f"transformers v{target.sdist_version} (PyPI sdist)"


def get_base(
    target: Target,
    repo: Path | None,
    base: str | None,
    build_dir: Path,
    first_branch: str,
    log: Callable[[str], None] = print,
) -> Base:
    """The base commit: `base`, else the parent of the stack's first branch if it exists (exporting again keeps the
    base), else the checkout's `HEAD` (the sdist's tag by default)."""
    is_sdist = repo is None
    if is_sdist:
        repo = prepare_sdist_repo(target, build_dir, log)
        base = base or sdist_tag(target)
    repo = Path(repo).resolve()
    if not (repo / ".git").exists():
        raise ExportError(f"{repo} is not a git repository (pass a transformers checkout to --repo)")
    if base is None:
        base = f"{first_branch}~1" if rev(repo, f"refs/heads/{first_branch}") else "HEAD"
    commit = rev(repo, base)
    if commit is None:
        raise ExportError(f"{repo}: `{base}` is not a commit")
    description = sdist_message(target) if is_sdist else f"base {commit[:12]}"
    return Base(repo, commit, base_version(repo, commit), description, is_sdist)


def base_version(repo: Path, commit: str) -> str | None:
    init = read_at(repo, commit, "src/transformers/__init__.py") or ""
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', init, re.MULTILINE)
    return match.group(1) if match else None


def prepare_sdist_repo(target: Target, build_dir: Path, log: Callable[[str], None] = print) -> Path:
    """The target's transformers sdist as a git repository under `build_dir` (made once, then reused)."""
    version = target.sdist_version
    repo = build_dir / f"transformers-{version}"
    if (repo / ".git").is_dir() and rev(repo, sdist_tag(target)):
        return repo
    if repo.exists():
        log(f"removing the incomplete {repo}")
        shutil.rmtree(repo)
    build_dir.mkdir(parents=True, exist_ok=True)
    sdist = build_dir / f"transformers-{version}.tar.gz"
    if not sdist.exists():
        log(f"downloading the transformers=={version} sdist from PyPI")
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        run([*pip, "-d", build_dir, f"transformers=={version}"])
    with tarfile.open(sdist) as archive:
        top = {member.name.split("/")[0] for member in archive.getmembers()}
        if top != {repo.name}:
            raise ExportError(f"{sdist} does not hold a single `{repo.name}/` folder (found {sorted(top)})")
        date = str(int(archive.getmember(f"{repo.name}/PKG-INFO").mtime)) + " +0000"
        archive.extractall(build_dir, filter="data")
    # The archive's files belong to the uid that built it; git refuses a repository owned by someone else
    uid, gid = os.getuid(), os.getgid()
    for path in [repo, *repo.rglob("*")]:
        stat = path.lstat()
        if (stat.st_uid, stat.st_gid) != (uid, gid):
            os.lchown(path, uid, gid)
    env = git_env(SDIST_IDENTITY, date)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", sdist_message(target), env=env)
    git(repo, "tag", sdist_tag(target))
    log(f"made {repo} a git repository: {sdist_message(target)} ({rev(repo, 'HEAD')[:12]}, tag {sdist_tag(target)})")
    return repo
