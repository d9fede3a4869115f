"""The stock audit of a release: a target's audit cases run on that release's transformers, unpatched, in a venv of
its own (`build/drift/audit-venv`: torch and the release's installable requirements). The release's wheel is installed
with `--no-deps` into its own folder (`build/drift/<version>/site`), so one venv serves every release."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .release import DriftError, Release


# audit/common.py's verdicts, as the drift report names them
KINDS = {"correct": "exact", "raises clearly": "refused", "INCONSISTENT": "wrong", "crash": "crash"}
VENV_PACKAGES = ("torch", "numpy", "packaging")
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds `cache_crop_fix`

# Runs in the audit venv: the cases of one target's table on stock transformers; prints the verdicts as JSON
_DRIVER = """\
import json, sys, warnings

warnings.simplefilter("ignore")
import cache_crop_fix  # applies the fix where the release is supported: reverted below
import transformers
from cache_crop_fix import patcher
from cache_crop_fix.audit import table
from cache_crop_fix.audit.common import _classes

patcher.revert()
audit_table = table(sys.argv[1])
_classes()
cases = audit_table.cases(audit_table)
rows = []
for case in cases:
    outcome = audit_table.run_case(case)
    rows.append([case.family, case.scenario, case.argument, outcome.kind, outcome.detail])
json.dump({"transformers": transformers.__version__, "file": transformers.__file__, "rows": rows}, sys.stdout)
"""


@dataclass(frozen=True)
class StockAudit:
    table: str  # the target whose cases ran
    rows: tuple[tuple[str, str, str, str, str], ...]  # family, scenario, call, kind (as KINDS names it), detail

    def counts(self) -> dict[str, int]:
        return {kind: sum(row[3] == kind for row in self.rows) for kind in KINDS.values()}


def _requirement(name: str) -> str:
    try:
        return f"{name}=={metadata.version(name).split('+')[0]}"
    except metadata.PackageNotFoundError:
        return name


def _pip(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *map(str, args)], capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise DriftError(f"pip {' '.join(map(str, args[:3]))} ... failed: {result.stderr.strip()[-800:]}")
    return result


def ensure_venv(venv: Path, log: Callable[[str], None]) -> Path:
    """The audit venv, with torch, numpy and packaging at this environment's versions (made once)."""
    python = venv / "bin" / "python"
    requirements = [_requirement(name) for name in VENV_PACKAGES]
    marker = venv / ".cache-crop-fix-drift"
    if python.exists() and marker.exists() and marker.read_text().split() == requirements:
        return python
    log(f"creating the audit venv {venv} ({' '.join(requirements)})")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
    _pip(python, "install", "--quiet", *requirements)
    marker.write_text("\n".join(requirements))
    return python


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]


def install_release(python: Path, release: Release, site: Path, log: Callable[[str], None]) -> list[str]:
    """Installs the release's wheel into `site` (`--no-deps`) and its requirements into the venv; returns those that
    could not be installed (5.25's `kernels>=0.19.1` is not served here; transformers runs without it)."""
    marker = site.parent / "site.wheel"
    if not (site.exists() and marker.exists() and marker.read_text() == release.wheel.name):
        if site.exists():
            shutil.rmtree(site)
        log(f"installing {release.wheel.name} (--no-deps) into {site}")
        _pip(python, "install", "--quiet", "--no-deps", "--no-compile", "--target", site, release.wheel)
        marker.write_text(release.wheel.name)
    requires = _requires(release.wheel)
    if _pip(python, "install", "--quiet", *requires, check=False).returncode == 0:
        return []
    missing = []
    for requirement in requires:
        if _pip(python, "install", "--quiet", requirement, check=False).returncode != 0:
            missing.append(requirement)
    return missing


def run_stock_audit(python: Path, site: Path, table: str, timeout: float = 900) -> StockAudit:
    """Runs the cases of `table` (a target name with an audit table) on the stock transformers of `site`."""
    env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(PYTHONPATH=f"{site}:{SOURCE_ROOT}", PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="cache-crop-fix-audit-") as tmp:
        result = subprocess.run(
            [str(python), "-c", _DRIVER, table],
            capture_output=True,
            text=True,
            cwd=tmp,
            env={**env, "OMP_NUM_THREADS": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"},
            timeout=timeout,
        )
    if result.returncode != 0:
        raise DriftError(f"the stock audit failed: {result.stderr.strip()[-1500:]}")
    found = json.loads(result.stdout)
    if not found["file"].startswith(str(site)):
        raise DriftError(f"the stock audit imported transformers from {found['file']}, not {site}")
    rows = tuple(
        (family, scenario, call, KINDS[kind], detail) for family, scenario, call, kind, detail in found["rows"]
    )
    return StockAudit(table, rows)
