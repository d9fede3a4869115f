"""Tests of the exporter (`cache_crop_fix.export`): the libcst transplant on small synthetic sources, golden diffs, a
stack exported into a synthetic transformers repository (git, ruff, minimality, idempotence, refusals, a base that
already has upstream's test file), and one end-to-end run of the default path.

The end-to-end test downloads the transformers 5.14.1 sdist, builds the stack, a wheel per step, and runs the exported
tests in an isolated venv: set `CACHE_CROP_FIX_SKIP_E2E=1` to skip it (or deselect it with `-k "not end_to_end"`).
"""

import dataclasses
import difflib
import os
import shutil
import subprocess
from pathlib import Path

import libcst as cst
import pytest

import transformers.cache_utils
from cache_crop_fix import export as exporter
from cache_crop_fix import patcher
from cache_crop_fix.export import plan
from cache_crop_fix.export.format import check_minimal
from cache_crop_fix.export.pr_text import fold_long_code, lines_outside_details, new_tests
from cache_crop_fix.export.transplant import (
    FileChange,
    TransplantError,
    changed_units,
    check_base,
    merge_test_module,
    method_fingerprints,
    parse_overlay,
    restrict_test_module,
    transplant,
)
from cache_crop_fix.targets import REPRODUCTION_LINE, TARGETS, Step, Target, get_target


FIXTURES = Path(__file__).parent / "fixtures" / "exporter"
TARGET = (FIXTURES / "module" / "target.py.in").read_text()
OVERLAY_SOURCE = (FIXTURES / "module" / "overlay.py.in").read_text()
UPSTREAM_TESTS = (FIXTURES / "tests_merge" / "upstream.py.in").read_text()
OUR_TESTS = (FIXTURES / "tests_merge" / "ours.py.in").read_text()
MODULE = "transformers.toy_cache"
# The methods of the fixture overlay that replace upstream ones (the others are additions)
REPLACED = ["ToyLayer.crop", "ToySlidingLayer.crop", "ToyCache.describe", "ToyCache.crop"]


def _overlay(source=OVERLAY_SOURCE, path="toy_cache.py"):
    return parse_overlay(source, path)


def _fingerprints(source=TARGET, module=MODULE, replaced=REPLACED):
    found = method_fingerprints(source, module)
    return {f"{module}.{name}": frozenset({found[f"{module}.{name}"]}) for name in replaced}


def _diff(before, after, name):
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{name}", f"b/{name}")
    return "".join(lines)


def _assert_golden(name, actual):
    path = FIXTURES / name / "expected.diff"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual)
    assert actual == path.read_text(), f"differs from the golden diff {path} (UPDATE_GOLDEN=1 to regenerate)"


def _method(source, class_name, method_name):
    module = cst.parse_module(source)
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and statement.name.value == class_name:
            for member in statement.body.body:
                if isinstance(member, cst.FunctionDef) and member.name.value == method_name:
                    return module.code_for_node(member.with_changes(leading_lines=[]))
    return None


# --------------------------------------------------------------------------------------------------------------------
# The transplant


def test_transplant_matches_golden_diff():
    result = transplant(TARGET, _overlay())
    _assert_golden("module", _diff(TARGET, result.source, "toy_cache.py"))
    assert result.replaced == REPLACED
    assert result.added == ["ToyLayer._check_crop", "ToyCache._crop_all"]
    assert result.helpers == ["_as_int", "_DEPRECATION"]
    assert result.imports == ["import operator", "import warnings"]


def test_replaced_methods_take_the_overlay_code_in_place():
    source = transplant(TARGET, _overlay()).source
    assert '"""New crop."""' in source and '"""Old crop."""' not in source
    # Same position as upstream's: between `__init__` and the `seq_length` property
    assert source.index("def __init__(self):") < source.index('"""New crop."""') < source.index("def seq_length")
    assert _method(source, "ToyCache", "describe") == _method(OVERLAY_SOURCE, "ToyCache", "describe")


def test_added_methods_go_at_the_end_of_their_class():
    source = transplant(TARGET, _overlay()).source
    layer = _method(source, "ToyLayer", "_check_crop")
    assert layer is not None
    assert source.index("def get_seq_length") < source.index("def _check_crop") < source.index("class ToySlidingLayer")
    assert source.index("def _crop_all") > source.index(
        "def crop(self, max_length: int):\n        max_length = _as_int"
    )
    assert source.index("def _crop_all") < source.index("def get_toy_cache")


def test_helpers_go_before_the_first_class_in_overlay_order():
    source = transplant(TARGET, _overlay()).source
    assert source.index("logger = logging") < source.index("def _as_int") < source.index("_DEPRECATION = ")
    assert source.index("_DEPRECATION = ") < source.index("class ToyLayer(ABC):")
    # The helper's own comment comes along
    assert '# A comment that goes with the constant\n_DEPRECATION = "absolute crops are deprecated"' in source


def test_imports_the_target_lacks_are_added_and_type_checking_block_is_not():
    source = transplant(TARGET, _overlay()).source
    assert source.count("import operator\n") == 1 and source.count("import warnings\n") == 1
    # `torch` and `TYPE_CHECKING` are already imported upstream; the overlay's TYPE_CHECKING import and header stay out
    assert source.count("import torch\n") == 1
    assert source.count("from typing import TYPE_CHECKING") == 1
    assert "from transformers.toy_cache import ToyLayer" not in source
    assert "never transplanted" not in source
    assert "Names that the upstream module binds" not in source


def test_decorators_comments_and_super_are_kept():
    source = transplant(TARGET, _overlay()).source
    # The overlay's decorators (one added on a replaced method, one kept) and comments
    assert "    @torch.no_grad()\n    def crop(self, max_length: int):\n" in source
    assert '    @staticmethod\n    def describe() -> str:\n        return "toy (fixed)"' in source
    assert "    # Our comment above an added method\n    def _crop_all" in source
    # Upstream's comment above a replaced method, and comments in untouched code, are kept verbatim
    assert (
        "    # Upstream's comment above `crop`: kept, since the overlay brings none for this method\n    def crop"
        in source
    )
    assert "        # A comment inside a method the overlay does not touch\n" in source
    assert "return self.seq_length  # and a trailing one\n" in source
    # Zero-argument super() is left as written: no unrolling into `super(ToySlidingLayer, self)`
    assert "        ToyLayer._check_crop(self, max_length)\n        super().crop(max_length)\n" in source
    assert "super(" not in source.replace("super()", "")


def test_dropping_an_upstream_decorator_is_refused():
    # e.g. `@force_accelerate_hooks("conv1d")` of a mixer's `forward`: the overlay must repeat upstream's decorators
    overlay = _overlay(OVERLAY_SOURCE.replace("    @staticmethod\n    def describe", "    def describe"))
    with pytest.raises(TransplantError, match="`ToyCache.describe` would drop the decorator\\(s\\) @staticmethod"):
        transplant(TARGET, overlay)


def test_changed_units_reads_one_line_class_bodies():
    # `class InklingAudioModelEmbeddings(HiggsAudioV2Embeddings): ...` (5.25's modular_inkling.py) has no indented block
    before = "class Short(Base): ...\n\n\ndef f():\n    return 1\n"
    after = "class Short(Base): ...\n\n\ndef f():\n    return 2\n"
    assert changed_units(before, after) == {"f"}


def test_everything_else_is_byte_identical():
    result = transplant(TARGET, _overlay())
    expected = set(REPLACED) | set(result.added) | set(result.helpers) | {"imports"}
    assert changed_units(TARGET, result.source) == expected
    # Every line of the target that is not in a replaced method is still there, in order
    kept = [line for line in TARGET.splitlines() if line not in ('        """Old crop."""',)]
    matcher = difflib.SequenceMatcher(None, kept, result.source.splitlines(), autojunk=False)
    removed = [
        kept[i] for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("delete", "replace") for i in range(i1, i2)
    ]
    assert all(line.strip() and ("max_length" in line or "toy" in line) for line in removed), removed


def test_transplant_is_idempotent():
    once = transplant(TARGET, _overlay()).source
    twice = transplant(once, _overlay())
    assert twice.source == once
    assert twice.imports == []
    assert twice.added == []  # everything already there is replaced in place


def test_undefined_name_is_refused():
    overlay = _overlay(
        OVERLAY_SOURCE.replace("self._crop_all(max_length)", "self._crop_all(_clamp(max_length, undefined_limit))")
    )
    with pytest.raises(TransplantError) as error:
        transplant(TARGET, overlay)
    message = str(error.value)
    assert "`ToyCache.crop` uses `_clamp`" in message and "`ToyCache.crop` uses `undefined_limit`" in message
    assert "NameError" in message


def test_name_bound_only_for_type_checkers_is_refused():
    # The target imports `ToyConfig` under `if TYPE_CHECKING:` only: at run time it does not exist
    overlay = _overlay(OVERLAY_SOURCE.replace('return "toy (fixed)"', "return ToyConfig.__name__"))
    with pytest.raises(TransplantError, match="`ToyCache.describe` uses `ToyConfig`"):
        transplant(TARGET, overlay)


def test_class_attribute_used_as_a_bare_name_is_refused():
    # Method bodies do not see their class's namespace: `is_compileable` alone would be a NameError
    overlay = _overlay(
        OVERLAY_SOURCE.replace('"""An added method."""', '"""An added method."""\n        is_compileable')
    )
    with pytest.raises(TransplantError, match="`ToyLayer._check_crop` uses `is_compileable`"):
        transplant(TARGET, overlay)


def test_locals_arguments_comprehensions_and_builtins_are_not_flagged():
    overlay = _overlay(
        OVERLAY_SOURCE.replace(
            '"""An added method."""',
            '"""An added method."""\n        sizes = [len(str(size)) for size in range(max_length)]\n'
            "        print(sizes, __name__, ToySlidingLayer, logger)",
        )
    )
    assert "print(sizes, __name__" in transplant(TARGET, overlay).source


def test_import_that_would_rebind_a_different_object_is_refused():
    # The target's `logging` is transformers' logging utilities, not the standard library module
    overlay = _overlay(
        OVERLAY_SOURCE.replace("import operator\n", "import logging\nimport operator\n").replace(
            "return operator.index(value)", "logging.info(value)\n    return operator.index(value)"
        )
    )
    with pytest.raises(TransplantError, match="uses `logging` as `logging`, but the target binds it to"):
        transplant(TARGET, overlay)


def test_relative_import_is_written_for_the_target_and_merged():
    overlay_source = "from transformers.utils import is_torch_greater_or_equal\n\n\nclass ToyLayer:\n"
    overlay_source += "    def crop(self, max_length):\n        return is_torch_greater_or_equal('2.7')\n"
    result = transplant(TARGET, _overlay(overlay_source))
    assert result.imports == [
        "from .utils import (\n    is_torch_available,\n    logging,\n    is_torch_greater_or_equal,\n)"
    ]
    # Deeper modules import with more dots
    nested = "from ...utils import logging\n\n\nclass ToyLayer:\n    def crop(self, max_length):\n        pass\n"
    result = transplant(nested, _overlay(overlay_source), "transformers.models.toy.modeling_toy", True)
    assert "from ...utils import is_torch_greater_or_equal, logging" not in result.source  # merged, before ruff
    assert "from ...utils import logging, is_torch_greater_or_equal" in result.source
    assert result.skipped_classes == []


def test_missing_class_is_refused_unless_allowed():
    target = TARGET.replace("class ToySlidingLayer(ToyLayer)", "class OtherLayer(ToyLayer)")
    with pytest.raises(TransplantError, match="class `ToySlidingLayer` is missing"):
        transplant(target, _overlay())
    result = transplant(target, _overlay(), allow_missing_classes=True)
    assert result.skipped_classes == ["ToySlidingLayer"]


def test_codemod_of_a_function_a_modular_file_imports_is_skipped_there():
    """FalconMamba's modular file imports `mamba_scan_forward`: only its generated modeling file has the copy to change."""
    overlay = _overlay('CODEMODS = {"scan": ("return 1", "return 2")}\n')
    modeling, modular = "def scan():\n    return 1\n", "from ..mamba.modeling_mamba import scan\n"
    assert transplant(modeling, overlay).source == "def scan():\n    return 2\n"
    with pytest.raises(TransplantError, match="`scan` is not defined"):
        transplant(modular, overlay)
    result = transplant(modular, overlay, allow_missing_classes=True)
    assert (result.source, result.skipped_classes) == (modular, ["scan"])


def test_overlay_may_only_hold_methods_and_absolute_imports():
    with pytest.raises(TransplantError) as error:
        parse_overlay(
            "from .other import thing\n\n\nclass ToyLayer:\n    limit = 3\n\n    def crop(self):\n        pass\n",
            "toy_cache.py",
        )
    assert "relative import" in str(error.value) and "may only hold methods" in str(error.value)


# --------------------------------------------------------------------------------------------------------------------
# Checking the base


def test_check_base_accepts_the_base_it_was_written_for():
    assert check_base(TARGET, _overlay(), _fingerprints()) == []


def test_check_base_lists_every_mismatch():
    target = (
        TARGET.replace("    def describe() -> str:", "    def summary() -> str:")  # a replaced method is gone
        .replace('"""Old crop."""', '"""Old crop, changed upstream."""')  # a replaced method changed
        .replace(
            "    def get_seq_length(self)",
            "    def _check_crop(self, max_length):\n        pass\n\n    def get_seq_length(self)",
        )
        .replace("logger = logging", "_DEPRECATION = None\nlogger = logging")
    )
    problems = check_base(target, _overlay(), _fingerprints())
    assert len(problems) == 4, problems
    assert any("`ToyCache.describe` is replaced by the fix but missing" in problem for problem in problems)
    assert any("`ToyLayer.crop` differs from the source the fix was written for" in problem for problem in problems)
    assert any("`ToyLayer._check_crop` is added by the fix but already exists" in problem for problem in problems)
    assert any("helper `_DEPRECATION`" in problem for problem in problems)
    assert check_base(None, _overlay(), {}) == ["src/transformers/toy_cache.py is missing"]


def test_fingerprints_from_source_text_match_the_patchers():
    # Computed from the installed (stock) file, like `patcher.source_fingerprint` on the original functions
    source = Path(transformers.cache_utils.__file__).read_text()
    found = method_fingerprints(source, "transformers.cache_utils")
    recorded = {name: value for name, value in patcher.installed_fingerprints().items() if ".cache_utils." in name}
    assert recorded and all(found[name] == value for name, value in recorded.items())


# --------------------------------------------------------------------------------------------------------------------
# Tests merged into upstream's test file


def test_test_merge_matches_golden_diff():
    result = merge_test_module(UPSTREAM_TESTS, OUR_TESTS)
    _assert_golden("tests_merge", _diff(UPSTREAM_TESTS, result.source, "test_cache_utils.py"))
    assert result.classes == ["CropTest"] and result.helpers == ["CROP_CASES", "_filled"]


def test_test_merge_reuses_the_guard_block_without_duplicate_imports():
    source = merge_test_module(UPSTREAM_TESTS, OUR_TESTS).source
    assert source.count("if is_torch_available():") == 1
    assert source.count("import torch\n") == 1
    assert source.count("DynamicCache,") == 1 and "from transformers import DynamicCache" not in source
    # Upstream's `is_torch_available` from testing_utils serves ours too
    assert "from transformers import is_torch_available" not in source
    # The new names go inside the guard block, the new top-level imports at the top
    guard = source[source.index("if is_torch_available():") : source.index("@require_torch")]
    assert "DynamicLayer," in guard and "from transformers import EncoderDecoderCache" in guard
    assert source.index("import warnings") < source.index("if is_torch_available():")
    # Our classes come after upstream's, before the `__main__` block
    assert (
        source.index("class CacheTest") < source.index("class CropTest") < source.index('if __name__ == "__main__":')
    )


def test_test_merge_creates_the_file_when_absent_and_is_idempotent():
    created = merge_test_module(None, OUR_TESTS)
    # Our header (the license), then the imports the classes need, then the classes (ruff sorts the imports later)
    assert created.created and created.source.startswith("# Copyright 2026 Our Team. All rights reserved.\n\n")
    assert created.classes == ["CropTest"] and "if is_torch_available():" in created.source
    assert merge_test_module(created.source, OUR_TESTS).source == created.source
    once = merge_test_module(UPSTREAM_TESTS, OUR_TESTS).source
    assert merge_test_module(once, OUR_TESTS).source == once


def test_test_merge_adds_a_guard_block_when_upstream_has_none():
    upstream = "import unittest\n\n\nclass OtherTest(unittest.TestCase):\n    def test_it(self):\n        pass\n"
    source = merge_test_module(upstream, OUR_TESTS).source
    guard = source[source.index("if is_torch_available():") : source.index("class OtherTest")]
    assert "import torch" in guard and "DynamicLayer" in guard and "pass" not in guard


def test_test_merge_resolves_relative_imports_of_model_tests():
    upstream = (
        "import unittest\n\nfrom ...test_modeling_common import ModelTesterMixin\n\n\n"
        "class ToyModelTest(ModelTesterMixin, unittest.TestCase):\n    pass\n"
    )
    ours = (
        "import unittest\n\nfrom ...test_configuration_common import ConfigTester\n"
        "from ...test_modeling_common import ModelTesterMixin\n\n\n"
        "class ToyCropTest(ModelTesterMixin, unittest.TestCase):\n    tester = ConfigTester\n"
    )
    source = merge_test_module(upstream, ours, "tests/models/toy/test_modeling_toy.py").source
    assert source.count("ModelTesterMixin\n") == 1
    assert "from ...test_configuration_common import ConfigTester\n" in source


def test_test_merge_refuses_tests_that_need_our_package():
    with pytest.raises(TransplantError, match="imports cache_crop_fix"):
        merge_test_module(None, "import cache_crop_fix\n" + OUR_TESTS)


# --------------------------------------------------------------------------------------------------------------------
# Export into a synthetic transformers repository (git, ruff, commit, idempotence)

MODELING = """\
from ...toy_cache import ToyCache


class ToyModelCache(ToyCache):
    def crop(self, max_length: int):
        raise RuntimeError("ToyModelCache doesnot support `crop` method")


class ToyModel:
    def forward(self, cache):
        return cache
"""
MODULAR = """\
from ..toy_parent.modeling_toy_parent import ToyParentCache


class ToyModelCache(ToyParentCache):
    def crop(self, max_length: int):
        raise RuntimeError("ToyModelCache doesnot support `crop` method")
"""
MODEL_OVERLAY = """\
# Our version of `ToyModelCache.crop`
class ToyModelCache:
    def crop(self, max_length: int | None = None):
        raise RuntimeError("`ToyModelCache` does not support `crop`: its states cannot be rolled back.")
"""
RUFF_SETTINGS = """\
[tool.ruff]
target-version = "py310"
line-length = 119

[tool.ruff.lint]
select = ["E", "F", "I", "W", "UP", "SIM", "C4"]

[tool.ruff.lint.isort]
lines-after-imports = 2
known-first-party = ["transformers"]
"""


def _git(repo, *args):
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def _write(root, files):
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)


V5_14 = get_target("v5_14")


def _toy_target(fingerprints):
    steps = (
        Step("step1", "1-toy", "Fix the toy crop", tests=("CropTest",), text="Fixes the toy crop."),
        Step("step2", "2-model", "Refuse crops of the toy model cache", behaviour_changes=("It refuses.",), text=""),
    )
    related = "- #47977 clamps in `DynamicLayer` only.\n- #47720 renamed the argument."
    return Target(
        "v5_14", "toy backport", ">=5.14.0,<5.15", "5.14.1", steps, fingerprints, related=related, closes_issue=True
    )


@pytest.fixture
def synthetic(tmp_path):
    """A transformers-like git repository, a two-step target for it, and a project with an upstream-style test file."""
    repo, project = tmp_path / "transformers", tmp_path / "project"
    overlay_dirs = [tmp_path / "overlay" / "step1", tmp_path / "overlay" / "step2"]
    _write(
        repo,
        {
            "src/transformers/__init__.py": '__version__ = "5.14.1"\n',
            "src/transformers/toy_cache.py": TARGET,
            "src/transformers/models/toy/modeling_toy.py": MODELING,
            "src/transformers/models/toy/modular_toy.py": MODULAR,
            "pyproject.toml": RUFF_SETTINGS,
            "setup.py": '_deps = ["ruff==0.14.10"]\n',
        },
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "A Contributor")
    _git(repo, "config", "user.email", "contributor@example.com")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _write(overlay_dirs[0], {"toy_cache.py": OVERLAY_SOURCE})
    _write(overlay_dirs[1], {"models/toy/modeling_toy.py": MODEL_OVERLAY})
    _write(project, {"tests/v5_14/utils/test_cache_utils.py": OUR_TESTS, "tests/test_not_exported.py": "x = 1\n"})
    fingerprints = {
        **_fingerprints(),
        **_fingerprints(MODELING, "transformers.models.toy.modeling_toy", ["ToyModelCache.crop"]),
    }
    target = _toy_target(fingerprints)

    def export(**kwargs):
        options = {
            "target": target,
            "repo": repo,
            "build_dir": tmp_path / "build",
            "dist_dir": tmp_path / "dist",
            "project_root": project,
            "run_verify": False,
            "log": lambda message: None,
            "overlay_dirs": overlay_dirs,
        }
        return exporter.export(**{**options, **kwargs})

    return repo, overlay_dirs, project, export


def test_export_commits_a_stack_of_minimal_ruff_clean_commits(synthetic):
    repo, _, _, export = synthetic
    report = export()
    base = _git(repo, "rev-parse", "main")
    assert report.base.commit == base and [step.commit.created for step in report.steps] == [True, True]
    first, second = "fix-cache-crop-1-toy", "fix-cache-crop-2-model"
    # Each pull request needs no other: each is its own commit on the base
    assert _git(repo, "rev-parse", f"{first}~1") == base and _git(repo, "rev-parse", f"{second}~1") == base
    # The fork branch is the stack (each step on the previous one) and one commit that gives it a local version (no
    # pull request has it)
    stack = f"{exporter.BRANCH}~1"
    assert _git(repo, "rev-parse", f"{stack}~1") != base and _git(repo, "rev-parse", f"{stack}~2") == base
    assert _git(repo, "diff", f"{stack}~1", stack) == _git(repo, "diff", base, second)
    sha = _git(repo, "rev-parse", "--short=10", stack)
    assert report.fork_version == f"5.14.1+cachecropfix.g{sha}"
    assert _git(repo, "diff", "--name-only", stack, exporter.BRANCH).split() == ["src/transformers/__init__.py"]
    assert (
        _git(repo, "show", f"{exporter.BRANCH}:src/transformers/__init__.py")
        == f'__version__ = "{report.fork_version}"'
    )
    assert _git(repo, "log", "-1", "--format=%s", exporter.BRANCH) == "Version the fork branch"
    # Each step touches only what it owns
    assert _git(repo, "diff", "--name-only", base, first).split() == [
        "src/transformers/toy_cache.py",
        "tests/utils/test_cache_utils.py",
    ]
    assert _git(repo, "diff", "--name-only", base, second).split() == [
        "src/transformers/models/toy/modeling_toy.py",
        "src/transformers/models/toy/modular_toy.py",
    ]
    assert all(step.ruff.ok and step.ruff.upstream_pin == "0.14.10" for step in report.steps)
    cache_utils = _git(repo, "show", f"{first}:src/transformers/toy_cache.py")
    # ruff's isort put the new imports in their section; the rest of the import block is untouched
    assert cache_utils.startswith('# Copyright 2026 The Toy Authors. All rights reserved.\n"""A toy cache module')
    assert "import operator\nimport warnings\nfrom abc import ABC\nfrom typing import TYPE_CHECKING\n" in cache_utils
    assert changed_units(TARGET, cache_utils) == set(REPLACED) | {
        "ToyLayer._check_crop",
        "ToyCache._crop_all",
        "_as_int",
        "_DEPRECATION",
        "imports",
    }
    # The modular file and the generated modeling file get the same method
    modeling = _git(repo, "show", f"{second}:src/transformers/models/toy/modeling_toy.py")
    modular = _git(repo, "show", f"{second}:src/transformers/models/toy/modular_toy.py")
    assert _method(modeling, "ToyModelCache", "crop") == _method(modular, "ToyModelCache", "crop")
    assert "cannot be rolled back" in _method(modular, "ToyModelCache", "crop")
    # The sdist-like base has no test file: it is created, with our header
    tests = _git(repo, "show", f"{first}:tests/utils/test_cache_utils.py")
    assert tests.startswith("# Copyright 2026 Our Team.") and "class CropTest(unittest.TestCase):" in tests
    message = _git(repo, "log", "-1", "--format=%B", first)
    assert (
        message.startswith("Fix the toy crop\n\nFixes the toy crop.")
        and "Part 1 of 2 of the fix for #47433" in message
    )
    # The contributor's identity, from git config
    assert _git(repo, "log", "-1", "--format=%an <%ae>", second) == "A Contributor <contributor@example.com>"
    # The work tree of a contributor's checkout is left alone
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main" and _git(repo, "status", "--porcelain") == ""


def test_export_into_a_checkout_that_has_upstreams_test_file(synthetic):
    # The blocker of issue 10: with upstream's tests/utils/test_cache_utils.py in the base, the minimality check
    # refused the export (it compared `class X`, `X.method`, `A, B` with bare names)
    repo, _, _, export = synthetic
    _write(repo, {"tests/utils/test_cache_utils.py": UPSTREAM_TESTS})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "upstream tests")
    base = _git(repo, "rev-parse", "main")
    report = export()
    first = report.steps[0].commit
    merged = _git(repo, "show", f"{first.commit}:tests/utils/test_cache_utils.py")
    # No upstream line is removed; our class comes after upstream's, our imports in upstream's guard block
    diff = _git(repo, "diff", base, first.commit, "--", "tests/utils/test_cache_utils.py")
    assert [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")] == []
    assert (
        merged.index("class CacheTest") < merged.index("class CropTest") < merged.index('if __name__ == "__main__":')
    )
    assert merged.count("if is_torch_available():") == 1
    # The patches apply to the base, one after the other
    _git(repo, "checkout", "-q", "--detach", base)
    for step in report.steps:
        _git(repo, "apply", "--check", "--index", str(step.commit.patch))
        _git(repo, "apply", "--index", str(step.commit.patch))
    _git(repo, "reset", "-q", "--hard", base)
    _git(repo, "checkout", "-q", "main")


def test_check_minimal_keys_test_units_like_changed_units():
    merged = merge_test_module(UPSTREAM_TESTS, OUR_TESTS, "tests/utils/test_cache_utils.py")
    change = FileChange("tests/utils/test_cache_utils.py", merged.source, UPSTREAM_TESTS, merged.units, is_test=True)
    assert check_minimal({change.path: change}) == []
    # An upstream class changed by mistake is reported
    broken = merged.source.replace("Upstream's own tests stay as they are.", "Changed.")
    change.source = broken
    assert (
        check_minimal({change.path: change})
        == [
            "tests/utils/test_cache_utils.py: unexpected changes to CacheTest: "
            '"""Upstream\'s own tests stay as they are."""\n'
        ]
        or "CacheTest" in check_minimal({change.path: change})[0]
    )


def test_restrict_test_module_keeps_the_classes_and_what_they_use():
    source = OUR_TESTS + "\n\nclass LaterTest(unittest.TestCase):\n    def test_later(self):\n        pass\n"
    restricted = restrict_test_module(source, ["CropTest"])
    assert "class CropTest" in restricted and "class LaterTest" not in restricted
    assert "def _filled" in restricted and "CROP_CASES" in restricted
    with pytest.raises(TransplantError, match="`MissingTest` is not defined"):
        restrict_test_module(source, ["MissingTest"])


def test_export_writes_a_patch_and_a_short_pr_text_per_step(synthetic):
    _, _, _, export = synthetic
    report = export()
    for step in report.steps:
        patch = step.commit.patch.read_text()
        assert patch.startswith(f"From {step.commit.commit} ")
        text = step.pr.read_text()
        assert text.startswith(f"# {step.plan.step.title}\n## What does this PR do?")
        assert step.pr_lines <= 40 and lines_outside_details(text) == step.pr_lines
        # No tool markers; the AI-disclosure checkbox is left for the person who opens the PR
        assert "<!-- BEGIN" not in text and "TODO" not in text and "cache_crop_fix" not in text
        assert "- [ ] I confirm that this is not a pure code agent PR." in text
        assert "## Tests" in text
    # The related threads are said once, in the first pull request
    first, second = (step.pr.read_text() for step in report.steps)
    assert all(section in first for section in ("## Related", "#47977", "#47720")) and "## Related" not in second
    assert "Fixes #47433." in report.steps[0].pr.read_text()
    assert "Part 2 of 2 of the fix for #47433; it applies to `main` on its own." in report.steps[1].pr.read_text()
    assert "**Behaviour change:** It refuses.\n" in report.steps[1].pr.read_text()
    assert "+import operator" in report.steps[0].commit.patch.read_text()
    assert report.series.read_text().count("Subject: [PATCH") == 2


def test_long_reproductions_are_folded():
    short = "Text.\n\n```python\nprint(1)  # 5.25.0: 2. With this PR: 1\n```"
    assert fold_long_code(short) == short
    long = "Text.\n\n```python\n" + "x = 1\n" * 11 + "```\n\nMore."
    folded = fold_long_code(long)
    assert folded.startswith("Text.\n\n<details><summary>Reproduction</summary>\n\n```python\n")
    assert folded.endswith("```\n\n</details>\n\nMore.") and folded.count("x = 1") == 11


def test_fork_steps_are_on_the_fork_branch_only(synthetic):
    """A fork step is committed on the fork branch after the series: no pull request text, its own commit message, and
    the upstream series' mbox leaves it out. (A `main` stack, whose texts follow the closed #47433 up.)"""
    _, _, _, export = synthetic
    upstream = export()
    fork_step = dataclasses.replace(upstream.target.steps[1], kind="fork")
    main = dataclasses.replace(upstream.target, steps=(upstream.target.steps[0], fork_step), closes_issue=False)
    report = export(target=main)
    assert report.steps[0].pr.exists() and report.steps[1].pr is None
    assert not upstream.steps[1].pr.exists()  # the text written when it was a pull request is gone
    text = report.steps[0].pr.read_text()
    assert "Part 1 of 1 of a follow-up to #47720 / #47433." in text and "Fixes #47433" not in text
    assert "Fork only (`fix-cache-crop`)" in report.steps[1].commit.patch.read_text()
    assert report.series.read_text().count("Subject: [PATCH") == 2
    series = report.series.with_name("fix-cache-crop-upstream.patch").read_text()
    assert series.count("Subject: [PATCH") == 1 and "Fork only" not in series
    assert "  fork     fix-cache-crop-2-model" in exporter.summary(report)


def test_a_renamed_step_leaves_no_stale_branch_patch_or_text(synthetic):
    """Steps renumbered in the table (a step inserted before them): the old names' patch and text are removed; the
    old branch is named (removed only in a build folder of ours, not in a checkout like this one)."""
    _, _, _, export = synthetic
    before = export(run_verify=False)
    renamed = dataclasses.replace(before.target.steps[1], branch="3-model")
    messages = []
    target = dataclasses.replace(before.target, steps=(before.target.steps[0], renamed))
    report = export(target=target, run_verify=False, log=messages.append)
    assert not before.steps[1].pr.exists() and not before.steps[1].commit.patch.exists()
    assert report.steps[1].pr.exists() and report.steps[1].commit.patch.exists()
    assert "branches of steps this stack no longer has, left as they are: fix-cache-crop-2-model" in messages


def test_fork_steps_must_follow_the_upstream_steps(synthetic):
    _, _, _, export = synthetic
    target = export().target
    first_fork = (dataclasses.replace(target.steps[0], kind="fork"), target.steps[1])
    with pytest.raises(exporter.ExportError, match="the upstream steps must come first"):
        export(target=dataclasses.replace(target, steps=first_fork))


def test_a_step_kind_is_upstream_or_fork():
    with pytest.raises(ValueError, match="kind 'patch' is not one of upstream, fork"):
        Step("step1_x", "1-x", "X", kind="patch")


def test_a_backport_stack_points_to_the_main_stack(synthetic):
    # Every pull request lands on upstream `main` first: a backport's texts say which stack goes first
    _, _, _, export = synthetic
    main = TARGETS[0]
    report = export()
    assert "the stack for `main`" not in report.steps[0].pr.read_text()
    backport = dataclasses.replace(report.target, backport_of=main.name)
    text = export(target=backport).steps[0].pr.read_text()
    assert (
        f"of the toy backport of the fix for #47433 (the stack for `main`, on transformers {main.sdist_version}"
        in text
    )
    assert "This is a backport: upstream takes fixes on `main` first" in text
    assert "Only the first PR of this stack (`fix-cache-crop-1-" in text
    # A backport's pull requests build on each other
    repo = report.base.repo
    assert _git(repo, "rev-parse", "fix-cache-crop-2-model~1") == _git(repo, "rev-parse", "fix-cache-crop-1-toy")
    assert "Needs `fix-cache-crop-1-toy`: it is built on that one." in export(target=backport).steps[1].pr.read_text()


def test_a_pull_request_that_builds_on_another_must_name_it(synthetic):
    """A pull request whose change builds on an earlier one's (here: the same method, changed again) would carry that
    change on its own branch: the export refuses it until the step names the one it needs."""
    repo, overlay_dirs, _, export = synthetic
    target = export().target
    _write(overlay_dirs[1], {"toy_cache.py": OVERLAY_SOURCE.replace('"""New crop."""', '"""Newer crop."""')})
    with pytest.raises(exporter.ExportError, match="fix-cache-crop-2-model changes src/transformers/toy_cache.py on "):
        export()
    needs = dataclasses.replace(target.steps[1], needs=("1-toy",))
    report = export(target=dataclasses.replace(target, steps=(target.steps[0], needs)))
    assert _git(repo, "rev-parse", "fix-cache-crop-2-model~1") == _git(repo, "rev-parse", "fix-cache-crop-1-toy")
    assert "Needs `fix-cache-crop-1-toy`: it is built on that one." in report.steps[1].pr.read_text()
    with pytest.raises(exporter.ExportError, match="needs '2-model', which is not an earlier pull request"):
        export(
            target=dataclasses.replace(target, steps=(dataclasses.replace(target.steps[0], needs=("2-model",)), needs))
        )


def test_export_again_changes_nothing(synthetic):
    repo, overlay_dirs, _, export = synthetic
    first = export()
    patches = [step.commit.patch.read_bytes() for step in first.steps]
    second = export()
    assert [step.commit.created for step in second.steps] == [False, False]
    assert [step.commit.commit for step in second.steps] == [step.commit.commit for step in first.steps]
    assert _git(repo, "for-each-ref", "--format=%(refname)").split() == [
        "refs/heads/fix-cache-crop",
        "refs/heads/fix-cache-crop-1-toy",
        "refs/heads/fix-cache-crop-2-model",
        "refs/heads/main",
    ]
    assert [step.commit.patch.read_bytes() for step in second.steps] == patches
    # A contributor who checked the top out and changed the overlay of step 2 gets that step (and the work tree)
    # rebuilt on the same step 1
    _git(repo, "checkout", "-q", exporter.BRANCH)
    (overlay_dirs[1] / "models/toy/modeling_toy.py").write_text(
        MODEL_OVERLAY.replace("cannot be rolled back", "are gone")
    )
    third = export()
    assert [step.commit.created for step in third.steps] == [False, True]
    assert third.base.commit == first.base.commit
    assert "are gone" in (repo / "src/transformers/models/toy/modular_toy.py").read_text()
    assert _git(repo, "status", "--porcelain") == ""


def test_author_from_the_option_or_a_clear_placeholder(synthetic, monkeypatch, tmp_path):
    repo, _, _, export = synthetic
    report = export(author="Someone Else <someone@example.org>")
    assert _git(repo, "log", "-1", "--format=%an <%ae>", exporter.BRANCH) == "Someone Else <someone@example.org>"
    assert not report.author_is_placeholder
    _git(repo, "config", "--unset", "user.name")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    report = export()
    assert report.author_is_placeholder and "PLACEHOLDER" in exporter.summary(report)
    assert _git(repo, "log", "-1", "--format=%an", exporter.BRANCH).startswith("Your Name (set git config user.name")


def test_export_refuses_a_base_that_does_not_match(synthetic):
    repo, _, _, export = synthetic
    (repo / "src/transformers/__init__.py").write_text('__version__ = "5.15.0"\n')
    toy_cache = repo / "src/transformers/toy_cache.py"
    toy_cache.write_text(toy_cache.read_text().replace("    def describe() -> str:", "    def summary() -> str:"))
    _git(repo, "commit", "-q", "-am", "5.15")
    with pytest.raises(exporter.ExportError) as error:
        export()
    message = str(error.value)
    assert "the base is transformers 5.15.0, the fix is for >=5.14.0,<5.15" in message
    assert "`ToyCache.describe` is replaced by the fix but missing from the base" in message
    assert "nothing was exported" in message
    assert _git(repo, "branch", "--list", "fix-cache-crop*") == ""


def test_export_refuses_test_classes_that_no_step_owns(synthetic):
    _, _, project, export = synthetic
    _write(project, {"tests/v5_14/utils/test_cache_utils.py": OUR_TESTS + "\n\nclass OrphanTest:\n    pass\n"})
    with pytest.raises(exporter.ExportError, match="`OrphanTest` belongs to 0 steps"):
        export()


def test_modular_counterpart_and_exported_test_files(tmp_path):
    assert plan.modular_counterpart("src/transformers/models/pi0/modeling_pi0.py") == (
        "src/transformers/models/pi0/modular_pi0.py"
    )
    assert plan.modular_counterpart("src/transformers/models/pi0/configuration_pi0.py") == (
        "src/transformers/models/pi0/modular_pi0.py"
    )
    assert plan.modular_counterpart("src/transformers/cache_utils.py") is None
    _write(
        tmp_path,
        {"tests/v5_14/utils/test_a.py": "", "tests/v5_14/test_b.py": "", "tests/v5_14/fixtures/x/test_c.py": ""},
    )
    assert plan.exported_test_files(tmp_path / "tests" / "v5_14") == ["tests/utils/test_a.py"]


def test_the_real_overlay_fits_the_installed_release():
    # The installed transformers is the 5.14.1 wheel, which holds the same files as the sdist
    root = Path(transformers.cache_utils.__file__).parent
    for step_dir in plan.step_dirs(V5_14):
        for module in plan.load_overlay(step_dir):
            source = (root / module.path).read_text()
            assert check_base(source, module, V5_14.fingerprints) == [], module.path


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
def test_every_exported_test_class_belongs_to_one_step(target):
    from cache_crop_fix.export.transplant import test_classes

    # Every exported test file of the target (tests/<target>/utils/..., tests/<target>/generation/..., ...)
    tests_dir = exporter.PROJECT_ROOT / "tests" / target.name
    files = [tests_dir / Path(path).relative_to("tests") for path in plan.exported_test_files(tests_dir)]
    assert files, tests_dir
    owned = [name for step in target.steps for name in step.tests]
    assert sorted(owned) == sorted(name for path in files for name in test_classes(path.read_text()))
    assert all(set(step.api_tests) <= set(step.tests) for step in target.steps)


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
def test_every_step_has_a_pull_request_text(target):
    for step in target.steps:
        assert step.tests and step.summary and step.behaviour_changes, step.package
    assert target.related
    # The backport points to the stack that lands first, on upstream `main`
    assert [other.name for other in TARGETS if other.backport_of is None] == [TARGETS[0].name]


def test_pr_text_lists_only_the_test_files_of_its_step():
    # The 5.14 stack's later steps add tests to test_cache_utils.py only, while earlier steps also added tests to other
    # files: a step's text names the files its own diff touches, not every file with a test of the stack so far
    step = dataclasses.replace(get_target("v5_14").steps[3], tests=("LaterTest",))
    tests = {
        "tests/generation/test_candidate_generator.py": ("EarlierTest",),
        "tests/utils/test_cache_utils.py": ("FirstTest", "LaterTest"),
    }
    lines = new_tests(plan.StepPlan(4, step, (), tests, tests))
    assert lines == [
        "- New in `tests/utils/test_cache_utils.py`: `LaterTest` "
        "(`pytest tests/utils/test_cache_utils.py::LaterTest`)."
    ]


# --------------------------------------------------------------------------------------------------------------------
# End to end: the default path (PyPI sdist -> stack -> each step's src/ and a wheel of the top -> isolated venv ->
# exported tests), then the same stack exported with --repo into a checkout that already has upstream's test file


@pytest.mark.skipif(os.environ.get("CACHE_CROP_FIX_SKIP_E2E") == "1", reason="CACHE_CROP_FIX_SKIP_E2E=1")
def test_end_to_end_default_path(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    messages = []
    # The verification venv is shared with `make branch`
    venv = exporter.PROJECT_ROOT / "build" / "verify-venv"
    report = exporter.export(
        target=V5_14, build_dir=tmp_path / "build", dist_dir=tmp_path / "dist", venv=venv, log=messages.append
    )
    repo = tmp_path / "build" / "v5_14" / "transformers-5.14.1"
    assert report.base.repo == repo and all(step.commit.created for step in report.steps)
    assert _git(repo, "log", "-1", "--format=%s", "v5.14.1") == "transformers v5.14.1 (PyPI sdist)"
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == exporter.BRANCH
    assert all(step.ruff.ok for step in report.steps)
    assert report.verification.ok, [step.problems for step in report.verification.steps]
    for step in report.verification.steps:
        assert (step.smoke["step"]["crop(0)"], step.smoke["step"]["crop(-5)"]) == (0, 0)
        assert not step.smoke["step"]["overlay_importable"]
        # Every test passes with the step (its src/, the top one as a wheel; the quantization backends are installed:
        # nothing is skipped)
        assert set(step.outcomes.values()) == {"passed"}
    first = report.verification.steps[0]
    assert (first.smoke["previous"]["crop(0)"], first.smoke["previous"]["crop(-5)"]) == (3, 1)
    assert first.fail_before("behaviour")[0] > 0
    assert "Built on the PyPI sdist" in report.steps[0].pr.read_text()
    # Exporting again finds the stack up to date
    again = exporter.export(target=V5_14, build_dir=tmp_path / "build", dist_dir=tmp_path / "dist", run_verify=False)
    assert not any(step.commit.created for step in again.steps)
    assert _git(repo, "status", "--porcelain") == ""

    # --repo: a checkout whose base already has upstream's tests/utils/test_cache_utils.py
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "--branch", "v5.14.1", str(repo), str(checkout)], check=True)
    _git(checkout, "checkout", "-q", "-b", "main")
    _write(checkout, {"tests/utils/test_cache_utils.py": UPSTREAM_TESTS})
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "upstream tests")
    base = _git(checkout, "rev-parse", "HEAD")
    report = exporter.export(
        repo=checkout, build_dir=tmp_path / "build", dist_dir=tmp_path / "dist-repo", run_verify=False, log=print
    )
    assert report.target is V5_14 and report.base.commit == base and not report.base.is_sdist
    assert all(step.ruff.ok for step in report.steps)
    diff = _git(checkout, "diff", base, exporter.BRANCH, "--", "tests/utils/test_cache_utils.py")
    assert [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")] == []
    _git(checkout, "apply", "--check", str(report.series))


def test_codemod_changes_one_statement_of_a_method():
    overlay = _overlay(
        'CODEMODS = {"ToyModel.forward": ("return cache", "cache.crop(-1)\\nreturn cache")}\n',
        "models/toy/modeling_toy.py",
    )
    fingerprints = _fingerprints(MODELING, "transformers.models.toy.modeling_toy", ["ToyModel.forward"])
    assert check_base(MODELING, overlay, fingerprints) == []
    assert check_base(MODELING.replace("return cache", "return None"), overlay, fingerprints) != []
    result = transplant(MODELING, overlay)
    assert result.replaced == ["ToyModel.forward"]
    diff = _diff(MODELING, result.source, "modeling_toy.py")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["+        cache.crop(-1)"]
    assert transplant(result.source, overlay).source == result.source  # idempotent
    with pytest.raises(TransplantError, match="exactly once"):
        transplant(MODELING.replace("return cache", "pass"), overlay)


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
def test_every_reproduction_file_is_in_its_step_text(target):
    """A step's `pr/` holds its text and the reproductions the text shows, nothing else."""
    for step in target.steps:
        folder = step.pr_folder
        if step.text_package.endswith(
            f".{step.package}"
        ):  # the step's own folder (a backport's text is the newer line's)
            text = (folder / "text.md").read_text()
            shown = set(REPRODUCTION_LINE.findall(text))
            assert {path.name for path in folder.iterdir()} == {"text.md", *shown}, step.package
            assert "```" not in text, f"{step.package}: a reproduction belongs in a file of pr/"
