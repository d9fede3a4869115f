"""Whether each target's exported stack (`dist/<target>/fix-cache-crop-<step>.patch`) still applies to a release's
sdist, patch after patch in order (`git apply --check` against an index: the work tree is never touched)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..export.base import BRANCH, prepare_sdist_repo, sdist_tag
from ..export.shell import ExportError, git, run
from ..targets import Target
from .release import DriftError, Release


APPLIES, FAILS, NOT_BUILT = "applies", "does not apply", "not built"


@dataclass(frozen=True)
class PatchCheck:
    branch: str  # fix-cache-crop-1-clamp
    state: str  # APPLIES, FAILS or NOT_BUILT
    detail: str = ""  # why it does not apply (git's first lines)


@dataclass(frozen=True)
class StackCheck:
    target: str
    patches: tuple[PatchCheck, ...]

    @property
    def built(self) -> bool:
        return all(patch.state != NOT_BUILT for patch in self.patches)

    @property
    def applies(self) -> bool:
        return all(patch.state == APPLIES for patch in self.patches)


def sdist_repo(release: Release, build_dir: Path, log: Callable[[str], None] = print) -> Path:
    """The release's sdist as a git repository (as the exporter makes its bases), made once under `build_dir`."""
    if release.sdist is None:
        raise DriftError(f"no sdist of transformers {release.version}: pass --sdist")
    # The exporter's base maker only needs the version of a target: this release's
    from ..targets import TARGETS

    stand_in = dataclasses.replace(TARGETS[0], sdist_version=release.version)
    expected = build_dir / f"transformers-{release.version}.tar.gz"
    if release.sdist.resolve() != expected.resolve():
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_bytes(release.sdist.read_bytes())
    try:
        return prepare_sdist_repo(stand_in, build_dir, log)
    except ExportError as error:
        raise DriftError(str(error)) from error


def check_stack(target: Target, repo: Path, version: str, dist_dir: Path) -> StackCheck:
    """Applies `target`'s patches from `dist_dir/<target>/` in order to the sdist commit of `repo`. A patch that does
    not apply is skipped, and the next ones are checked on top of those that applied."""
    patches = [dist_dir / target.name / f"{BRANCH}-{step.branch}.patch" for step in target.steps]
    if not all(patch.is_file() for patch in patches):
        return StackCheck(target.name, tuple(PatchCheck(patch.stem, NOT_BUILT) for patch in patches))
    base = sdist_tag(dataclasses.replace(target, sdist_version=version))
    checks = []
    with tempfile.TemporaryDirectory(prefix="cache-crop-fix-drift-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", base, env=env)
        for patch in patches:
            command = ["git", "-C", repo, "apply", "--cached", "--check", patch]
            result = run(command, env=env, check=False)
            if result.returncode == 0:
                git(repo, "apply", "--cached", str(patch), env=env)
                checks.append(PatchCheck(patch.stem, APPLIES))
            else:
                lines = (result.stderr or result.stdout).strip().splitlines()
                checks.append(PatchCheck(patch.stem, FAILS, "; ".join(lines[:3])))
    return StackCheck(target.name, tuple(checks))
