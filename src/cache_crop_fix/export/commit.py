"""Stage 5: commit each step on top of the previous one (the stack), and each step on its own branch
(`fix-cache-crop-1-clamp`, ...), and write one patch per step to `dist/`.

A pull request's branch is its own commit on the base, or on the branch of the pull request it needs; a fork step's
branch is its commit on the stack. The top of the stack is the fork branch, `fix-cache-crop`: one more commit gives it
a local version (`fork_version`), so that an install of it says what it is; the pull requests' branches never have
that commit.

Commits are made from trees (git plumbing): a contributor's work tree and index are left alone. They are
reproducible: the author is the contributor's (git config, or `--author`), the date the base's; exporting again from
the same base and overlay finds every branch up to date and changes nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .base import BRANCH
from .fork_version import INIT_PATH, SETUP_PATH, versioned_sources
from .fork_version import message as fork_message
from .shell import ExportError, git, git_env, read_at, rev, write_if_changed
from .transplant import FileChange


# Used only when no git identity is configured: it must be obvious in `git log` that it is to be replaced
PLACEHOLDER_AUTHOR = ("Your Name (set git config user.name, or pass --author)", "you@example.invalid")


@dataclass
class StepCommit:
    branch: str
    commit: str
    parent: str
    created: bool  # made (or moved) now; `False`: the branch was up to date
    files: list[str]
    added: int  # lines, as `git diff --numstat` counts them
    removed: int
    patch: Path
    test_added: int = 0  # of `added` and `removed`, the lines under `tests/`
    test_removed: int = 0
    # Of `test_added`, the license header and imports of the test files this commit creates: a pull request made from
    # a checkout that has these files (`--repo`) does not add them
    new_test_headers: int = 0

    @property
    def code(self) -> tuple[int, int]:
        """Lines added and removed outside `tests/` (comments and docstrings included)."""
        return self.added - self.test_added, self.removed - self.test_removed


def contributor(repo: Path, author: str | None = None) -> tuple[tuple[str, str], bool]:
    """The commit author: `author` ("Name <email>"), else the repository's git identity, else a placeholder.

    Returns it and whether it is the placeholder.
    """
    if author is not None:
        match = re.fullmatch(r"\s*(.+?)\s*<([^<>]+)>\s*", author)
        if match is None:
            raise ExportError(f'--author must look like "Name <email>", not {author!r}')
        return (match.group(1), match.group(2)), False
    name = git(repo, "config", "user.name", check=False).strip()
    email = git(repo, "config", "user.email", check=False).strip()
    if name and email:
        return (name, email), False
    return PLACEHOLDER_AUTHOR, True


def _tree_with(repo: Path, parent: str, changes: dict[str, FileChange]) -> str:
    with tempfile.TemporaryDirectory(prefix="cache-crop-fix-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, env=env)
        for path, change in sorted(changes.items()):
            blob = git(repo, "hash-object", "-w", "--stdin", f"--path={path}", input=change.source).strip()
            listed = git(repo, "ls-tree", parent, "--", path).split()
            mode = listed[0] if listed else "100644"
            git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        return git(repo, "write-tree", env=env).strip()


def _set_branch(repo: Path, branch: str, commit: str) -> None:
    if git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip() == f"refs/heads/{branch}":
        git(repo, "reset", "-q", "--keep", commit)  # keeps the work tree in step, refuses to clobber local changes
    else:
        git(repo, "branch", "-f", branch, commit)


def stack_commit(
    repo: Path, parent: str, changes: dict[str, FileChange], message: str, author: tuple[str, str], date: str
) -> str:
    """Commits `changes` on `parent` without a branch (a pull request's commit on the stack): the same inputs give the
    same commit."""
    tree = _tree_with(repo, parent, changes)
    return git(repo, "commit-tree", tree, "-p", parent, "-F", "-", env=git_env(author, date), input=message).strip()


def commit_step(
    repo: Path,
    parent: str,
    changes: dict[str, FileChange],
    message: str,
    branch: str,
    author: tuple[str, str],
    date: str,
    dist_dir: Path,
) -> StepCommit:
    """Commits `changes` on `parent` as `branch` (or finds the branch up to date), and writes its patch."""
    tree = _tree_with(repo, parent, changes)
    current = rev(repo, f"refs/heads/{branch}")
    commit, created = current, False
    if current is None or not _is_same(repo, current, parent, tree, message, author):
        env = git_env(author, date)
        commit = git(repo, "commit-tree", tree, "-p", parent, "-F", "-", env=env, input=message).strip()
        _set_branch(repo, branch, commit)
        created = True
    numstat = [line.split("\t") for line in git(repo, "diff", "--numstat", parent, commit).splitlines()]
    patch = dist_dir / f"{branch}.patch"
    write_if_changed(patch, git(repo, "format-patch", "-1", "--stdout", "--no-signature", commit))
    tests = [(int(added), int(removed), path) for added, removed, path in numstat if path.startswith("tests/")]
    new_tests = [path for _, _, path in tests if path in changes and not git(repo, "ls-tree", parent, "--", path)]
    return StepCommit(
        branch,
        commit,
        parent,
        created,
        [path for _, _, path in numstat],
        sum(int(added) for added, _, _ in numstat),
        sum(int(removed) for _, removed, _ in numstat),
        patch,
        sum(added for added, _, _ in tests),
        sum(removed for _, removed, _ in tests),
        sum(_header_lines(changes[path].source) for path in new_tests),
    )


def _header_lines(source: str) -> int:
    """The lines of a test file before its first function, class or decorator: license header and imports."""
    for number, line in enumerate(source.splitlines()):
        if re.match(r"(def |class |@)", line):
            return number
    return 0


def _is_same(repo: Path, commit: str, parent: str, tree: str, message: str, author: tuple[str, str]) -> bool:
    parents = git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    fields = git(repo, "log", "-1", "--format=%T%n%an%n%ae", commit).splitlines()
    same_message = git(repo, "log", "-1", "--format=%B", commit).strip() == message.strip()
    return parents == [parent] and fields == [tree, *author] and same_message


def version_fork(repo: Path, top: str, author: tuple[str, str], date: str) -> tuple[str, str]:
    """The fork branch's own commit on top of the stack (see `fork_version`): made, or found up to date. Returns it
    and the local version it sets."""
    version, sources = versioned_sources(read_at(repo, top, INIT_PATH), read_at(repo, top, SETUP_PATH), top)
    changes = {path: FileChange(path, source, read_at(repo, top, path)) for path, source in sources.items()}
    tree = _tree_with(repo, top, changes)
    text = fork_message(version, top)
    current = rev(repo, f"refs/heads/{BRANCH}")
    if current is not None and _is_same(repo, current, top, tree, text, author):
        return current, version
    commit = git(repo, "commit-tree", tree, "-p", top, "-F", "-", env=git_env(author, date), input=text)
    return commit.strip(), version


def finish_stack(
    repo: Path,
    base: str,
    stack: list[str],
    num_upstream: int,
    dist_dir: Path,
    check_out: bool,
    author: tuple[str, str],
    date: str,
) -> tuple[Path, str]:
    """Points `fix-cache-crop` at the fork branch's version commit on top of the stack (`stack`: each step's commit on
    the previous one, from `base`), writes the fork branch's steps (every commit, without that one) and the upstream
    series (its first `num_upstream` commits) as one mbox each (`git am` applies them, in order), and checks the top
    branch out when the repository is ours (the sdist's). Returns the fork branch's mbox and its local version."""
    top = stack[-1]
    fork, version = version_fork(repo, top, author, date)
    if rev(repo, f"refs/heads/{BRANCH}") != fork:
        _set_branch(repo, BRANCH, fork)
    if check_out and git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip() != f"refs/heads/{BRANCH}":
        git(repo, "checkout", "-q", BRANCH)
    series = dist_dir / f"{BRANCH}.patch"
    for path, last in ((series, top), (dist_dir / f"{BRANCH}-upstream.patch", stack[num_upstream - 1])):
        stack_range = f"{base}..{last}"
        write_if_changed(path, git(repo, "format-patch", "--stdout", "--no-signature", stack_range))
    return series, version
