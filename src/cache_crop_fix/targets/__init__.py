"""The transformers release lines the fix targets, each described by one table: `targets/<name>.py`.

A target names the transformers releases it supports, the PyPI sdist its fork branch is built on, the upstream source
fingerprints of every method its overlay replaces, and its stack of steps: each step is an overlay package
(`overlay/<name>/<step>/`) and becomes one commit of the exported stack. A step is for one of two deliveries (`kind`):

- `"upstream"`: a pull request of the upstream series (its own branch, patch and pull request text), one concern, as
  small as the failing `generate` case it fixes;
- `"fork"`: kept on the fork branch people install (`fix-cache-crop`) and never proposed upstream: what fork users need
  beyond the series (atomic pre-checks, refusal messages, fast paths, models `generate` cannot reach today).

The fork steps come after the upstream ones, so that the series applies to `main` on its own and the fork branch is the
series plus the fork steps. Each pull request of `main`'s series applies to `main` alone, unless it names those it
needs (`Step.needs`); a backport's pull requests build on each other.

A step's text (what it does and why, for its pull request and commit) lives next to its overlay, in
`overlay/<name>/<step>/pr/`: `text.md`, where a line `<!-- reproduction.py -->` stands for that Python file of the same
folder as a code block (a script ruff formats and `tests/test_pr_texts.py` runs). `pr/` is no package: the patcher and
the exporter never take it for an overlay module, and the runtime never reads it. The patcher installs every step of
the target that matches the installed transformers; the exporter reads the same table.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version


STEP_KINDS = ("upstream", "fork")


@dataclass(frozen=True)
class Step:
    """One step of a target's stack: an overlay package, and the pull request it becomes."""

    package: str  # the overlay subpackage, e.g. "step1_clamp"
    branch: str  # the branch suffix, e.g. "1-clamp" for `fix-cache-crop-1-clamp`
    title: str  # the commit and pull request title
    tests: tuple[str, ...] = ()  # the exported test classes that belong to this step (and prove it)
    # Those of `tests` that check new API or wording (a keyword, a warning, a message) rather than the cache's state:
    # they fail on the previous step because the API is new, not because of a wrong behaviour
    api_tests: tuple[str, ...] = ()
    behaviour_changes: tuple[str, ...] = ()  # one markdown item each, for the pull request text
    kind: str = "upstream"  # "upstream" (a pull request of the series) or "fork" (the fork branch only)
    # The branch suffixes of the earlier pull requests this one builds on (`("1-clamp",)`). A pull request of `main`'s
    # series that needs none is branched from `main` and verified alone; a backport's build on every earlier one
    needs: tuple[str, ...] = ()
    # What the pull request does and why (markdown), when it is not read from `pr/text.md` (the exporter's own tests)
    text: str | None = None
    # The overlay package whose `pr/` folder holds the text (the `Target` sets its own; a backport names the step of
    # the newer line it backports), and the changes a backport makes to it
    text_package: str = ""
    text_changes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if isinstance(self.needs, str):
            raise TypeError(f"step {self.package}: `needs` is a tuple of branch suffixes, not the str {self.needs!r}")
        if self.kind not in STEP_KINDS:
            raise ValueError(f"step {self.package}: kind {self.kind!r} is not one of {', '.join(STEP_KINDS)}")

    @property
    def upstream(self) -> bool:
        return self.kind == "upstream"

    @property
    def summary(self) -> str:
        """What the pull request does and why (markdown), its reproductions included as code blocks."""
        summary = self.text if self.text is not None else step_text(self.text_package)
        for old, new in self.text_changes:
            summary = summary.replace(old, new)
        return summary

    @property
    def pr_folder(self) -> Path | None:
        """The folder of the text and reproductions (`None` for a step whose text is given inline)."""
        return None if self.text is not None else text_folder(self.text_package)


REPRODUCTION_LINE = re.compile(r"^<!-- (\w+\.py) -->$", re.MULTILINE)


def text_folder(package: str) -> Path:
    """`overlay/<target>/<step>/pr/` of the overlay package `package`."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise LookupError(f"no overlay package {package!r}")
    return Path(spec.origin).parent / "pr"


@functools.cache
def step_text(package: str) -> str:
    """The text of the step whose overlay package is `package`: its `pr/text.md`, each `<!-- x.py -->` line replaced by
    `x.py` of the same folder as a Python code block."""
    folder = text_folder(package)

    def code_block(match: re.Match) -> str:
        return "```python\n" + (folder / match.group(1)).read_text().strip() + "\n```"

    return REPRODUCTION_LINE.sub(code_block, (folder / "text.md").read_text().strip())


def backport(step: Step, package: str, branch: str, text_changes: Mapping[str, str]) -> Step:
    """The step of a backport that makes the change of `step`, a step of a newer line whose code the older release
    shares (a step of that line's `Target`): its overlay imports that step's codemods, and it keeps its tests and text,
    with `text_changes` made to the text (the release its reproductions name, an argument the older release spells
    otherwise)."""
    if not step.text_package and step.text is None:
        raise ValueError(f"backport of {step.package}: pass the step of its target (`TARGET.steps`), which has a text")
    return replace(step, package=package, branch=branch, text_changes=step.text_changes + tuple(text_changes.items()))


@dataclass(frozen=True)
class Target:
    name: str  # the overlay package, e.g. "v5_14"
    label: str  # for people, e.g. "5.14 backport"
    versions: str  # the transformers releases it supports, as a PEP 440 specifier
    sdist_version: str  # the PyPI sdist the fork branch is built on by default
    steps: tuple[Step, ...]
    fingerprints: Mapping[str, frozenset[str]] = field(repr=False, compare=False)
    # What #47433's reproduction (`crop(0)`, then `crop(-5)`, each on a fresh 3-token `DynamicCache`) keeps with the
    # fix, under this release line's own meaning of `crop`
    seed_lengths: tuple[int, int] = (0, 0)
    related: str = ""  # the "Related" section of its pull request texts (markdown)
    # The target this one backports, if any: every pull request must land on upstream `main` first, so the backport's
    # texts point to the `main` stack
    backport_of: str | None = None
    # Whether its first pull request closes #47433 (reported against 5.14; on `main`, `crop(0)` already removes nothing)
    closes_issue: bool = False

    def __post_init__(self):
        # A step's text is in its own overlay folder unless it says where (a backport's is in the newer line's)
        steps = tuple(
            step if step.text_package or step.text is not None else replace(step, text_package=package)
            for step, package in zip(self.steps, self.step_packages())
        )
        object.__setattr__(self, "steps", steps)

    @property
    def overlay_package(self) -> str:
        return f"cache_crop_fix.overlay.{self.name}"

    @property
    def upstream_steps(self) -> tuple[Step, ...]:
        """The pull requests of the upstream series, in order (the fork steps follow them)."""
        return tuple(step for step in self.steps if step.upstream)

    def step_packages(self) -> list[str]:
        return [f"{self.overlay_package}.{step.package}" for step in self.steps]

    def supports(self, version: str) -> bool:
        return Version(version) in SpecifierSet(self.versions, prereleases=True)


def _load_targets() -> tuple[Target, ...]:
    """Every module of this package that defines a `TARGET`: adding a release line is adding a table here."""
    import importlib
    import pkgutil

    found = []
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        if isinstance(getattr(module, "TARGET", None), Target):
            found.append(module.TARGET)
    # Upstream `main` (the newest line) first: its stack is the one that is reviewed first, the others are backports
    return tuple(sorted(found, key=lambda target: Version(target.sdist_version), reverse=True))


TARGETS: tuple[Target, ...] = _load_targets()


def target_for(version: str) -> Target | None:
    """The target that supports transformers `version`, or `None`."""
    return next((target for target in TARGETS if target.supports(version)), None)


def supported_ranges() -> str:
    """The supported transformers releases, for messages: e.g. `>=5.14.0,<5.15`."""
    return " or ".join(target.versions for target in TARGETS)


def get_target(name: str) -> Target:
    for target in TARGETS:
        if target.name == name:
            return target
    raise KeyError(f"unknown target {name!r}: one of {', '.join(target.name for target in TARGETS)}")
