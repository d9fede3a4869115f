"""A transformers release as drift reads it: its wheel (the installed source, read without installing it) and its
sdist (what the fork branches are built on), downloaded once into a cache folder, or given as local files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from packaging.version import InvalidVersion, Version


PACKAGE = "transformers"


class DriftError(RuntimeError):
    """Drift cannot tell what a release changed (no network, a missing file, ...): exit status 2."""


@dataclass(frozen=True)
class Release:
    """The files of one transformers release."""

    version: str
    wheel: Path
    sdist: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.version, str):
            raise TypeError(f"Release.version must be a version string, not {type(self.version).__name__}")
        if not isinstance(self.wheel, Path):
            raise TypeError(f"Release.wheel must be a pathlib.Path, not {type(self.wheel).__name__}")

    @cached_property
    def _archive(self) -> zipfile.ZipFile:
        try:
            return zipfile.ZipFile(self.wheel)
        except (OSError, zipfile.BadZipFile) as error:
            raise DriftError(f"{self.wheel} is not a readable wheel: {error}") from error

    @cached_property
    def _names(self) -> frozenset[str]:
        return frozenset(self._archive.namelist())

    def paths(self, prefix: str = "", suffix: str = ".py") -> list[str]:
        """The wheel's files under `prefix` ending with `suffix`, relative to the wheel's root, sorted."""
        return sorted(name for name in self._names if name.startswith(prefix) and name.endswith(suffix))

    def read(self, path: str) -> str | None:
        """The text of `path` (e.g. `transformers/cache_utils.py`) in the wheel, or `None` when it has no such file."""
        if path not in self._names:
            return None
        return self._archive.read(path).decode("utf-8")

    def module_of(self, qualname: str) -> tuple[str, str] | None:
        """Splits `transformers.cache_utils.Cache.crop` into the wheel path of its module and the name in it
        (`transformers/cache_utils.py`, `Cache.crop`), or `None` when no module of the wheel holds it."""
        parts = qualname.split(".")
        for end in range(len(parts) - 1, 0, -1):
            path = "/".join(parts[:end]) + ".py"
            if path in self._names:
                return path, ".".join(parts[end:])
        return None


def check_version(version: str) -> str:
    if not isinstance(version, str):
        raise TypeError(f"a transformers version must be a string such as '5.25.0', not {type(version).__name__}")
    try:
        return str(Version(version))
    except InvalidVersion:
        raise DriftError(f"{version!r} is not a version (expected e.g. 5.25.0)") from None


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True, text=True
    )


def newest_version() -> str:
    """The newest transformers release the package index serves (pre-releases excluded)."""
    result = _pip("index", "versions", PACKAGE)
    match = re.search(rf"^{PACKAGE} \(([^)]+)\)", result.stdout, re.MULTILINE)
    if result.returncode != 0 or match is None:
        output = (result.stderr.strip() or result.stdout.strip())[-500:]
        raise DriftError(f"could not ask the package index for the newest {PACKAGE} release: {output}")
    return match.group(1)


def fetch(version: str, cache_dir: Path, wheel: Path | None = None, sdist: Path | None = None) -> Release:
    """The wheel and sdist of `version` in `cache_dir` (downloaded once with pip, nothing installed), or the local
    files given, copied there."""
    version = check_version(version)
    cache_dir.mkdir(parents=True, exist_ok=True)
    wheel = _local(wheel, cache_dir) if wheel is not None else _download(version, cache_dir, binary=True)
    sdist = _local(sdist, cache_dir) if sdist is not None else _download(version, cache_dir, binary=False)
    return Release(version, wheel, sdist)


def fetch_wheel(version: str, cache_dir: Path, wheel: Path | None = None) -> Release:
    """The wheel of `version` only (see `fetch`)."""
    version = check_version(version)
    cache_dir.mkdir(parents=True, exist_ok=True)
    return Release(version, _local(wheel, cache_dir) if wheel is not None else _download(version, cache_dir, True))


def _local(path: Path, cache_dir: Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DriftError(f"{path} does not exist")
    copy = cache_dir / path.name
    if copy.resolve() != path.resolve():
        shutil.copyfile(path, copy)
    return copy


def _download(version: str, cache_dir: Path, binary: bool) -> Path:
    found = _cached(version, cache_dir, binary)
    if found is not None:
        return found
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    result = _pip("download", "--quiet", "--no-deps", *kind, "-d", str(cache_dir), f"{PACKAGE}=={version}")
    found = _cached(version, cache_dir, binary)
    if result.returncode != 0 or found is None:
        output = (result.stderr.strip() or result.stdout.strip())[-500:]
        raise DriftError(f"could not download the {PACKAGE}=={version} {'wheel' if binary else 'sdist'}: {output}")
    return found


def _cached(version: str, cache_dir: Path, binary: bool) -> Path | None:
    pattern = f"{PACKAGE}-{version}-*.whl" if binary else f"{PACKAGE}-{version}.tar.gz"
    return next(iter(sorted(cache_dir.glob(pattern))), None)
