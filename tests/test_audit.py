"""The audit of every cache layer type (`python -m cache_crop_fix audit`), for the target of the installed
transformers: the fixed column has no inconsistent case and no crash, the audit finds the bugs of stock transformers
(verdicts written here from each release's semantics, not produced by the audit), and its checked-in section is up to
date (a regeneration check only). Runs under every target's venv (on 5.25 the fix is not finished: its remaining wrong
cases are listed in `KNOWN_FIXED_PROBLEMS_V5_25`, and none may be added).

The audit runs stock and fixed side by side itself (it reverts and re-applies the fix), so these tests give the same
results with and without `pytest --stock`.
"""

import functools
import re
from pathlib import Path

import pytest

import transformers
from cache_crop_fix import audit, patcher
from cache_crop_fix.targets import target_for


AUDIT_DOC = Path(__file__).resolve().parents[1] / "docs" / "source" / "en" / "cache_crop_audit.md"
TARGET = target_for(transformers.__version__).name


@functools.cache
def _rows():
    return tuple(audit.run())


def _problems(side):
    return [
        f"{row.case.family} | {row.case.scenario} | {row.case.argument}: {getattr(row, side)}"
        for row in _rows()
        if getattr(row, side).kind in (audit.INCONSISTENT, audit.CRASH)
    ]


def test_regeneration_check_checked_in_audit_section_matches_the_generator():
    """Only a regeneration check (the section and the expectation both come from `audit.render_section`): what the
    audit must find is asserted independently in `test_audit_verdicts_match_independent_expectations`."""
    assert AUDIT_DOC.exists(), f"{AUDIT_DOC} is missing: run `python -m cache_crop_fix audit`"
    page = AUDIT_DOC.read_text()
    assert audit.section_of(page, TARGET) == audit.render_section(list(_rows())), (
        f"the {TARGET} section of {AUDIT_DOC} is out of date: run `python -m cache_crop_fix audit` under it"
    )
    # Every target's section is on the page, the main target (upstream `main`) first
    assert (
        page.index("<!-- audit v5_25: begin -->")
        < page.index("<!-- audit v5_24: begin -->")
        < page.index("<!-- audit v5_14: begin -->")
    )


# What the 5.25 fix still gets wrong: nothing since its fork step `exact`. Should a case go wrong while a step is in progress, list it
# here (`test_fixed_column_has_no_inconsistent_case_and_no_crash` then tolerates it and says when it is fixed).
KNOWN_FIXED_PROBLEMS_V5_25: set[tuple[str, str, str]] = set()
KNOWN_FIXED_PROBLEMS = KNOWN_FIXED_PROBLEMS_V5_25 if TARGET == "v5_25" else set()


def _wrong_cases(side):
    return {
        (row.case.family, row.case.scenario, row.case.argument): str(getattr(row, side))
        for row in _rows()
        if getattr(row, side).kind in (audit.INCONSISTENT, audit.CRASH)
    }


def test_fixed_column_has_no_inconsistent_case_and_no_crash():
    """On 5.14 and 5.24: none. On 5.25 (the fix in progress): none beyond the known ones, and a known one that is
    fixed must leave the list (so that it cannot come back unnoticed)."""
    wrong = _wrong_cases("fixed")
    new = {case: outcome for case, outcome in wrong.items() if case not in KNOWN_FIXED_PROBLEMS}
    assert not new, f"wrong with the fix (not known): {new}"
    fixed_now = KNOWN_FIXED_PROBLEMS - set(wrong)
    assert not fixed_now, f"now right with the fix: remove them from KNOWN_FIXED_PROBLEMS_V5_25: {fixed_now}"
    counts = audit.counts(list(_rows()), "fixed")
    assert counts[audit.CORRECT] > 0 and counts[audit.REFUSED] > 0, counts


def test_fixed_column_has_no_wrong_case_at_all():
    """Issue 19's "done when": the audit has 0 wrong cases with the fix."""
    assert _problems("fixed") == []


def test_the_installed_target_is_audited():
    assert audit.table().target == TARGET
    assert all(row.case.argument.startswith("`crop(") for row in _rows())


@pytest.mark.skipif(TARGET != "v5_14", reason="5.14.1's bugs")
def test_stock_column_shows_the_reported_bugs_v5_14():
    """The audit can tell: on stock 5.14.1, `crop(0)` keeps the cache, oversized crops keep stale tokens, static
    layers have no `crop`, and quantized layers crash or keep their quantized part."""
    stock = {(row.case.family, row.case.scenario, row.case.argument): row.stock for row in _rows()}
    assert stock[("DynamicLayer", "3 tokens", "`crop(0)`")].kind == audit.INCONSISTENT
    assert "get_seq_length() 3, expected 0" in stock[("DynamicLayer", "3 tokens", "`crop(0)`")].detail
    assert "get_seq_length() 1, expected 0" in stock[("DynamicLayer", "3 tokens", "`crop(-5)`")].detail
    static = stock[("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-1)`")]
    assert static.kind == audit.CRASH and "AttributeError" in static.detail
    assert len(_problems("stock")) > 100


@pytest.mark.skipif(TARGET != "v5_24", reason="5.24.0's bugs")
def test_stock_column_shows_the_reported_bugs_v5_24():
    """The audit can tell (issue 11): on stock 5.24.0 the static family drives its counters negative, a refusing
    layer leaves the earlier ones cropped, quantized layers crash, and a never-filled linear layer fails on `None`."""
    stock = {(row.case.family, row.case.scenario, row.case.argument): row.stock for row in _rows()}
    assert (
        "get_seq_length() -2, expected 0" in stock[("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-5)`")].detail
    )
    family = "LinearAttentionLayer (conv kernel 2), after a DynamicLayer"
    partial = stock[(family, "conv states, past not recorded", "`crop(-1)`")]
    assert partial.kind == audit.INCONSISTENT and "after changing layer 0" in partial.detail
    never_filled = stock[(family, "never updated (a `moe` placeholder)", "`crop(0)`")]
    assert never_filled.kind == audit.CRASH and "NoneType" in never_filled.detail
    fp8 = stock[("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens at once", "`crop(-1)`")]
    assert fp8.kind == audit.CRASH and "IndexError" in fp8.detail
    # The measurement (240 cases, other scenarios) found 64 wrong; this table finds as many families
    assert len(_problems("stock")) > 60


@pytest.mark.skipif(TARGET != "v5_25", reason="5.25.0's bugs")
def test_stock_column_shows_the_reported_bugs_v5_25():
    """The audit can tell (issue 19): on stock 5.25.0 a verification of N+1 tokens rolls back to the state from before
    it, state indices share one history, a removal past the history raises after changing the counter, `reset` keeps
    the previous sequence's history, and the static hybrids never crop their attention part."""
    stock = {(row.case.family, row.case.scenario, row.case.argument): row.stock for row in _rows()}
    family = "LinearAttentionLayer (conv kernel 2), after a DynamicLayer"
    verification = stock[
        (family, "N=2, 3 tokens at once (a verification of N+1 tokens: no state after the first)", "`crop(-2)`")
    ]
    assert verification.kind == audit.INCONSISTENT and "recurrent state[0] 0, expected 1" in verification.detail
    shared = stock[
        (
            "LinearAttentionLayer (number_of_states=2, conv kernel 2), after a DynamicLayer",
            "N=3, 3 tokens at once",
            "`crop(-1)`",
        )
    ]
    assert "recurrent state[0] 102, expected 2" in shared.detail  # state 0 restored from state 1's history
    beyond = stock[(family, "N=3, 3 tokens at once (every token's state handed over)", "`crop(-5)`")]
    assert beyond.kind == audit.INCONSISTENT and "raised IndexError after changing" in beyond.detail
    sequences = f"{family}: crop sequences"
    after_reset = stock[
        (sequences, "3 tokens at once after `reset()` of a 5-token sequence (decoded 1 by 1), N=2", "`crop(-3)`")
    ]
    assert "recurrent state[0] 4, expected None" in after_reset.detail  # a state of the previous sequence
    static_hybrid = stock[
        ("LinearAttentionAndStaticFullAttentionLayer (max_cache_len 8)", "N=3, 3 tokens at once", "`crop(-1)`")
    ]
    assert "get_seq_length() 3, expected 2" in static_hybrid.detail
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
    # (and 5.24's abstract base of the quantized layers through its two concrete kinds)
    optional = {"QuantoQuantizedLayer", "HQQQuantizedLayer", "BaseQuantizedLayer"}
    assert layer_classes - optional <= audited, layer_classes - optional - audited
    model_specific = {
        "MiniMaxM3VLSparseCacheLayer",
        "MiniMaxM3VLSparseStaticCacheLayer",
        "MiniMaxCache",
        "DeepseekV4HCACache",
        "DeepseekV4CSACache",
    }
    if TARGET in ("v5_24", "v5_25"):
        # New in 5.24: `Fp8QuantizedLayer` and the indexed layers are found above; `DummyLayer` (a placeholder that
        # is no attention or linear attention layer), `DFlashCache` and UnlimitedOcr's layers are listed here
        assert {"Fp8QuantizedLayer", "DynamicIndexedLayer", "StaticIndexedLayer"} <= layer_classes
        model_specific |= {
            "DummyLayer",
            "DFlashCache",
            "UnlimitedOcrDynamicReferenceSlidingWindowLayer",
            "UnlimitedOcrStaticReferenceSlidingWindowLayer",
        }
    assert model_specific <= audited, model_specific - audited
    arguments = {row.case.argument for row in _rows()}
    assert {f"`crop({argument})`" for argument in audit.table().arguments} <= arguments


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
def test_main_writes_its_section_and_checks_it(tmp_path, capsys, outdated):
    output = tmp_path / "audit.md"
    other = "v5_14" if TARGET == "v5_24" else "v5_24"
    other_section = f"<!-- audit {other}: begin -->\nthe other target's tables\n<!-- audit {other}: end -->\n"
    output.write_text(other_section)
    # `main` exits 1 while the fix has wrong cases (on 5.25 for now), whatever it wrote
    wrong = 1 if _problems("fixed") else 0
    assert audit.main(["--output", str(output)]) == wrong
    page = output.read_text()
    assert audit.section_of(page, TARGET) == audit.render_section(list(_rows()))
    assert audit.section_of(page, other) == other_section, "the other target's section must be kept"
    if outdated:
        output.write_text(page.replace("| correct | correct |", "| correct | edited by hand |", 1))
    assert audit.main(["--check", "--output", str(output)]) == (1 if outdated else wrong)
    captured = capsys.readouterr()
    assert audit.summary_line(list(_rows())) in captured.out
    assert ("out of date" in captured.err) == outdated


CORRECT, REFUSED, INCONSISTENT, CRASH = audit.CORRECT, audit.REFUSED, audit.INCONSISTENT, audit.CRASH
# What the audit must find, written here from the crop semantics (not produced by the audit): (family, scenario,
# argument) -> (stock 5.14.1 verdict, fixed verdict). A 3-token layer is the running example: on stock, `crop(0)` is a
# no-op and `crop(-5)` keeps 1 stale token (`[:-2]`), static layers have no `crop` at all (`AttributeError`), and linear
# attention layers cannot tell a full rollback from a partial one.
EXPECTED_VERDICTS_V5_14 = {
    ("DynamicLayer", "3 tokens", "`crop(2)`"): (CORRECT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(0)`"): (INCONSISTENT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(-1)`"): (CORRECT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(-3)`"): (CORRECT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    ("DynamicIndexedLayer", "3 tokens", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    ("DynamicSlidingWindowLayer (window 4)", "3 tokens (below the window)", "`crop(0)`"): (INCONSISTENT, CORRECT),
    # Beyond the window: only a full rollback is possible (stock refuses every crop there)
    ("DynamicSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-1)`"): (REFUSED, REFUSED),
    ("DynamicSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-9)`"): (REFUSED, CORRECT),
    ("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-1)`"): (CRASH, CORRECT),
    ("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-5)`"): (CRASH, CORRECT),
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-1)`"): (CRASH, REFUSED),
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-6)`"): (CRASH, CORRECT),
    ("StaticIndexedLayer (max_cache_len 8)", "3 tokens", "`crop(0)`"): (CRASH, CORRECT),
    ("QuantizedLayer (exact test quantizer, residual_length 2)", "3 tokens at once (all quantized)", "`crop(-1)`"): (
        CRASH,
        CORRECT,
    ),
    ("QuantizedLayer (exact test quantizer, residual_length 2)", "3 tokens at once (all quantized)", "`crop(0)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    # Recurrent states summarize every token: a partial rollback must be refused, a full one resets them
    (
        "LinearAttentionLayer (conv kernel 2), after a DynamicLayer",
        "conv + recurrent states, past recorded",
        "`crop(-1)`",
    ): (INCONSISTENT, REFUSED),
    (
        "LinearAttentionLayer (conv kernel 2), after a DynamicLayer",
        "conv + recurrent states, past recorded",
        "`crop(-5)`",
    ): (
        INCONSISTENT,
        CORRECT,
    ),
    (
        "LinearAttentionLayer (conv kernel 2), after a DynamicLayer",
        "conv states, past recorded, 3 tokens",
        "`crop(-1)`",
    ): (
        CORRECT,
        CORRECT,
    ),
    ("LinearAttentionAndFullAttentionLayer", "conv states, past recorded", "`crop(0)`"): (INCONSISTENT, CORRECT),
    ("LinearAttentionAndFullAttentionLayer", "conv + recurrent states", "`crop(-1)`"): (INCONSISTENT, REFUSED),
    ("MiniMaxCache (attention + lightning attention)", "3 tokens", "`crop(-1)`"): (REFUSED, REFUSED),
    ("MiniMaxCache (attention + lightning attention)", "3 tokens", "`crop(0)`"): (REFUSED, REFUSED),
    # Tokens already folded into a compressed entry cannot be removed one by one
    ("DeepseekV4HCACache (compress rate 4)", "6 tokens: 1 compressed entry + 2 buffered", "`crop(-2)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    ("DeepseekV4HCACache (compress rate 4)", "6 tokens: 1 compressed entry + 2 buffered", "`crop(-3)`"): (
        INCONSISTENT,
        REFUSED,
    ),
    ("EncoderDecoderCache (self-attention cropped, cross-attention kept)", "3 tokens", "`crop(0)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    ("Arguments (`DynamicCache`, 3 tokens)", "invalid", "`crop(True)`"): (INCONSISTENT, REFUSED),
    ("Arguments (`DynamicCache`, 3 tokens)", "valid", "`crop(-0)`"): (INCONSISTENT, CORRECT),
    ("Arguments (`DynamicCache`, 3 tokens)", "valid", "`crop(tokens_to_remove=-1)`"): (REFUSED, CORRECT),
}


# The same for 5.24.0, from its semantics (`crop(-k)` removes k tokens, `crop(0)` nothing, positive raises) and the
# failures issue 11 lists: `DynamicLayer` was already right there (it clamps), the static family drives its counters
# negative, quantized layers inherit `DynamicLayer.crop` (IndexError or a cut of the residual part only), a refusing
# linear layer leaves the earlier layers cropped, the static hybrids have no `crop` of their own, DeepSeek-V4's
# compressor state is never rolled back, UnlimitedOcr's static reference-sliding layer has no `crop`
EXPECTED_VERDICTS_V5_24 = {
    ("DynamicLayer", "3 tokens", "`crop(2)`"): (REFUSED, REFUSED),
    ("DynamicLayer", "3 tokens", "`crop(0)`"): (CORRECT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(-1)`"): (CORRECT, CORRECT),
    ("DynamicLayer", "3 tokens", "`crop(-5)`"): (CORRECT, CORRECT),
    ("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-1)`"): (
        INCONSISTENT,
        REFUSED,
    ),
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-9)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    # Stock only moves the counters, which is exact: the slots past them are overwritten next, and masked meanwhile
    ("StaticIndexedLayer (max_cache_len 8)", "3 tokens", "`crop(-1)`"): (CORRECT, CORRECT),
    ("QuantizedLayer (exact test quantizer, residual_length 2)", "3 tokens at once (all quantized)", "`crop(-1)`"): (
        CRASH,
        REFUSED,
    ),
    (
        "QuantizedLayer (exact test quantizer, residual_length 8)",
        "3 tokens, 1 by 1 (1 quantized + 2 residual)",
        "`crop(-1)`",
    ): (
        INCONSISTENT,
        CORRECT,
    ),
    ("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens at once", "`crop(-1)`"): (CRASH, CORRECT),
    ("Fp8QuantizedLayer", "3 tokens, 1 by 1 (scale calibrated on the first)", "`crop(-1)`"): (CRASH, CORRECT),
    ("LinearAttentionLayer (conv kernel 2), after a DynamicLayer", "conv states, past not recorded", "`crop(-1)`"): (
        INCONSISTENT,
        REFUSED,
    ),
    (
        "LinearAttentionLayer (conv kernel 2), after a DynamicLayer",
        "never updated (a `moe` placeholder)",
        "`crop(0)`",
    ): (
        CRASH,
        CORRECT,
    ),
    (
        "LinearAttentionLayer (conv kernel 2), after a DynamicLayer",
        "conv + recurrent states, past recorded",
        "`crop(-1)`",
    ): (
        INCONSISTENT,
        REFUSED,
    ),
    ("LinearAttentionAndStaticFullAttentionLayer (max_cache_len 8)", "conv states, past recorded", "`crop(-1)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    ("DeepseekV4HCACache (compress rate 4)", "3 tokens (all in the compressor buffer)", "`crop(-1)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    # Stock only moves the sliding count, as every static layer does (its freed slot is shown empty, issue 40)
    ("UnlimitedOcrStaticReferenceSlidingWindowLayer (window 4)", "3 tokens (2 prefill + 1 decoded)", "`crop(-1)`"): (
        CORRECT,
        CORRECT,
    ),
    ("DummyLayer (after a DynamicLayer)", "3 tokens", "`crop(-1)`"): (CORRECT, CORRECT),
    ("DFlashCache", "2 layers, 3 tokens", "`crop(-5)`"): (CORRECT, CORRECT),
    ("MiniMaxCache (attention + lightning attention)", "3 tokens", "`crop(-1)`"): (REFUSED, REFUSED),
    ("Arguments (`DynamicCache`, 3 tokens)", "invalid", "`crop(False)`"): (INCONSISTENT, REFUSED),
    ("Arguments (`DynamicCache`, 3 tokens)", "valid", "`crop(tokens_to_remove=-1)`"): (CORRECT, CORRECT),
}

# The same for 5.25.0, from its semantics (as 5.24's) and the causes issue 19 lists. Linear attention layers get
# per-token recurrent states (N = `recurrent_states_to_keep`); the state after token p encodes p.
_LINEAR = "LinearAttentionLayer (conv kernel 2), after a DynamicLayer"
_VERIFICATION = "N=2, 3 tokens at once (a verification of N+1 tokens: no state after the first)"
EXPECTED_VERDICTS_V5_25 = {
    # A full static sliding window holds the 3 tokens the next one needs and one more: 1 can be removed (step 17; stock
    # only moves its counts, the next token's window then holds a removed token)
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-1)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    ("StaticSlidingWindowLayer (window 4)", "6 tokens, 1 by 1 (beyond the window)", "`crop(-3)`"): (
        INCONSISTENT,
        REFUSED,
    ),
    ("DynamicLayer", "3 tokens", "`crop(2)`"): (REFUSED, REFUSED),
    ("DynamicLayer", "3 tokens", "`crop(-5)`"): (CORRECT, CORRECT),
    # The static counters went negative (the clamp)
    ("StaticLayer (max_cache_len 8)", "3 tokens", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    # Cause 1: N+1 tokens verified with N states; every draft rejected restores the state from before the forward.
    # The state after the first token was never handed over: the fix refuses
    (_LINEAR, _VERIFICATION, "`crop(-2)`"): (INCONSISTENT, REFUSED),
    (_LINEAR, "N=1, 3 tokens at once (no state before the last token)", "`crop(-1)`"): (INCONSISTENT, REFUSED),
    # A rollback the history covers restores the right state, but stock assigns it (its static address is lost)
    (_LINEAR, _VERIFICATION, "`crop(-1)`"): (INCONSISTENT, CORRECT),
    (_LINEAR, "N=3, 3 tokens at once (every token's state handed over)", "`crop(-2)`"): (INCONSISTENT, CORRECT),
    (_LINEAR, "conv states only (LFM2), N=1, 3 tokens at once", "`crop(-1)`"): (CORRECT, CORRECT),
    # Cause 4: not clamped, the history indexed past its start after the counter moved
    (_LINEAR, "N=3, 3 tokens at once (every token's state handed over)", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    (_LINEAR, "conv states only (LFM2), N=1, 3 tokens at once", "`crop(-5)`"): (INCONSISTENT, CORRECT),
    # Cause 3: one history list shared by the states of a layer
    (
        "LinearAttentionLayer (number_of_states=2, conv kernel 2), after a DynamicLayer",
        "N=3, 3 tokens at once",
        "`crop(-1)`",
    ): (INCONSISTENT, CORRECT),
    # Cause 5: a second rollback, `crop(0)` then `crop(-1)`, `reset`, the default N, never recorded or never updated
    (
        f"{_LINEAR}: crop sequences",
        "2 tokens left by `crop(-1)` of 3 tokens at once, N=3 (a second rollback in a row)",
        "`crop(-1)`",
    ): (INCONSISTENT, REFUSED),
    (f"{_LINEAR}: crop sequences", "N=3, 3 tokens at once, then `crop(0)`", "`crop(-1)`"): (INCONSISTENT, REFUSED),
    (
        f"{_LINEAR}: crop sequences",
        "3 tokens at once after `reset()` of a 5-token sequence (decoded 1 by 1), N=2",
        "`crop(-3)`",
    ): (INCONSISTENT, CORRECT),
    (_LINEAR, "recorded with `activate_past_recording()` (default N), 3 tokens at once", "`crop(0)`"): (
        CRASH,
        CORRECT,
    ),
    # The attention layer before the refusing linear one must be left as it was
    (_LINEAR, "never recorded, 3 tokens at once", "`crop(-1)`"): (INCONSISTENT, REFUSED),
    (_LINEAR, "never updated (a `moe` placeholder), 3 tokens", "`crop(0)`"): (CRASH, CORRECT),
    # The static hybrids had no `crop` of their own: the attention part was never cropped
    ("LinearAttentionAndStaticFullAttentionLayer (max_cache_len 8)", "N=3, 3 tokens at once", "`crop(-1)`"): (
        INCONSISTENT,
        CORRECT,
    ),
    (
        "LinearAttentionAndStaticSlidingWindowAttentionLayer (max_cache_len 8, window 4)",
        "N=3, 3 tokens at once",
        "`crop(-1)`",
    ): (INCONSISTENT, CORRECT),
    (
        "LinearAttentionAndFullAttentionLayer",
        "N=2, 3 tokens at once (no state after the first)",
        "`crop(-2)`",
    ): (
        INCONSISTENT,
        REFUSED,
    ),
    ("Arguments (`DynamicCache`, 3 tokens)", "valid", "`crop(tokens_to_remove=-1)`"): (CORRECT, CORRECT),
}
EXPECTED_VERDICTS = {
    "v5_14": EXPECTED_VERDICTS_V5_14,
    "v5_24": EXPECTED_VERDICTS_V5_24,
    "v5_25": EXPECTED_VERDICTS_V5_25,
}[TARGET]


def test_audit_verdicts_match_independent_expectations():
    verdicts = {(row.case.family, row.case.scenario, row.case.argument): row for row in _rows()}
    missing = set(EXPECTED_VERDICTS) - set(verdicts)
    assert not missing, f"cases the audit no longer runs: {missing}"
    wrong = {
        case: ((verdicts[case].stock.kind, verdicts[case].fixed.kind), expected)
        for case, expected in EXPECTED_VERDICTS.items()
        if (verdicts[case].stock.kind, verdicts[case].fixed.kind) != expected
    }
    assert not wrong, wrong


def test_every_full_rollback_is_correct_when_fixed():
    """Rule, independent of the generator: on every cache that can be cropped at all, a removal of at least the cached
    length (and on 5.14 `crop(0)`, which empties it there) leaves it correct (nothing stale) with the fix; on 5.24,
    `crop(0)` leaves it correct too (it removes nothing) and a positive value is refused."""
    checked = 0
    for row in _rows():
        family, scenario, argument = row.case.family, row.case.scenario, row.case.argument
        if family.startswith(
            ("MiniMaxCache", "Arguments", "Cache of LinearAttentionLayers only (no sequence length)")
        ):
            continue
        if (family, scenario, argument) in KNOWN_FIXED_PROBLEMS:
            continue
        match = re.search(r"(\d+) tokens", scenario)
        num_tokens = int(match.group(1)) if match else None
        value = argument.strip("`")
        if TARGET in ("v5_24", "v5_25") and re.fullmatch(r"crop\([1-9]\d*\)", value):
            assert row.fixed.kind == REFUSED, (family, scenario, argument, row.fixed)
            continue
        if value in ("crop(0)", f"crop(-{num_tokens})") or (
            num_tokens is not None
            and value.startswith("crop(-")
            and value[6:-1].isdigit()
            and int(value[6:-1]) > num_tokens
        ):
            assert row.fixed.kind == CORRECT, (family, scenario, argument, row.fixed)
            checked += 1
    assert checked >= 60, checked
