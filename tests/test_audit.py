"""The audit of every cache layer type (`python -m cache_crop_fix audit`): its checked-in report is up to date, the
fixed column has no inconsistent case and no crash, and it detects the bugs of stock transformers.

The audit runs stock and fixed side by side itself (it reverts and re-applies the fix), so these tests give the same
results with and without `pytest --stock`.
"""

import functools
from pathlib import Path

import pytest

from cache_crop_fix import audit, patcher


AUDIT_DOC = Path(__file__).resolve().parents[1] / "docs" / "source" / "en" / "cache_crop_audit.md"


@functools.cache
def _rows():
    return tuple(audit.run())


def _problems(side):
    return [
        f"{row.case.family} | {row.case.scenario} | {row.case.argument}: {getattr(row, side)}"
        for row in _rows()
        if getattr(row, side).kind in (audit.INCONSISTENT, audit.CRASH)
    ]


def test_checked_in_audit_is_up_to_date():
    assert AUDIT_DOC.exists(), f"{AUDIT_DOC} is missing: run `python -m cache_crop_fix audit`"
    assert AUDIT_DOC.read_text() == audit.render(list(_rows())), (
        f"{AUDIT_DOC} is out of date: run `python -m cache_crop_fix audit`"
    )


def test_fixed_column_has_no_inconsistent_case_and_no_crash():
    assert _problems("fixed") == []
    counts = audit.counts(list(_rows()), "fixed")
    assert counts[audit.CORRECT] > 0 and counts[audit.REFUSED] > 0, counts


def test_stock_column_shows_the_reported_bugs():
    """The audit can tell: on stock 5.14.1, `crop(0)` keeps the cache, oversized crops keep stale tokens, static
    layers have no `crop`, and quantized layers crash or keep their quantized part."""
    stock = {(row.case.family, row.case.scenario, row.case.argument): row.stock for row in _rows()}
    assert stock[("DynamicLayer", "3 tokens", "`crop(0)`")].kind == audit.INCONSISTENT
    assert "get_seq_length() 3, expected 0" in stock[("DynamicLayer", "3 tokens", "`crop(0)`")].detail
    assert "get_seq_length() 1, expected 0" in stock[("DynamicLayer", "3 tokens", "`crop(-5)`")].detail
    static = stock[("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-1)`")]
    assert static.kind == audit.CRASH and "AttributeError" in static.detail
    assert len(_problems("stock")) > 100


def test_every_layer_type_is_audited():
    from transformers import cache_utils

    audited = {row.case.family.split(" ")[0] for row in _rows()}
    layer_classes = {
        name
        for name, value in vars(cache_utils).items()
        if isinstance(value, type)
        and issubclass(value, (cache_utils.CacheLayerMixin, cache_utils.LinearAttentionCacheLayerMixin))
        and value.__module__ == cache_utils.__name__
        and not name.endswith("Mixin")
    }
    # Layers that need an optional backend are audited through an exact test quantizer (their common `crop`)
    optional = {"QuantoQuantizedLayer", "HQQQuantizedLayer"}
    assert layer_classes - optional <= audited, layer_classes - optional - audited
    for model_specific in (
        "MiniMaxM3VLSparseCacheLayer",
        "MiniMaxM3VLSparseStaticCacheLayer",
        "MiniMaxCache",
        "DeepseekV4HCACache",
        "DeepseekV4CSACache",
    ):
        assert model_specific in audited
    arguments = {row.case.argument for row in _rows()}
    assert {f"`crop({argument})`" for argument in audit.ARGUMENTS} <= arguments


def test_audit_leaves_the_fix_as_it_found_it():
    was_active = patcher.is_active()
    audit.run()
    assert patcher.is_active() == was_active
    patcher.revert()
    try:
        audit.run()
        assert not patcher.is_active()
    finally:
        if was_active:
            patcher.apply()


@pytest.mark.parametrize("outdated", [False, True])
def test_main_writes_and_checks(tmp_path, capsys, outdated):
    output = tmp_path / "audit.md"
    assert audit.main(["--output", str(output)]) == 0
    assert output.read_text() == audit.render(list(_rows()))
    if outdated:
        output.write_text(output.read_text() + "edited by hand\n")
    assert audit.main(["--check", "--output", str(output)]) == (1 if outdated else 0)
    captured = capsys.readouterr()
    assert audit.summary_line(list(_rows())) in captured.out
    assert ("out of date" in captured.err) == outdated
