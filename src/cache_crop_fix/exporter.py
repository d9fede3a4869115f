"""Exports the fix as an upstream-style branch of transformers: `make branch`.

From a transformers 5.14.x source tree (a contributor's git checkout, or by default the PyPI sdist of 5.14.1 made into a
git repository under `build/`), it builds the branch `fix-cache-crop`: one commit on top of the base in which the
overlay is transplanted into upstream's files (see `transplant`), our upstream-style tests are merged into upstream's
test files, and ruff has run with the base's own settings on the touched files only. It then writes
`dist/fix-cache-crop.patch` and `dist/PR.md`, and verifies the branch: a wheel built from it, installed in an isolated
venv without `cache_crop_fix`, passes the exported tests, which fail (those that prove the fix) on the unpatched base.

The commit is deterministic (fixed identity and date): exporting again from the same base and overlay finds the branch
up to date and changes nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from .targets import get_target
from .transplant import (
    OverlayModule,
    TransplantError,
    changed_units,
    check_base,
    merge_test_module,
    parse_overlay,
    transplant,
)


TARGET = get_target("v5_14")
BRANCH = "fix-cache-crop"
SDIST_VERSION = TARGET.sdist_version
BASE_TAG = f"v{SDIST_VERSION}"
BASE_MESSAGE = f"transformers v{SDIST_VERSION} (PyPI sdist)"
ISSUE = 47433
PATCH_NAME = f"{BRANCH}.patch"
# The commit is made with a fixed identity and date (the base's), so that it is reproducible
EXPORT_IDENTITY = ("cache_crop_fix exporter", "cache-crop-fix@users.noreply.invalid")
SDIST_IDENTITY = ("transformers sdist import", "cache-crop-fix@users.noreply.invalid")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The target's steps, in order: each is exported on top of the previous ones
OVERLAY_DIRS = tuple(
    Path(importlib.util.find_spec(package).origin).resolve().parent for package in TARGET.step_packages()
)
TESTS_DIR = f"tests/{TARGET.name}"  # our upstream-style tests of the target, mirroring upstream's `tests/`
UPSTREAM_FINGERPRINTS = TARGET.fingerprints
AUDIT_DOC = "docs/source/en/cache_crop_audit.md"

COMMIT_TITLE = "Fix `crop(0)` and oversized negative crops of the KV caches"
COMMIT_BODY = """\
`DynamicLayer.crop` read every `max_length <= 0` as a relative crop: `crop(0)` kept the whole cache, and removing
more tokens than are cached (`crop(-5)` on 3 tokens) kept stale ones. Rollbacks (assisted and speculative decoding,
cache reuse) could then attend to tokens that were meant to be gone.

- `crop(-k)` removes the last `k` tokens, clamped: removing at least the cached length empties the cache.
- `crop(0)` empties the cache again (an absolute target of 0). Absolute crops (`crop(n)`, `n >= 0`) keep working but
  emit a `FutureWarning`, as 5.15 reads `0` as "remove nothing" and 5.20 rejects positive values; the keyword
  `tokens_to_remove=` already has the 5.15 meaning.
- The argument must be an integer (int, numpy integer or 0-d integer tensor): anything else raises a `TypeError`.
- `Cache.crop` checks every layer before cropping any: a crop that a layer cannot honour exactly raises a clear error
  and leaves the whole cache unchanged. Side tensors (indexer keys, cumulative lengths) move with the key and value
  states.
- Library call sites roll back with the negative form, and skip the call when there is nothing to remove."""

PR_SUMMARY = """\
`Cache.crop` in 5.14 treats every `max_length <= 0` as "remove that many tokens": `crop(0)` is a no-op and an
oversized negative crop keeps stale tokens (#47433). This PR gives `crop` one meaning across all cache layers, as
suggested in the issue thread:

- only negative values are relative: `crop(-k)` removes the last `k` tokens, and removing at least the cached length
  empties the cache (it is clamped instead of slicing with a wrong index);
- `crop(0)` empties the cache (absolute target 0, as before 5.14). Absolute crops (`n >= 0`) still work but emit a
  `FutureWarning` that points to the negative form, since 5.15 reads `0` as "remove nothing";
- `crop(tokens_to_remove=-k)` is accepted as the forward-compatible spelling (`0` removes nothing);
- the argument is validated (`TypeError` for bools, floats, strings, `None`, multi-element tensors);
- `Cache.crop` is atomic: every layer is checked before any is changed, so a crop that one layer cannot honour
  exactly (e.g. a partial crop of a sliding-window layer after its window is full) raises a clear error and leaves the
  cache as it was, while side state (indexer keys, `cumulative_length`, ...) moves in lockstep;
- call sites in the library (assisted decoding, PI0) crop with the negative form and skip no-op crops (under the 5.14
  contract `crop(-0)` is `crop(0)`, which empties the cache)."""

MIGRATION_NOTE = """\
- `cache.crop(-k)`: unchanged for `k <= cached length`; for larger `k` the cache is now empty instead of keeping
  stale tokens.
- `cache.crop(0)`: now empties the cache (5.14.0/5.14.1 silently kept everything), with a `FutureWarning`. For a full
  rollback that also works on 5.15+, write `cache.crop(-cache.get_seq_length())`.
- `cache.crop(target)` with `target > 0`: unchanged result, but it now emits a `FutureWarning`. Migrate to
  `cache.crop(target - cache.get_seq_length())` **only when** `target < cache.get_seq_length()` (under this contract
  `crop(-0)` empties the cache), or to `cache.crop(tokens_to_remove=target - cache.get_seq_length())`, where `0`
  removes nothing.
- Non-integer arguments (bool, float, str, `None`, tensors with more than one element) now raise a `TypeError`.
- Crops that a layer cannot honour exactly now raise (a `ValueError`, `NotImplementedError` or `RuntimeError` with a
  message that says what to do) before anything is changed, instead of silently keeping wrong states."""


class ExportError(RuntimeError):
    """The export cannot proceed; the message says why and what to do."""


# --------------------------------------------------------------------------------------------------------------------
# Small helpers: git, subprocesses


def _run(
    command: Sequence[str], cwd: Path | None = None, env: dict | None = None, input: str | None = None, check=True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, input=input, capture_output=True, text=True
    )
    if check and result.returncode != 0:
        output = (result.stderr.strip() or result.stdout.strip())[-3000:]
        raise ExportError(f"`{' '.join(map(str, command))}` failed (exit {result.returncode}):\n{output}")
    return result


def _git(repo: Path, *args: str, env: dict | None = None, input: str | None = None, check=True) -> str:
    return _run(["git", "-C", repo, *args], env=env, input=input, check=check).stdout


def _git_env(identity: tuple[str, str], date: str, **extra: str) -> dict:
    name, email = identity
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": date,
        **extra,
    }


def _rev(repo: Path, ref: str) -> str | None:
    result = _run(["git", "-C", repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], check=False)
    return result.stdout.strip() or None


def _read_at(repo: Path, commit: str, path: str) -> str | None:
    result = _run(["git", "-C", repo, "show", f"{commit}:{path}"], check=False)
    return result.stdout if result.returncode == 0 else None


def _write_if_changed(path: Path, content: str) -> bool:
    if path.exists() and path.read_text() == content:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return True


# --------------------------------------------------------------------------------------------------------------------
# The base


def prepare_default_base(build_dir: Path, log: Callable[[str], None] = print) -> Path:
    """The transformers 5.14.1 sdist as a git repository under `build_dir` (made once, then reused)."""
    repo = build_dir / f"transformers-{SDIST_VERSION}"
    if (repo / ".git").is_dir() and _rev(repo, BASE_TAG):
        return repo
    if repo.exists():
        log(f"removing the incomplete {repo}")
        shutil.rmtree(repo)
    build_dir.mkdir(parents=True, exist_ok=True)
    sdist = build_dir / f"transformers-{SDIST_VERSION}.tar.gz"
    if not sdist.exists():
        log(f"downloading the transformers=={SDIST_VERSION} sdist from PyPI")
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        _run([*pip, "-d", build_dir, f"transformers=={SDIST_VERSION}"])
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
    env = _git_env(SDIST_IDENTITY, date)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--no-verify", "-m", BASE_MESSAGE, env=env)
    _git(repo, "tag", BASE_TAG)
    log(f"made {repo} a git repository: {BASE_MESSAGE} ({_rev(repo, 'HEAD')[:12]}, tag {BASE_TAG})")
    return repo


def _base_version(repo: Path, commit: str) -> str | None:
    init = _read_at(repo, commit, "src/transformers/__init__.py") or ""
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', init, re.MULTILINE)
    return match.group(1) if match else None


# --------------------------------------------------------------------------------------------------------------------
# What is exported


def load_overlay(overlay_dirs: Path | Sequence[Path] = OVERLAY_DIRS) -> list[OverlayModule]:
    """The overlay modules of every step (a folder each), in step order."""
    modules = []
    for overlay_dir in [overlay_dirs] if isinstance(overlay_dirs, Path) else overlay_dirs:
        paths = sorted(
            p for p in overlay_dir.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts
        )
        modules += [parse_overlay(path.read_text(), path.relative_to(overlay_dir).as_posix()) for path in paths]
    return modules


def exported_test_files(tests_dir: Path) -> list[str]:
    """
    Our upstream-style test files in `tests_dir` (`tests/<target>`, which mirrors upstream's `tests/`), as upstream
    paths: `tests/<target>/utils/test_x.py` is exported as `tests/utils/test_x.py`.
    """
    return sorted(
        "tests/" + path.relative_to(tests_dir).as_posix()
        for path in tests_dir.rglob("test_*.py")
        if path.parent != tests_dir and "fixtures" not in path.relative_to(tests_dir).parts
    )


def modular_counterpart(path: str) -> str | None:
    """`src/transformers/models/x/modular_x.py` for `src/transformers/models/x/modeling_x.py`, else `None`."""
    match = re.fullmatch(r"(src/transformers/models/[^/]+/)modeling_([^/]+\.py)", path)
    return f"{match.group(1)}modular_{match.group(2)}" if match else None


def _module_name(path: str) -> str:
    return path[len("src/") : -len(".py")].replace("/", ".")


@dataclass
class FileChange:
    path: str
    source: str  # the new content
    base: str | None  # the base content (`None`: created)
    expected_units: set[str] = field(default_factory=set)
    summary: list[str] = field(default_factory=list)
    is_test: bool = False


@dataclass
class Plan:
    changes: dict[str, FileChange]
    notes: list[str]


def plan_export(
    repo: Path,
    base_commit: str,
    overlays: Sequence[OverlayModule],
    project_root: Path,
    fingerprints=UPSTREAM_FINGERPRINTS,
) -> Plan:
    """Checks the base and computes the new content of every file the export touches (before ruff)."""
    version = _base_version(repo, base_commit)
    problems, notes = [], []
    if version is None or not TARGET.supports(version):
        problems.append(f"the base is transformers {version or '(unknown version)'}, the fix is for {TARGET.versions}")
    sources = {}
    for module in overlays:
        sources[module.target_path] = _read_at(repo, base_commit, module.target_path)
        problems += check_base(sources[module.target_path], module, fingerprints)
    if problems:
        raise ExportError(
            f"the base {base_commit[:12]} does not match what the fix expects; nothing was exported:\n  "
            + "\n  ".join(problems)
        )

    changes: dict[str, FileChange] = {}
    try:
        for module in overlays:
            targets = [(module.target_path, module.module_name, False)]
            modular = modular_counterpart(module.target_path)
            if modular is not None and _read_at(repo, base_commit, modular) is not None:
                targets.append((modular, _module_name(modular), True))
            for path, module_name, is_modular in targets:
                base = sources.get(path) or _read_at(repo, base_commit, path)
                previous = changes.get(path)
                result = transplant(
                    previous.source if previous else base, module, module_name, allow_missing_classes=is_modular
                )
                if is_modular and result.skipped_classes:
                    notes.append(
                        f"{path} does not define {', '.join(result.skipped_classes)}: only the generated modeling "
                        "file changes for them"
                    )
                if result.source == base:
                    continue
                change = previous or FileChange(path, result.source, base)
                change.source = result.source
                change.expected_units |= result.changed_units | ({"imports"} if result.imports else set())
                change.summary += [f"replace `{name}`" for name in result.replaced]
                change.summary += [f"add `{name}`" for name in result.added]
                change.summary += [f"add helper `{name}`" for name in result.helpers]
                change.summary += [f"import: `{statement}`" for statement in result.imports]
                changes[path] = change
        tests_dir = project_root / TESTS_DIR
        for path in exported_test_files(tests_dir):
            base = _read_at(repo, base_commit, path)
            result = merge_test_module(base, (tests_dir / path.removeprefix("tests/")).read_text(), path)
            if result.source == base:
                continue
            change = FileChange(path, result.source, base, is_test=True)
            change.expected_units = {*result.classes, *result.helpers, "imports"}
            change.summary = ["new file" if result.created else "merged into upstream's file"]
            change.summary += [f"test class `{name}`" for name in result.classes]
            changes[path] = change
    except TransplantError as error:
        raise ExportError(str(error)) from error
    return Plan(changes, notes)


# --------------------------------------------------------------------------------------------------------------------
# Ruff, with the base's settings


@dataclass
class RuffReport:
    version: str
    upstream_pin: str | None
    check: str = ""
    format: str = ""
    skipped: list[str] = field(default_factory=list)
    ok: bool = True

    def describe(self) -> str:
        pin = f"; the base pins ruff=={self.upstream_pin}" if self.upstream_pin else ""
        skipped = f"; not run on {', '.join(self.skipped)} (not ruff-clean in the base)" if self.skipped else ""
        return f"ruff {self.version}{pin}: check: {self.check}; format: {self.format}{skipped}"


def _ruff_command() -> list[str]:
    if _run([sys.executable, "-m", "ruff", "--version"], check=False).returncode == 0:
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return ["ruff"]
    raise ExportError("ruff is not installed: `pip install ruff` (the project pins it in requirements-dev.txt)")


def apply_ruff(changes: dict[str, FileChange], pyproject: str | None, setup_py: str | None) -> RuffReport:
    """`ruff check --fix` and `ruff format` on the changed files only, with the base's `pyproject.toml`."""
    ruff = _ruff_command()
    version = _run([*ruff, "--version"]).stdout.split()[-1]
    pin = re.search(r'"ruff==([^"]+)"', setup_py or "")
    report = RuffReport(version, pin.group(1) if pin else None)
    with tempfile.TemporaryDirectory(prefix="cache-crop-fix-ruff-") as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text(pyproject or "")
        # Files the base already has must be ruff-clean there, or ruff would change lines the fix does not touch
        clean = []
        for path, change in changes.items():
            if change.base is not None:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(change.base)
                checked = _run([*ruff, "check", "--no-cache", "-q", path], cwd=root, check=False)
                formatted = _run([*ruff, "format", "--no-cache", "--check", "-q", path], cwd=root, check=False)
                if checked.returncode or formatted.returncode:
                    report.skipped.append(path)
                    continue
            clean.append(path)
        for path in clean:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(changes[path].source)
        if clean:
            _run([*ruff, "check", "--no-cache", "--fix", "-q", *clean], cwd=root, check=False)
            _run([*ruff, "format", "--no-cache", "-q", *clean], cwd=root, check=False)
            checked = _run([*ruff, "check", "--no-cache", *clean], cwd=root, check=False)
            formatted = _run([*ruff, "format", "--no-cache", "--check", *clean], cwd=root, check=False)
            report.check = "clean" if checked.returncode == 0 else "FAILED:\n" + checked.stdout.strip()
            report.format = "clean" if formatted.returncode == 0 else "FAILED:\n" + formatted.stdout.strip()
            report.ok = checked.returncode == 0 and formatted.returncode == 0
            for path in clean:
                changes[path].source = (root / path).read_text()
        else:
            report.check = report.format = "no file to check"
    return report


def check_minimal(changes: dict[str, FileChange]) -> list[str]:
    """Every top-level unit that differs from the base must be one the overlay (or our tests) changes."""
    problems = []
    for path, change in changes.items():
        if change.base is None:
            continue
        unexpected = sorted(
            unit
            for unit in changed_units(change.base, change.source)
            if unit not in change.expected_units and not (change.is_test and unit.startswith("if is_"))
        )
        if unexpected:
            problems.append(f"{path}: unexpected changes to {', '.join(unexpected)}")
    return problems


# --------------------------------------------------------------------------------------------------------------------
# The commit


def commit_message(changes: dict[str, FileChange]) -> str:
    return f"{COMMIT_TITLE}\n\n{COMMIT_BODY}\n\nFixes #{ISSUE}\n"


def _tree_with(repo: Path, base_commit: str, changes: dict[str, FileChange]) -> str:
    with tempfile.TemporaryDirectory(prefix="cache-crop-fix-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "read-tree", base_commit, env=env)
        for path, change in sorted(changes.items()):
            blob = _git(repo, "hash-object", "-w", "--stdin", f"--path={path}", input=change.source).strip()
            listed = _git(repo, "ls-tree", base_commit, "--", path).split()
            mode = listed[0] if listed else "100644"
            _git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        return _git(repo, "write-tree", env=env).strip()


def _commit(repo: Path, base_commit: str, tree: str, message: str) -> tuple[str, bool]:
    """Returns the branch's commit for `tree` on `base_commit`, and whether it had to be made (or moved)."""
    current = _rev(repo, f"refs/heads/{BRANCH}")
    if current is not None:
        parents = _git(repo, "rev-list", "--parents", "-n", "1", current).split()[1:]
        same_tree = _git(repo, "rev-parse", f"{current}^{{tree}}").strip() == tree
        same_message = _git(repo, "log", "-1", "--format=%B", current).strip() == message.strip()
        if parents == [base_commit] and same_tree and same_message:
            return current, False
    date = _git(repo, "log", "-1", "--format=%cd", "--date=raw", base_commit).strip()
    env = _git_env(EXPORT_IDENTITY, date)
    commit = _git(repo, "commit-tree", tree, "-p", base_commit, "-F", "-", env=env, input=message).strip()
    if _git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip() == f"refs/heads/{BRANCH}":
        _git(repo, "reset", "-q", "--keep", commit)  # keeps the work tree in step, refuses to clobber local changes
    else:
        _git(repo, "branch", "-f", BRANCH, commit)
    return commit, True


# --------------------------------------------------------------------------------------------------------------------
# Verification: the branch's wheel without the overlay, and the unpatched base

# Runs in the verification venv: the seed issue's reproduction, then the exported tests, in one process
_DRIVER = """\
import importlib.util, json, sys, warnings

import pytest
import torch
import transformers
from transformers import DynamicCache


def length_after(argument):
    key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
    cache = DynamicCache()
    cache.update(key, key.clone(), layer_idx=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache.crop(argument)
    return cache.get_seq_length()


with open(sys.argv[1], "w") as smoke:
    json.dump(
        {
            "transformers": transformers.__file__,
            "version": transformers.__version__,
            "overlay_importable": importlib.util.find_spec("cache_crop_fix") is not None,
            "crop(0)": length_after(0),
            "crop(-5)": length_after(-5),
        },
        smoke,
    )
sys.exit(pytest.main(sys.argv[2:]))
"""


@dataclass
class VerifyReport:
    test_files: list[str]
    outcomes: dict[str, dict[str, str]]  # test id -> {"base": outcome, "branch": outcome}
    groups: dict[str, str]  # test id -> test function (parameterized cases grouped)
    smoke: dict[str, dict]
    problems: list[str]
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def counts(self, side: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome.get(side, "missing")] = counts.get(outcome.get(side, "missing"), 0) + 1
        return counts

    def table(self, markdown: bool = False) -> str:
        """Outcomes per test function (parameterized cases grouped), file by file, and the seed issue's example."""
        header = ["test", "cases", f"stock {SDIST_VERSION} (base)", BRANCH]
        rows: list[list[str]] = []
        grouped: dict[str, dict[str, list[str]]] = {}
        for test_id in self.outcomes:
            path, _ = test_id.split("::")
            grouped.setdefault(path, {}).setdefault(self.groups[test_id], []).append(test_id)
        for path, functions in grouped.items():
            rows.append([f"**{path}**" if markdown else f"{path}:", "", "", ""])
            for name, ids in functions.items():
                rows.append([name, str(len(ids)), *(self._cell(ids, side) for side in ("base", "branch"))])
        smoke = [
            f"crop(0) -> {self.smoke.get(side, {}).get('crop(0)', '?')}, "
            f"crop(-5) -> {self.smoke.get(side, {}).get('crop(-5)', '?')}"
            for side in ("base", "branch")
        ]
        rows.append(["seed issue's example (3 cached tokens)", "1", *smoke])
        if markdown:
            lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for row in rows:
                name = row[0] if row[0].startswith("**") or not row[1] else f"`{row[0]}`"
                lines.append("| " + " | ".join([name, *row[1:]]) + " |")
            return "\n".join(lines)
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
        return "\n".join([lines[0], "  ".join("-" * width for width in widths), *lines[1:]])

    def _cell(self, ids: list[str], side: str) -> str:
        outcomes = [self.outcomes[test_id].get(side, "missing") for test_id in ids]
        passed, skipped = outcomes.count("passed"), outcomes.count("skipped")
        cell = f"{passed}/{len(ids)} pass"
        if skipped:
            cell += f", {skipped} skipped"
        if passed + skipped < len(ids):
            cell += ", FAILS"
        return cell


def _requirement(name: str) -> str:
    version = metadata.version(name).split("+")[0]
    return f"{name}=={version}"


def _ensure_venv(venv: Path, log: Callable[[str], None]) -> Path:
    python = venv / "bin" / "python"
    requirements = [_requirement("torch"), _requirement("pytest"), _requirement("parameterized")]
    marker = venv / ".cache-crop-fix-requirements"
    if python.exists() and marker.exists() and marker.read_text().split() == requirements:
        return python
    if not python.exists():
        log(f"creating the isolated verification venv {venv}")
        _run([sys.executable, "-m", "venv", "--clear", venv])
    log(f"installing {' '.join(requirements)} into it")
    _run([python, "-m", "pip", "install", "--quiet", *requirements])
    marker.write_text("\n".join(requirements))
    return python


def _archive(repo: Path, commit: str, paths: Sequence[str], destination: Path) -> None:
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "tree.tar"
        _git(repo, "archive", "--format=tar", "-o", str(archive), commit, "--", *paths)
        with tarfile.open(archive) as tar:
            tar.extractall(destination, filter="data")


def _test_functions(tree: Path, test_files: Sequence[str]) -> set[str]:
    """`path::Class.test_function` for every test function of the test files."""
    names = set()
    for path in test_files:
        for node in ast.walk(ast.parse((tree / path).read_text())):
            if isinstance(node, ast.ClassDef):
                names |= {
                    f"{path}::{node.name}.{member.name}"
                    for member in node.body
                    if isinstance(member, ast.FunctionDef) and member.name.startswith("test")
                }
    return names


def _group_of(test_id: str, functions: set[str]) -> str:
    """`CropTest.test_x` for `path::CropTest.test_x_3_dynamic` (a parameterized case)."""
    candidates = [name for name in functions if test_id == name or re.match(re.escape(name) + r"_\d+(_|$)", test_id)]
    return max(candidates, key=len).split("::")[1] if candidates else test_id.split("::")[1]


def _junit_outcomes(report: Path) -> dict[str, str]:
    """`path::Class.test` -> passed, failed, error or skipped."""
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        *module, class_name = case.get("classname", "").split(".")
        test_id = f"{'/'.join(module)}.py::{class_name}.{case.get('name')}"
        children = {child.tag for child in case}
        outcome = "passed"
        for tag in ("error", "failure", "skipped"):
            if tag in children:
                outcome = {"error": "error", "failure": "failed", "skipped": "skipped"}[tag]
                break
        outcomes[test_id] = outcome
    return outcomes


def verify(
    repo: Path,
    base_commit: str,
    commit: str,
    test_files: Sequence[str],
    work_dir: Path,
    venv: Path,
    log: Callable[[str], None] = print,
) -> VerifyReport:
    start = time.monotonic()
    python = _ensure_venv(venv, log)
    wheels = work_dir / "wheel"
    built_for = wheels / "commit"
    wheel = next(iter(sorted(wheels.glob("transformers-*.whl"))), None) if wheels.exists() else None
    if wheel is None or not built_for.exists() or built_for.read_text() != commit:
        log(f"building a wheel from git+file://{repo}@{BRANCH}")
        if wheels.exists():
            shutil.rmtree(wheels)
        wheels.mkdir(parents=True)
        _run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, f"git+file://{repo}@{BRANCH}"])
        wheel = next(iter(sorted(wheels.glob("transformers-*.whl"))))
        built_for.write_text(commit)
    installed = venv / ".cache-crop-fix-installed"
    if not installed.exists() or installed.read_text() != commit:
        log(f"installing {wheel.name} into the verification venv")
        _run([python, "-m", "pip", "uninstall", "--quiet", "-y", "transformers"], check=False)
        _run([python, "-m", "pip", "install", "--quiet", wheel])
        installed.write_text(commit)

    branch_tree, base_tree = work_dir / "branch", work_dir / "base"
    _archive(repo, commit, [*test_files, "pyproject.toml"], branch_tree)
    _archive(repo, base_commit, ["src/transformers"], base_tree)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
    sides = {"branch": env, "base": {**env, "PYTHONPATH": str(base_tree / "src")}}

    log("running the exported tests against the branch wheel and against the unpatched base")
    processes = {}
    for side, side_env in sides.items():
        report, smoke_file = work_dir / f"junit-{side}.xml", work_dir / f"smoke-{side}.json"
        for path in (report, smoke_file):
            path.unlink(missing_ok=True)
        pytest = [*test_files, "-q", "-p", "no:cacheprovider", "-c", "pyproject.toml", "--rootdir", "."]
        command = [python, "-c", _DRIVER, smoke_file, *pytest, f"--junitxml={report}"]
        log_file = (work_dir / f"pytest-{side}.log").open("w")
        processes[side] = (
            subprocess.Popen(command, cwd=branch_tree, env=side_env, stdout=log_file, stderr=subprocess.STDOUT),
            log_file,
        )
    problems, smoke, results = [], {}, {}
    for side, (process, log_file) in processes.items():
        process.wait()
        log_file.close()
        report, smoke_file = work_dir / f"junit-{side}.xml", work_dir / f"smoke-{side}.json"
        if not smoke_file.exists():
            output = (work_dir / f"pytest-{side}.log").read_text()[-3000:]
            raise ExportError(f"the {side} verification run failed before its tests:\n{output}")
        smoke[side] = json.loads(smoke_file.read_text())
        results[side] = _junit_outcomes(report) if report.exists() else {}

    expected_paths = {"branch": str(venv), "base": str(base_tree)}
    for side, values in smoke.items():
        if not values["transformers"].startswith(expected_paths[side]):
            problems.append(f"the {side} run imported transformers from {values['transformers']}")
        if values["overlay_importable"]:
            problems.append(f"cache_crop_fix is importable in the {side} run: the verification is not isolated")
    if (smoke["branch"]["crop(0)"], smoke["branch"]["crop(-5)"]) != (0, 0):
        problems.append(
            f"the branch wheel gives crop(0) -> {smoke['branch']['crop(0)']}, crop(-5) -> {smoke['branch']['crop(-5)']}"
        )
    functions = _test_functions(branch_tree, test_files)
    outcomes = {
        test_id: {side: results[side].get(test_id, "missing") for side in ("base", "branch")}
        for test_id in sorted(set(results["base"]) | set(results["branch"]))
    }
    if not outcomes:
        problems.append("no test ran")
    failing = [test_id for test_id, outcome in outcomes.items() if outcome["branch"] not in ("passed", "skipped")]
    if failing:
        problems.append(f"{len(failing)} exported test(s) fail on the branch: {', '.join(failing[:10])}")
    if not any(outcome["base"] in ("failed", "error") for outcome in outcomes.values()):
        problems.append("no exported test fails on the unpatched base: none of them proves the fix")
    groups = {test_id: _group_of(test_id, functions) for test_id in outcomes}
    return VerifyReport(list(test_files), outcomes, groups, smoke, problems, time.monotonic() - start)


# --------------------------------------------------------------------------------------------------------------------
# PR.md


def pr_description(
    changes: dict[str, FileChange],
    ruff: RuffReport,
    verification: VerifyReport | None,
    project_root: Path,
    base_description: str,
) -> str:
    audit_path = project_root / AUDIT_DOC
    if audit_path.exists():
        audit = audit_path.read_text().strip()
        audit = re.sub(r"\A# .*\n+", "", audit)  # its own title: the section below has one
    else:
        audit = f"> **TODO (audit table, issue 3):** the layer-by-layer audit from `{AUDIT_DOC}` goes here."
    changed = []
    for path, change in sorted(changes.items()):
        changed += [f"- `{path}`", *(f"  - {item}" for item in change.summary)]
    if verification is not None:
        counts = {side: verification.counts(side) for side in ("base", "branch")}
        fails_on_base = counts["base"].get("failed", 0) + counts["base"].get("error", 0)
        results = "\n".join(
            [
                "Per test function (parameterized cases grouped): the exported tests run against the stock "
                f"{SDIST_VERSION} source and against a wheel built from this branch.",
                "",
                verification.table(markdown=True),
                "",
                f"On the branch, {counts['branch'].get('passed', 0)} of {len(verification.outcomes)} tests pass. On "
                f"the stock base, {fails_on_base} fail (they prove the fix) and {counts['base'].get('passed', 0)} "
                "pass (behaviour that holds either way).",
            ]
        )
    else:
        results = "_Not verified in this export (`--no-verify`)._"
    test_files = verification.test_files if verification else sorted(p for p, c in changes.items() if c.is_test)
    torch_version = metadata.version("torch").split("+")[0]
    tested = "\n".join(
        [
            f"- The exported tests (`{'`, `'.join(test_files)}`) run in an isolated venv (torch {torch_version}, CPU,",
            f"  nothing else of ours) against a wheel built from this branch (`pip wheel git+file://...@{BRANCH}`):",
            f"  all pass. Against the unpatched {base_description}, the tests that prove the fix fail (table above).",
            "- `ruff check` and `ruff format --check` with the repository's `pyproject.toml`, on the touched files: "
            + ruff.describe().replace("\n", " "),
            f"- `pytest {' '.join(test_files)}`",
        ]
    )
    return textwrap.dedent("""\
        # What does this PR do?

        {summary}

        Fixes #{issue}

        ### Changes

        {changed}

        ### Stock vs fixed

        {results}

        ### Audit of the cache layers

        <!-- BEGIN AUDIT TABLE ({audit_doc}, issue 3) -->
        {audit}
        <!-- END AUDIT TABLE -->

        ### Migration note

        {migration}

        ### How was this tested?

        {tested}

        ## Code Agent Policy

        <!-- To be completed by the person who submits this PR: upstream asks submitters to confirm this and to write
        the description themselves. -->

        - [ ] I confirm that this is not a pure code agent PR.

        ## Before submitting
        - [ ] This PR fixes a typo or improves the docs (you can dismiss the other checks if that's the case).
        - [ ] Did you read the [contributor guideline](https://huggingface.co/docs/transformers/contributing) and the
              [Pull Request](https://huggingface.co/docs/transformers/pr_checks) checks?
        - [x] Was this discussed/approved via a Github issue or the [forum](https://discuss.huggingface.co/)? Please add
              a link to it if that's the case. #{issue}
        - [ ] Did you make sure to update the documentation with your changes according to the
              [guidelines](https://github.com/huggingface/transformers/tree/main/docs)?
        - [x] Did you write any new necessary [tests](https://huggingface.co/docs/transformers/testing)?

        ## Who can review?

        generate / cache: @zucchini-nlp @Cyrilvallez
        """).format(
        summary=PR_SUMMARY,
        issue=ISSUE,
        changed="\n".join(changed),
        results=results,
        audit_doc=AUDIT_DOC,
        audit=audit,
        migration=MIGRATION_NOTE,
        tested=tested,
    )


# --------------------------------------------------------------------------------------------------------------------
# The whole export


@dataclass
class ExportReport:
    repo: Path
    base_commit: str
    commit: str
    created: bool
    files: list[str]
    diffstat: str
    ruff: RuffReport
    notes: list[str]
    patch: Path
    pr: Path
    verification: VerifyReport | None
    seconds: float
    verified_now: bool = True


def export(
    repo: Path | None = None,
    base: str | None = None,
    build_dir: Path = PROJECT_ROOT / "build",
    dist_dir: Path = PROJECT_ROOT / "dist",
    project_root: Path = PROJECT_ROOT,
    venv: Path | None = None,
    run_verify: bool = True,
    log: Callable[[str], None] = print,
    overlay_dir: Path | Sequence[Path] = OVERLAY_DIRS,
    fingerprints=UPSTREAM_FINGERPRINTS,
) -> ExportReport:
    """Builds (or finds up to date) the branch, writes the patch and PR.md, and verifies the branch (`run_verify`)."""
    start = time.monotonic()
    default_base = repo is None
    if default_base:
        repo = prepare_default_base(build_dir, log)
        base = base or BASE_TAG
    repo = Path(repo).resolve()
    if not (repo / ".git").exists():
        raise ExportError(f"{repo} is not a git repository (pass a transformers checkout at v5.14.x to --repo)")
    if base is None:
        # The branch is one commit on top of its base: exporting again keeps that base
        base = f"{BRANCH}~1" if _rev(repo, f"refs/heads/{BRANCH}") else "HEAD"
    base_commit = _rev(repo, base)
    if base_commit is None:
        raise ExportError(f"{repo}: `{base}` is not a commit")

    try:
        overlays = load_overlay(overlay_dir)
    except TransplantError as error:
        raise ExportError(str(error)) from error
    plan = plan_export(repo, base_commit, overlays, project_root, fingerprints)
    ruff = apply_ruff(
        plan.changes, _read_at(repo, base_commit, "pyproject.toml"), _read_at(repo, base_commit, "setup.py")
    )
    problems = check_minimal(plan.changes)
    if problems:
        raise ExportError("the export would change more than the overlay does:\n  " + "\n  ".join(problems))

    message = commit_message(plan.changes)
    tree = _tree_with(repo, base_commit, plan.changes)
    commit, created = _commit(repo, base_commit, tree, message)
    if default_base and _git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip() != f"refs/heads/{BRANCH}":
        _git(repo, "checkout", "-q", BRANCH)
    diffstat = _git(repo, "diff", "--stat", base_commit, commit)

    dist_dir.mkdir(parents=True, exist_ok=True)
    patch = dist_dir / PATCH_NAME
    _write_if_changed(patch, _git(repo, "format-patch", "-1", "--stdout", "--no-signature", commit))

    stored = build_dir / "verify" / "report.json"
    verification = None
    if run_verify:
        verification = verify(
            repo,
            base_commit,
            commit,
            [path for path, change in sorted(plan.changes.items()) if change.is_test],
            build_dir / "verify",
            venv or build_dir / "verify-venv",
            log,
        )
        stored.write_text(json.dumps({"commit": commit, **dataclasses.asdict(verification)}, indent=1))
    elif stored.exists():
        # Without verification, PR.md keeps the results of the last one if it was for this very commit
        previous = json.loads(stored.read_text())
        if previous.pop("commit") == commit:
            verification = VerifyReport(**previous)
    base_description = BASE_MESSAGE if default_base else f"base {base_commit[:12]}"
    pr = dist_dir / "PR.md"
    _write_if_changed(pr, pr_description(plan.changes, ruff, verification, project_root, base_description))
    return ExportReport(
        repo,
        base_commit,
        commit,
        created,
        sorted(plan.changes),
        diffstat,
        ruff,
        plan.notes,
        patch,
        pr,
        verification,
        time.monotonic() - start,
        run_verify,
    )


def summary(report: ExportReport) -> str:
    lines = [
        f"branch {BRANCH} in {report.repo}: {report.commit[:12]} on base {report.base_commit[:12]} "
        + ("(new commit)" if report.created else "(already up to date: nothing changed)"),
        report.diffstat.rstrip(),
        report.ruff.describe(),
        *[f"note: {note}" for note in report.notes],
        f"patch: {report.patch}",
        f"pull request description: {report.pr}",
    ]
    if report.verification is not None:
        verification = report.verification
        when = f"{verification.seconds:.0f} s" if report.verified_now else "not run now: the last one, of this commit"
        lines += ["", f"verification ({when}):", verification.table()]
        lines.append(
            "verified: OK" if verification.ok else "verification FAILED:\n  " + "\n  ".join(verification.problems)
        )
    lines += [
        "",
        "install the fork with:",
        f'  pip install "git+file://{report.repo}@{BRANCH}"',
        f"or push the branch ({BRANCH}) to your fork and `pip install git+https://github.com/<you>/transformers@{BRANCH}`",
        f"total: {report.seconds:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="a transformers git checkout at v5.14.x (default: the PyPI sdist)")
    parser.add_argument("--base", help=f"the commit to build on (default: {BRANCH}~1 if the branch exists, else HEAD)")
    parser.add_argument("--build-dir", type=Path, default=PROJECT_ROOT / "build")
    parser.add_argument("--dist-dir", type=Path, default=PROJECT_ROOT / "dist")
    parser.add_argument("--venv", type=Path, help="the verification venv (default: BUILD_DIR/verify-venv)")
    parser.add_argument("--no-verify", action="store_true", help="skip building and testing the wheel")
    args = parser.parse_args(argv)
    try:
        report = export(
            repo=args.repo,
            base=args.base,
            build_dir=args.build_dir.resolve(),
            dist_dir=args.dist_dir.resolve(),
            venv=args.venv.resolve() if args.venv else None,
            run_verify=not args.no_verify,
        )
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary(report))
    ok = report.ruff.ok and (report.verification is None or report.verification.ok)
    return 0 if ok else 1
