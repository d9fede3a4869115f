"""`python -m cache_crop_fix new-target VERSION [--from TARGET]`: adds a target for a new transformers release line.

Adding a target is adding files, made from the nearest target (or `--from`):

- `src/cache_crop_fix/targets/v<major>_<minor>.py`: its table, with the name, label, versions and sdist updated and the
  fingerprints of the same upstream methods recomputed from the new release's wheel (methods it no longer has are
  listed in a comment);
- `src/cache_crop_fix/overlay/<new>/`: the same step packages, empty (the fix on the new release is the work left), with
  their pull request texts and reproductions (`pr/`) copied;
- `src/cache_crop_fix/audit/<new>.py`: the nearest audit table, for the new target;
- `tests/<new>/utils/`: the upstream-style tests' folder, with a placeholder test;
- `requirements-<new>.txt` (and `-nodeps.txt`): its venv's requirements, for `make test-<new>`.

The patcher, exporter, audit and CLI find the new target from its table. What is left to do is printed.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import libcst as cst
from packaging.version import Version

from .drift import PROJECT_ROOT, audit_table_for, nearest_target
from .drift.methods import new_fingerprints
from .drift.release import DriftError, Release, check_version, fetch_wheel
from .targets import TARGETS, Target, get_target


LINE_LENGTH = 119  # the project's (and upstream's) ruff setting


def target_name(version: str) -> str:
    """`5.26.0` -> `v5_26`."""
    release = Version(check_version(version)).release
    return f"v{release[0]}_{release[1] if len(release) > 1 else 0}"


def _line(version: str) -> str:
    release = Version(version).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def fingerprints_source(fingerprints: Mapping[str, frozenset[str]], gone: list[str], version: str) -> str:
    """The `FINGERPRINTS = {...}` statement of a target table (formatted as `python -m cache_crop_fix fingerprints`)."""
    lines = [f"# Read from transformers {version}"]
    if gone:
        lines.append(f"# Replaced by the target this one was made from, but not in transformers {version}:")
        lines += [f"#   {qualname}" for qualname in gone]
    lines.append("FINGERPRINTS: dict[str, frozenset[str]] = {")
    for qualname in sorted(fingerprints):
        digests = ", ".join(f'"{digest}"' for digest in sorted(fingerprints[qualname]))
        line = f'    "{qualname}": frozenset({{{digests}}}),'
        if len(line) > LINE_LENGTH:  # as ruff formats it
            line = f'    "{qualname}": frozenset(\n        {{{digests}}}\n    ),'
        lines.append(line)
    lines.append("}")
    return "\n".join(lines) + "\n"


class _TableRewriter(cst.CSTTransformer):
    """Rewrites a target table: its docstring, `FINGERPRINTS` and the `Target(...)` keywords."""

    def __init__(self, docstring: str, fingerprints: str, keywords: Mapping[str, str | None]) -> None:
        self.docstring, self.fingerprints, self.keywords = docstring, fingerprints, keywords

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = list(updated.body)
        first = body[0] if body else None
        if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr):
            body[0] = cst.parse_statement(self.docstring)
        replaced = []
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine) and _assigns(statement, "FINGERPRINTS"):
                new = cst.parse_module(self.fingerprints)
                # The comments above it, but for the release it was read from: the new one's follow
                kept = [
                    line
                    for line in statement.leading_lines
                    if line.comment is None or not line.comment.value.startswith("# Read from")
                ]
                replaced.append(new.body[0].with_changes(leading_lines=[*kept, *new.header]))
            else:
                replaced.append(statement)
        return updated.with_changes(body=replaced)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "Target"):
            return updated
        arguments = []
        for argument in updated.args:
            name = argument.keyword.value if argument.keyword else None
            if name in self.keywords:
                if self.keywords[name] is None:
                    continue
                argument = argument.with_changes(value=cst.SimpleString(f'"{self.keywords[name]}"'))
            arguments.append(argument)
        return updated.with_changes(args=arguments)


def _assigns(statement: cst.SimpleStatementLine, name: str) -> bool:
    node = statement.body[0]
    targets = [node.target] if isinstance(node, cst.AnnAssign) else getattr(node, "targets", ())
    return any(
        isinstance(getattr(t, "target", t), cst.Name) and getattr(t, "target", t).value == name for t in targets
    )


def table_source(source: Target, new: str, version: str, fingerprints, gone: list[str], table: str) -> str:
    """The new target's table, made from `table` (the source of `source`'s table)."""
    line = _line(version)
    label = source.label.replace(_line(source.sdist_version), line)
    if label == source.label:
        label = f"{line} line"
    is_newest = all(Version(version) > Version(target.sdist_version) for target in TARGETS)
    docstring = (
        f'"""The `{new}` target: the fix for transformers {line}.x, made from `{source.name}` by\n'
        f"`python -m cache_crop_fix new-target {version}`.\n\nIts steps are `{source.name}`'s, with empty overlays: "
        f"write each step for {line}\n(`python -m cache_crop_fix drift {version} --against {source.name}` says what "
        'changed).\n"""'
    )
    keywords = {
        "name": new,
        "label": label,
        "versions": f">={line}.0,<{Version(version).major}.{Version(version).minor + 1}",
        "sdist_version": version,
    }
    if is_newest:
        keywords["backport_of"] = None  # the newest line is upstream `main`: nothing to backport from
    rewriter = _TableRewriter(docstring, fingerprints_source(fingerprints, gone, version), keywords)
    return cst.parse_module(table).visit(rewriter).code


# The placeholder test of a new target, below the license header of the nearest target's tests (`{header}`)
PLACEHOLDER_TEST = '''\
{header}import unittest

from transformers import is_torch_available
from transformers.testing_utils import require_torch


if is_torch_available():
    import torch

    from transformers import DynamicCache


@require_torch
class CropPlaceholderTest(unittest.TestCase):
    """A placeholder made by `new-target`: replace it with the tests of each step (see tests/{source}/utils/)."""

    def test_crop_removes_the_last_tokens(self):
        key = torch.arange(3, dtype=torch.float32).reshape(1, 1, 3, 1)
        cache = DynamicCache()
        cache.update(key, key.clone(), layer_idx=0)
        cache.crop(-1)
        self.assertEqual(cache.get_seq_length(), 2)
'''


def _docstring(path: Path) -> str | None:
    if not path.exists():
        return None
    module = cst.parse_module(path.read_text())
    first = module.body[0] if module.body else None
    if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr):
        return module.code_for_node(first)
    return None


def requirements_files(root: Path, source: Target, name: str, version: str) -> dict[Path, str]:
    """The environment of the new target (`.venv-<new>`, made by `make test-<new>`): the nearest target's requirements
    files that pin transformers (`requirements-<target>.txt`, and `-nodeps.txt` installed with `--no-deps`), with the
    new release pinned instead."""
    for candidate in [source, *(t for t in TARGETS if t is not source)]:
        found = {
            suffix: root / f"requirements-{candidate.name}{suffix}.txt"
            for suffix in ("", "-nodeps")
            if (root / f"requirements-{candidate.name}{suffix}.txt").exists()
        }
        if found:
            break
    else:
        return {}
    files = {}
    for suffix, path in found.items():
        text = path.read_text().replace(candidate.name, name)
        text = re.sub(r"^transformers==\S+", f"transformers=={version}", text, flags=re.MULTILINE)
        files[root / f"requirements-{name}{suffix}.txt"] = text
    return files


def create_target(
    release: Release, source: Target, root: Path = PROJECT_ROOT, name: str | None = None
) -> tuple[list[Path], list[str]]:
    """Writes the new target's files under `root` (the project); returns them and the methods the release lacks."""
    if not isinstance(release, Release):
        raise TypeError(f"create_target needs a Release, not {type(release).__name__}")
    if not isinstance(source, Target):
        raise TypeError(f"create_target needs the Target to start from, not {type(source).__name__}")
    name = name or target_name(release.version)
    package = root / "src" / "cache_crop_fix"
    if (package / "targets" / f"{name}.py").exists():
        raise FileExistsError(f"target {name} exists already ({package / 'targets' / f'{name}.py'})")
    fingerprints, gone = new_fingerprints(sorted(source.fingerprints), release)
    table = (package / "targets" / f"{source.name}.py").read_text()
    line = _line(release.version)
    files = {
        package / "targets" / f"{name}.py": table_source(source, name, release.version, fingerprints, gone, table),
        package / "overlay" / name / "__init__.py": (
            f'"""The fix for transformers {line}.x, as a stack of steps (one upstream pull request each), applied in '
            f'order.\n\nMade from `{source.name}` by `new-target`: the steps are empty until written for {line}.\n"""\n'
        ),
    }
    for step in source.steps:
        docstring = _docstring(package / "overlay" / source.name / step.package / "__init__.py")
        files[package / "overlay" / name / step.package / "__init__.py"] = (
            docstring or f'"""{step.title}"""'
        ).rstrip() + "\n"
        # Its pull request text and reproductions, to be checked against the new release with the step
        texts = package / "overlay" / source.name / step.package / "pr"
        if step.text is None and texts.is_dir() and step.text_package.endswith(f"{source.name}.{step.package}"):
            for text in sorted(texts.iterdir()):
                files[package / "overlay" / name / step.package / "pr" / text.name] = text.read_text()
    audit_source = audit_table_for(source)
    if audit_source is not None:
        audit, count = re.subn(
            rf'target="{audit_source}"', f'target="{name}"', (package / "audit" / f"{audit_source}.py").read_text()
        )
        if count != 1:
            raise ValueError(f'audit/{audit_source}.py does not name its target once (`target="{audit_source}"`)')
        files[package / "audit" / f"{name}.py"] = audit
    files.update(requirements_files(root, source, name, release.version))
    tests = root / "tests" / name
    files[tests / "__init__.py"] = ""
    files[tests / "utils" / "__init__.py"] = ""
    source_test = (root / "tests" / source.name / "utils" / "test_cache_utils.py").read_text()
    header = cst.Module(body=[], header=cst.parse_module(source_test).header).code
    files[tests / "utils" / "test_cache_utils.py"] = PLACEHOLDER_TEST.replace("{header}", header).replace(
        "{source}", source.name
    )
    existing = [str(path) for path in files if path.exists()]
    if existing:
        raise FileExistsError(f"new-target only adds files, and these exist: {', '.join(existing)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files), gone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cache_crop_fix new-target", description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the transformers release the target's fork branch is built on, e.g. 5.26.0")
    parser.add_argument("--from", dest="source", choices=[t.name for t in TARGETS], help="default: the nearest")
    parser.add_argument("--wheel", type=Path, help="the release's wheel, instead of downloading it")
    parser.add_argument("--cache-dir", type=Path, default=PROJECT_ROOT / "build" / "drift")
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT, help="the project to add the target to")
    args = parser.parse_args(argv)
    try:
        version = check_version(args.version)
        source = get_target(args.source) if args.source else nearest_target(version)[0]
        release = fetch_wheel(version, args.cache_dir / version, args.wheel)
        written, gone = create_target(release, source, args.root.resolve())
    except (DriftError, FileExistsError) as error:
        print(f"new-target: {error}", file=sys.stderr)
        return 2
    name = target_name(version)
    print(f"target {name} for transformers {version}, made from {source.name}:")
    print("\n".join(f"  {path.relative_to(args.root.resolve())}" for path in written))
    if gone:
        print(f"not in {version} (listed in the table's comment): " + ", ".join(gone))
    print(
        "left to do:\n"
        f"  - write each step's overlay in src/cache_crop_fix/overlay/{name}/ (`drift {version} --against "
        f"{source.name}` lists what changed) and its tests in tests/{name}/utils/\n"
        f"  - review the audit cases in src/cache_crop_fix/audit/{name}.py\n"
        f"  - check requirements-{name}*.txt (for `make test-{name}`), and add the new line to the transformers "
        "requirement in pyproject.toml\n"
        f"  - check with `python -m cache_crop_fix status` under transformers {version}, then `make branch`"
    )
    return 0
