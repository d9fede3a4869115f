"""The fix changes only what it documents (issue 42): every method it replaces keeps stock's decorators and parameters,
and what `crop` does outside its contract differs from stock only as the "Behaviour changes" tables of
`docs/source/en/cache_crop.md` say, on the target of the installed transformers. See `tests/stock_parity.py`."""

import fnmatch
import re
from pathlib import Path

import pytest

from . import stock_parity
from .compat import TARGET


DOC = Path(__file__).parents[1] / "docs" / "source" / "en" / "cache_crop.md"
_HEADINGS = {"v5_25": "### 5.25 (`v5_25`)", "v5_24": "### 5.24 (`v5_24`)", "v5_14": "### 5.14 (`v5_14`)"}


def _cells(line):
    return [re.findall(r"`([^`]*)`", cell) for cell in line.strip().strip("|").split("|")]


def _table(heading):
    """The rows of the table under `heading`, each a list of cells, each a list of the patterns it holds in backticks."""
    text = DOC.read_text().split("## Behaviour changes", 1)[1]
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    return [_cells(line) for line in section.splitlines() if line.startswith("| `")]


def _documented(row, layer, argument, stock, fixed):
    layers, arguments, stocks, fixeds = row[:4]
    return (
        any(fnmatch.fnmatchcase(layer, pattern) for pattern in layers)
        and any(pattern in ("*", argument) for pattern in arguments)  # arguments have brackets: no glob
        and fnmatch.fnmatchcase(stock, stocks[0])
        and fnmatch.fnmatchcase(fixed, fixeds[0])
    )


@pytest.fixture(scope="module")
def crop_differences():
    return stock_parity.crop_differences()


def test_every_crop_difference_from_stock_is_documented(crop_differences):
    rows = _table(_HEADINGS[TARGET.name])
    undocumented = [
        f"{layer}: crop({argument}) stock {stock}, fixed {fixed}"
        for (layer, argument), (stock, fixed) in crop_differences.items()
        if not any(_documented(row, layer, argument, stock, fixed) for row in rows)
    ]
    assert not undocumented, "\n".join(undocumented)


def test_every_documented_crop_difference_happens(crop_differences):
    # A row that no longer matches a difference is a behaviour change the docs claim and the fix does not make
    rows = _table(_HEADINGS[TARGET.name])
    unmatched = [
        row
        for row in rows
        if not any(
            _documented(row, layer, argument, stock, fixed)
            for (layer, argument), (stock, fixed) in crop_differences.items()
        )
    ]
    assert not unmatched, unmatched


def test_counters_stay_python_ints(crop_differences):
    # Whatever the argument (a numpy integer, a tensor, a bool), the fix leaves no counter of another type
    kept = {case: fixed for case, (_, fixed) in crop_differences.items() if fixed.startswith("ok, ")}
    assert not kept, kept


def test_replaced_methods_keep_their_decorators():
    lost = {
        patch.qualname: (stock_parity.decorator_chain(patch.original), stock_parity.decorator_chain(patch.replacement))
        for patch in stock_parity.replaced_methods()
        if stock_parity.decorator_chain(patch.original) != stock_parity.decorator_chain(patch.replacement)
    }
    assert not lost, lost


def test_replaced_methods_keep_their_parameters_unless_documented():
    target = TARGET.name
    documented = {
        method for targets, methods, *_ in _table("### Parameters") if target in targets for method in methods
    }
    changed = []
    for patch in stock_parity.replaced_methods():
        if stock_parity.signature(patch.original) != stock_parity.signature(patch.replacement):
            changed.append(f"{patch.owner.__name__}.{patch.name}")
    assert sorted(set(changed) - documented) == []
    assert sorted(documented - set(changed)) == []


def test_replaced_module_functions_keep_their_parameters():
    # Module functions are changed by swapping their code (see `patcher._Codemod.patch_function`)
    changed = [
        patch.qualname
        for patch in stock_parity.replacements()
        if patch.name == "__code__"
        and stock_parity.code_signature(patch.original) != stock_parity.code_signature(patch.replacement)
    ]
    assert changed == []
