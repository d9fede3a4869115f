"""`python -m cache_crop_fix drift [VERSION]`: what a transformers release does to the fix, without installing it.

For a release (by default the newest on the package index), its wheel and sdist are downloaded into a cache folder
(`build/drift/<version>/`), and compared with the nearest target (or `--against TARGET`) and that target's own release:

- `methods`     each upstream method the target replaces (its fingerprints): same, changed or gone; diffs of the changed
- `surface`     new cache layer classes, and new `crop` / `activate_past_recording` / `is_croppable` call sites
- `stacks`      which patches of each target's exported stack (`dist/<target>/`) still apply, in order, to its sdist
- `stock_audit` (`--audit`) the target's audit cases on the release's stock transformers, in a venv of its own

The report is printed (lists shortened) and written in full next to the diffs. Exit status: 0 when nothing changed
for the target, 1 when something did, 2 when drift could not tell (no network, a missing file, an audit that could not
run, ...).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version

from ..export.shell import ExportError
from ..targets import TARGETS, Target, get_target, target_for
from .methods import compare_methods
from .release import DriftError, Release, check_version, fetch, fetch_wheel, newest_version
from .report import DriftReport, render, render_audit, render_diffs
from .stacks import check_stack, sdist_repo
from .stock_audit import ensure_venv, install_release, run_stock_audit
from .surface import Surface, new_call_sites, new_layer_classes, surface


PROJECT_ROOT = Path(__file__).resolve().parents[3]
PRINTED_ITEMS = 15  # per list, on the terminal; the report file lists everything

__all__ = ["DriftError", "DriftReport", "drift", "main", "nearest_target"]


def _position(version: str) -> int:
    """A number that orders releases and measures how far apart two release lines are."""
    major, minor, micro = (list(Version(version).release) + [0, 0])[:3]
    return major * 1_000_000 + minor * 1_000 + micro


def _by_distance(version: str) -> list[Target]:
    """Every target, the nearest to `version` first (of two as near, the earlier one)."""
    return sorted(
        TARGETS, key=lambda t: (abs(_position(t.sdist_version) - _position(version)), _position(t.sdist_version))
    )


def nearest_target(version: str) -> tuple[Target, str]:
    """The target that supports `version`, else the nearest release line; and why it was chosen."""
    found = target_for(version)
    if found is not None:
        return found, "supports it"
    return _by_distance(version)[0], "the nearest target"


def audit_table_for(target: Target) -> str | None:
    """The audit table to run for `target`: its own, else that of the nearest target that has one."""
    names = [target.name] + [other.name for other in _by_distance(target.sdist_version) if other is not target]
    return next((name for name in names if importlib.util.find_spec(f"cache_crop_fix.audit.{name}")), None)


def drift(
    version: str,
    target: Target | None = None,
    cache_dir: Path = PROJECT_ROOT / "build" / "drift",
    dist_dir: Path = PROJECT_ROOT / "dist",
    wheel: Path | None = None,
    sdist: Path | None = None,
    audit: bool = False,
    log: Callable[[str], None] = print,
) -> DriftReport:
    """Compares release `version` with `target` (default: the nearest one); writes the report files under
    `cache_dir/<version>/` and returns the report."""
    version = check_version(version)
    if target is None:
        target, chosen = nearest_target(version)
    elif isinstance(target, Target):
        chosen = "--against"
    else:
        raise TypeError(f"target must be a Target (see cache_crop_fix.targets), not {type(target).__name__}")
    folder = cache_dir / version
    release = fetch(version, folder, wheel, sdist)
    if wheel is None:
        reference = fetch_wheel(target.sdist_version, cache_dir / target.sdist_version)
    else:  # offline: the target's release is compared only when its wheel is in the cache already
        reference = _reference_if_cached(target, cache_dir)
    methods = compare_methods(target.fingerprints, release, reference)
    old = surface(reference) if reference else Surface([], [])
    new = surface(release)
    repo = sdist_repo(release, folder / "sdist", log)
    try:
        # The target compared is the one given (its table may differ from the installed one of the same name)
        stacks = [
            check_stack(target if each.name == target.name else each, repo, version, dist_dir) for each in TARGETS
        ]
    except ExportError as error:
        raise DriftError(str(error)) from error
    report = DriftReport(
        version,
        target,
        reference.version if reference else "(not available)",
        chosen,
        methods,
        new_layer_classes(old.layers, new.layers),
        new_layer_classes(new.layers, old.layers),
        new_call_sites(old.calls, new.calls),
        new_call_sites(new.calls, old.calls),
        stacks,
    )
    if reference is None:
        report.notes.append(f"no wheel of {target.sdist_version} in {cache_dir}: classes and call sites not compared")
    if audit:
        _stock_audit(report, release, target, cache_dir, log)
    report.diff_file = folder / f"{target.name}-changed-methods.diff"
    report.diff_file.write_text(render_diffs(report))
    (folder / f"{target.name}-report.txt").write_text(render(report))
    if report.audit is not None:
        (folder / f"{target.name}-stock-audit.txt").write_text(render_audit(report.audit))
    return report


def _reference_if_cached(target: Target, cache_dir: Path) -> Release | None:
    """The wheel of the target's release, if the cache has it."""
    wheels = sorted((cache_dir / target.sdist_version).glob(f"transformers-{target.sdist_version}-*.whl"))
    return Release(target.sdist_version, wheels[0]) if wheels else None


def _stock_audit(report: DriftReport, release: Release, target: Target, cache_dir: Path, log) -> None:
    table = audit_table_for(target)
    if table is None:
        report.audit_note = "no target has an audit table"
        return
    try:
        python = ensure_venv(cache_dir / "audit-venv", log)
        missing = install_release(python, release, cache_dir / release.version / "site", log)
        report.audit = run_stock_audit(python, cache_dir / release.version / "site", table)
    except DriftError as error:  # the rest of the report stands
        report.audit_note = f"could not run: {error}"
        return
    notes = [f"not installable here (left out): {', '.join(missing)}"] if missing else []
    if table != target.name:
        notes.append(f"{target.name} has no audit table of its own")
    report.audit_note = "; ".join(notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cache_crop_fix drift", description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="a transformers release (default: the newest on the index)")
    parser.add_argument("--against", choices=[target.name for target in TARGETS], help="default: the nearest target")
    parser.add_argument("--audit", action="store_true", help="also run the stock audit of the release (a few minutes)")
    parser.add_argument("--cache-dir", type=Path, default=PROJECT_ROOT / "build" / "drift")
    parser.add_argument("--dist-dir", type=Path, default=PROJECT_ROOT / "dist", help="where the stacks' patches are")
    parser.add_argument("--wheel", type=Path, help="the release's wheel, instead of downloading it")
    parser.add_argument("--sdist", type=Path, help="the release's sdist, instead of downloading it")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        version = args.version or newest_version()
        target = get_target(args.against) if args.against else None
        report = drift(
            version,
            target,
            args.cache_dir.resolve(),
            args.dist_dir.resolve(),
            args.wheel,
            args.sdist,
            args.audit,
            log=lambda line: print(line, file=sys.stderr),
        )
    except DriftError as error:
        print(f"drift: cannot tell: {error}", file=sys.stderr)
        return 2
    print(render(report, PRINTED_ITEMS), end="")
    print(f"report: {args.cache_dir.resolve() / report.version / (report.target.name + '-report.txt')}")
    print(f"time: {time.monotonic() - start:.0f} s")
    if report.changes():
        return 1
    return 2 if args.audit and report.audit is None else 0
