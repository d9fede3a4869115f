"""Stage 4: format a step's files with ruff under the base's own settings, then check that the step changes nothing
but what it owns (the units its overlay and its test classes add or replace)."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .shell import ExportError, run
from .transplant import FileChange, changed_units


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


def _ruff_command(pin: str | None = None) -> list[str]:
    """The ruff the base pins (run by uv, which caches it after the first download) when it can be had, else ours."""
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if pin and Path(uv).exists():
        pinned = [uv, "tool", "run", "--quiet", f"ruff@{pin}"]
        if run([*pinned, "--version"], check=False).stdout.split()[-1:] == [pin]:
            return pinned
    if run([sys.executable, "-m", "ruff", "--version"], check=False).returncode == 0:
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return ["ruff"]
    raise ExportError("ruff is not installed: `pip install ruff` (the project pins it in requirements-dev.txt)")


def apply_ruff(changes: dict[str, FileChange], pyproject: str | None, setup_py: str | None) -> RuffReport:
    """`ruff check --fix` and `ruff format` on the changed files only, with the base's `pyproject.toml`."""
    pin = re.search(r'"ruff==([^"]+)"', setup_py or "")
    ruff = _ruff_command(pin.group(1) if pin else None)
    version = run([*ruff, "--version"]).stdout.split()[-1]
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
                checked = run([*ruff, "check", "--no-cache", "-q", path], cwd=root, check=False)
                formatted = run([*ruff, "format", "--no-cache", "--check", "-q", path], cwd=root, check=False)
                if checked.returncode or formatted.returncode:
                    report.skipped.append(path)
                    continue
            clean.append(path)
        for path in clean:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(changes[path].source)
        if clean:
            # An import that our version of a method no longer needs is removed (F401): the step changes the imports
            run([*ruff, "check", "--no-cache", "--select", "F401", "--fix", "-q", *clean], cwd=root, check=False)
            for path in clean:
                if (root / path).read_text() != changes[path].source:
                    changes[path].expected_units.add("imports")
                    changes[path].summary.append("remove an import the change left unused")
            run([*ruff, "check", "--no-cache", "--fix", "-q", *clean], cwd=root, check=False)
            run([*ruff, "format", "--no-cache", "-q", *clean], cwd=root, check=False)
            checked = run([*ruff, "check", "--no-cache", *clean], cwd=root, check=False)
            formatted = run([*ruff, "format", "--no-cache", "--check", *clean], cwd=root, check=False)
            report.check = "clean" if checked.returncode == 0 else "FAILED:\n" + checked.stdout.strip()
            report.format = "clean" if formatted.returncode == 0 else "FAILED:\n" + formatted.stdout.strip()
            report.ok = checked.returncode == 0 and formatted.returncode == 0
            for path in clean:
                changes[path].source = (root / path).read_text()
        else:
            report.check = report.format = "no file to check"
    return report


def check_minimal(changes: dict[str, FileChange]) -> list[str]:
    """Every top-level unit that differs from the file before the step must be one the step changes.

    Units are keyed the same way on both sides (`class X` and `X.method` for classes, the names a statement binds,
    `imports`, `if <test>` for a block): see `transplant.changed_units`.
    """
    problems = []
    for path, change in changes.items():
        if change.base is None:
            continue
        unexpected = sorted(set(changed_units(change.base, change.source)) - change.expected_units)
        if unexpected:
            problems.append(f"{path}: unexpected changes to {', '.join(unexpected)}")
    return problems
