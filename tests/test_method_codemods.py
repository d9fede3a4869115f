"""Codemods of methods (e.g. 5.25's step 11 on `BailingHybridConfig.__post_init__`) compile the changed method in a
class body of its class's name: zero-argument `super()` then finds the upstream class, and private names are mangled as
upstream's are."""

import importlib.util
import textwrap

import pytest

from cache_crop_fix.codemod import CodemodError, rewrite_statement, statement_changes
from cache_crop_fix.patcher import _Codemod


UPSTREAM = textwrap.dedent(
    """
    class Base:
        def value(self):
            return 1


    class Child(Base):
        __scale = 10

        def value(self):
            total = super().value()
            return total * self.__scale
    """
)


def _import(tmp_path):
    path = tmp_path / "upstream_module.py"
    path.write_text(UPSTREAM)
    spec = importlib.util.spec_from_file_location("upstream_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_changed_method_calls_super_and_reads_private_names(tmp_path):
    module = _import(tmp_path)
    codemod = _Codemod("Child.value", "total = super().value()", "total = super().value() + 1")
    module.Child.value = codemod.apply(vars(module.Child)["value"], module, module.Child)

    assert module.Child().value() == 20
    assert module.Child.value.__qualname__ == "Child.value"


def test_codemods_of_two_steps_apply_in_step_order(tmp_path):
    module = _import(tmp_path)
    first = _Codemod("Child.value", "total = super().value()", "total = super().value() + 1")
    second = _Codemod("Child.value", "total = super().value() + 1", "total = super().value() + 2", earlier=first)
    module.Child.value = second.apply(vars(module.Child)["value"], module, module.Child)

    assert module.Child().value() == 30


def test_a_list_of_statement_changes_applies_in_order():
    assert statement_changes(("a", "b")) == [("a", "b")]
    assert statement_changes([("a", "b"), ("c", "d")]) == [("a", "b"), ("c", "d")]


def test_a_block_of_lines_is_one_statement_change(tmp_path):
    """An old statement of several lines (5.25's step 14: an `if` and its body) matches them as consecutive lines."""
    module = _import(tmp_path)
    codemod = _Codemod(
        "Child.value",
        "total = super().value()\nreturn total * self.__scale",
        "total = super().value()\nif total:\n    total += 2\nreturn total * self.__scale",
    )
    module.Child.value = codemod.apply(vars(module.Child)["value"], module, module.Child)

    assert module.Child().value() == 30


def test_a_block_must_be_on_consecutive_lines():
    source = "def f():\n    a = 1\n    b = 2\n    c = 3\n"
    with pytest.raises(CodemodError, match="exactly once, found it 0 times"):
        rewrite_statement(source, "a = 1\nc = 3", "a = 2")
    assert rewrite_statement(source, "a = 1\nb = 2", "a = 2") == "def f():\n    a = 2\n    c = 3\n"
