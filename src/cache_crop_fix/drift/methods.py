"""The upstream methods a target replaces, in another release: the same source, changed, or gone."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from ..export.transplant import method_sources, text_fingerprint
from .release import Release


SAME, CHANGED, GONE = "same", "changed", "gone"


@dataclass(frozen=True)
class MethodDrift:
    qualname: str  # transformers.cache_utils.Cache.crop
    state: str  # SAME, CHANGED or GONE
    fingerprint: str | None  # in the new release (`None`: gone)
    diff: str = ""  # unified diff, from the target's release (when it has the method) to the new one


def _sources(release: Release, qualnames: list[str]) -> dict[str, str]:
    """The source of each of `qualnames` found in `release`'s wheel."""
    modules: dict[str, str] = {}
    for qualname in qualnames:
        found = release.module_of(qualname)
        if found is not None:
            path, name = found
            modules.setdefault(path, qualname[: -len(name) - 1])
    sources = {}
    for path, module_name in modules.items():
        sources.update(method_sources(release.read(path), module_name))
    return sources


def compare_methods(
    fingerprints: Mapping[str, frozenset[str]], release: Release, reference: Release | None = None
) -> list[MethodDrift]:
    """Each method of `fingerprints` (a target's table) in `release`: `same` when its source has a recorded
    fingerprint. The diffs of changed methods start from `reference` (the target's own release), when given."""
    if not isinstance(release, Release):
        raise TypeError(f"compare_methods needs a Release, not {type(release).__name__}")
    qualnames = sorted(fingerprints)
    new = _sources(release, qualnames)
    old = _sources(reference, qualnames) if reference is not None else {}
    found = []
    for qualname in qualnames:
        if qualname not in new:
            found.append(MethodDrift(qualname, GONE, None))
            continue
        fingerprint = text_fingerprint(new[qualname])
        if fingerprint in fingerprints[qualname]:
            found.append(MethodDrift(qualname, SAME, fingerprint))
            continue
        diff = ""
        if qualname in old:
            short = qualname.removeprefix("transformers.")
            diff = "".join(
                difflib.unified_diff(
                    old[qualname].splitlines(keepends=True),
                    new[qualname].splitlines(keepends=True),
                    f"{reference.version}/{short}",
                    f"{release.version}/{short}",
                )
            )
        found.append(MethodDrift(qualname, CHANGED, fingerprint, diff))
    return found


def new_fingerprints(qualnames: list[str], release: Release) -> tuple[dict[str, frozenset[str]], list[str]]:
    """The fingerprints of `qualnames` in `release` (for a new target's table), and the names it does not have."""
    sources = _sources(release, qualnames)
    fingerprints = {name: frozenset({text_fingerprint(sources[name])}) for name in qualnames if name in sources}
    return fingerprints, [name for name in qualnames if name not in sources]
