"""The stock-vs-fixed audit of `crop` on transformers 5.24.x, under 5.24's own semantics (not exported upstream).

Every cache layer type, filled with 3 tokens (plus a few longer scenarios around sliding windows), is cropped with
`crop(2)`, `crop(0)`, `crop(-1)`, `crop(-3)` and `crop(-5)`. Under 5.24's semantics `crop(-k)` removes the last `k`
tokens (at most all of them), `crop(0)` removes none, and a positive value must raise. Each case is judged by
`cache_crop_fix.audit.run_case`: the cropped cache is compared with a fresh cache that received only the kept tokens,
then one more token is appended to both (they must return and hold the same states); a crop that raises must leave every
layer bit-identical.

Run it with `python tests/v5_24/audit_cases.py [--rows]`: it runs every case on stock transformers and with the fix, in
one process, and prints the totals (and, with `--rows`, every case whose outcome differs or is not exact).
"""

import sys
from collections import Counter

import numpy as np
import torch

from cache_crop_fix import audit as a


ARGUMENTS = (2, 0, -1, -3, -5)
APPEND = 1
LABELS = {a.CORRECT: "exact", a.REFUSED: "refused before change", a.INCONSISTENT: "wrong", a.CRASH: "crash"}


def _kept(argument: int, length: int) -> int | None:
    """The tokens 5.24's `crop(tokens_to_remove)` keeps, or `None` when it must raise (a positive value)."""
    if argument > 0:
        return None
    return max(length + argument, 0)


def cases() -> list:
    c = a._classes()
    from transformers.models.unlimited_ocr import modeling_unlimited_ocr as ocr

    llama, mistral, deepseek = a._tiny_configs()
    all_cases = []

    def add(family, scenario, setup, chunks, arguments=ARGUMENTS, refuse=()):
        length = sum(chunks)
        for argument in arguments:
            kept = None if argument in refuse else _kept(argument, length)
            all_cases.append(a.Case(family, scenario, f"crop({argument})", setup, chunks, a._crop(argument), kept))

    def layers(*factories, **kwargs):
        return a.Setup(a._layers(*factories), **kwargs)

    three, steps, six = (3,), (1, 1, 1), (1,) * 6
    window, max_len = a.WINDOW, a.MAX_CACHE_LEN

    # Dynamic layers
    add("DynamicLayer", "3 tokens", layers(c.DynamicLayer), three)
    add("DynamicSlidingWindowLayer", "3 tokens", layers(lambda: c.DynamicSlidingWindowLayer(window)), three)
    add(
        "DynamicSlidingWindowLayer",
        "6 tokens 1 by 1, past not recorded",
        layers(lambda: c.DynamicSlidingWindowLayer(window), record_past=False),
        six,
        refuse=(2, -1, -3),
    )
    add(
        "DynamicSlidingWindowLayer",
        "6 tokens 1 by 1, past recorded",
        layers(lambda: c.DynamicSlidingWindowLayer(window)),
        six,
        arguments=(2, 0, -1, -3, -5, -9),
    )
    add("DynamicIndexedLayer", "3 tokens", layers(c.DynamicIndexedLayer), three)

    # Static layers
    add("StaticLayer", "3 tokens", layers(lambda: c.StaticLayer(max_len)), three)
    add("StaticSlidingWindowLayer", "3 tokens", layers(lambda: c.StaticSlidingWindowLayer(max_len, window)), three)
    add(
        "StaticSlidingWindowLayer",
        "6 tokens 1 by 1 (beyond the window)",
        layers(lambda: c.StaticSlidingWindowLayer(max_len, window)),
        six,
        arguments=(2, 0, -1, -3, -9),
        refuse=(2, -1, -3),
    )
    add("StaticIndexedLayer", "3 tokens", layers(lambda: c.StaticIndexedLayer(max_len)), three)

    # Quantized layers
    add("QuantizedLayer (exact quantizer)", "3 tokens at once", layers(c.IdentityQuantizedLayer), three, refuse=(-1,))
    add(
        "QuantizedLayer (exact quantizer)",
        "3 tokens 1 by 1 (1 quantized + 2 residual)",
        layers(lambda: c.IdentityQuantizedLayer(residual_length=8)),
        steps,
    )
    add("Fp8QuantizedLayer", "3 tokens 1 by 1", layers(c.Fp8QuantizedLayer), steps)
    add("Fp8QuantizedLayer", "3 tokens at once", layers(c.Fp8QuantizedLayer), three)

    # Linear attention layers, after a full attention layer
    def linear(linear="conv", record_past=True, kernel=a.KERNEL):
        return layers(c.DynamicLayer, c.LinearAttentionLayer, linear=linear, record_past=record_past, kernel=kernel)

    family = "LinearAttentionLayer (after a DynamicLayer)"
    add(family, "conv states, past recorded", linear(), three)
    add(family, "conv + recurrent states", linear("conv+recurrent"), three, refuse=(2, -1))
    add(family, "conv states, past not recorded", linear(record_past=False), three, refuse=(2, -1))
    add(family, "conv kernel 4 (longer than the recorded past)", linear(kernel=4), three, refuse=(2, -1))
    add(family, "never updated", linear("none"), three)

    # Hybrid layers
    hybrids = [
        ("LinearAttentionAndFullAttentionLayer", c.LinearAttentionAndFullAttentionLayer),
        (
            "LinearAttentionAndSlidingWindowAttentionLayer",
            lambda: c.LinearAttentionAndSlidingWindowAttentionLayer(window),
        ),
        ("LinearAttentionAndStaticFullAttentionLayer", lambda: c.LinearAttentionAndStaticFullAttentionLayer(max_len)),
        (
            "LinearAttentionAndStaticSlidingWindowAttentionLayer",
            lambda: c.LinearAttentionAndStaticSlidingWindowAttentionLayer(max_len, window),
        ),
    ]
    for family, factory in hybrids:
        add(family, "conv states, past recorded", layers(factory), three)
        add(family, "conv + recurrent states", layers(factory, linear="conv+recurrent"), three, refuse=(2, -1))

    add("DummyLayer (after a DynamicLayer)", "3 tokens", layers(c.DynamicLayer, c.DummyLayer), three)

    # Model-specific layers
    add("MiniMaxM3VLSparseCacheLayer", "3 tokens", layers(c.MiniMaxM3VLSparseCacheLayer), three)
    add(
        "MiniMaxM3VLSparseStaticCacheLayer",
        "3 tokens",
        layers(lambda: c.MiniMaxM3VLSparseStaticCacheLayer(max_len)),
        three,
    )
    add(
        "DeepseekV4HCACache (compress rate 4)",
        "3 tokens (in the buffer)",
        layers(lambda: c.DeepseekV4HCACache(deepseek)),
        three,
    )
    add(
        "DeepseekV4CSACache (compress rate 2)",
        "3 tokens (1 entry + 1 buffered)",
        layers(lambda: c.DeepseekV4CSACache(deepseek)),
        three,
    )

    def reference_sliding(layer_class, **kwargs):
        def make():
            layer = layer_class(sliding_window=window, **kwargs)
            # The prefill length is declared, so that the fresh reference treats its tokens the same way
            layer.set_prefill_length(2)
            return layer

        return make

    add(
        "UnlimitedOcrDynamicReferenceSlidingWindowLayer",
        "3 tokens (2 prefill + 1 decoded)",
        layers(reference_sliding(ocr.UnlimitedOcrDynamicReferenceSlidingWindowLayer)),
        three,
    )
    add(
        "UnlimitedOcrStaticReferenceSlidingWindowLayer",
        "3 tokens (2 prefill + 1 decoded)",
        layers(reference_sliding(ocr.UnlimitedOcrStaticReferenceSlidingWindowLayer, max_cache_len=max_len)),
        three,
    )

    # Whole caches
    add("DynamicCache()", "2 layers, 3 tokens", a.Setup(lambda: a._filled_layers(c.DynamicCache(), 2)), three)
    add(
        "DynamicCache(config) with sliding layers, past not recorded",
        "6 tokens 1 by 1",
        a.Setup(lambda: c.DynamicCache(config=mistral), record_past=False),
        six,
        refuse=(2, -1, -3),
    )
    add("StaticCache(config)", "3 tokens", a.Setup(lambda: c.StaticCache(config=llama, max_cache_len=max_len)), three)
    add("EncoderDecoderCache", "3 tokens", a.Setup(a._encoder_decoder_cache), three)
    add("MtpCache", "2 layers, 3 tokens", a.Setup(lambda: a._filled_layers(c.MtpCache(), 2)), three)
    add("DFlashCache", "2 layers, 3 tokens", a.Setup(lambda: a._filled_layers(c.DFlashCache(), 2)), three)
    add("MiniMaxCache", "3 tokens", a.Setup(a._minimax_cache, record_past=False), three, refuse=ARGUMENTS)

    # Arguments
    family = "Arguments (DynamicCache, 3 tokens)"
    dynamic = a.Setup(lambda: a._filled_layers(c.DynamicCache(), 1))
    for argument in (True, False, -1.0, "-1", None, torch.tensor([-1, -2]), torch.tensor([-1]), torch.tensor(True)):
        all_cases.append(
            a.Case(family, "invalid", f"crop({argument!r})", dynamic, three, a._crop(argument), None, TypeError)
        )
    for argument in (torch.tensor(-1), torch.tensor(-1, dtype=torch.int32), np.int64(-1)):
        all_cases.append(a.Case(family, "valid", f"crop({argument!r})", dynamic, three, a._crop(argument), 2))
    return all_cases


_observe_attention_states = a._observe_attention_states


def _observe_attention_states_524(layer, prefix: str) -> dict:
    """As the audit's, but a 5.24 `StaticIndexedLayer` has no indexer counter (`None`) until its first indexer update."""
    if getattr(layer, "indexer_cumulative_length", 0) is not None:
        return _observe_attention_states(layer, prefix)
    layer.indexer_cumulative_length = 0
    try:
        return _observe_attention_states(layer, prefix)
    finally:
        layer.indexer_cumulative_length = None


def _compare_with_reference_524(case, cache):
    """
    As the audit's, but a reference that records its past gets the `crop(0)` that follows every forward in `generate`
    (it restricts recorded states back to what the next forward needs), as the cropped cache's `crop` does.
    """
    reference = a._build(case.setup, a._truncate(case.chunks, case.kept))
    if case.setup.record_past:
        try:
            reference.crop(0)
        except Exception:
            pass
    differences = a._differences(a._observe(cache, case.setup), a._observe(reference, case.setup))
    if differences:
        return a.Outcome(a.INCONSISTENT, differences)
    try:
        returned = a._append(cache, case.setup, case.kept, APPEND)
    except Exception as error:
        return a.Outcome(a.CRASH, f"next update raised {a._describe_error(error)}")
    expected = a._append(reference, case.setup, case.kept, APPEND)
    differences = a._differences(dict(returned), dict(expected))
    if differences:
        return a.Outcome(a.INCONSISTENT, f"after the next update: {differences}")
    return a.Outcome(a.CORRECT)


def run() -> list:
    a._classes()
    from transformers.models.unlimited_ocr import modeling_unlimited_ocr  # noqa: F401 (patched when imported)

    all_cases = cases()
    with a._fix_state(False):
        stock = [a.run_case(case) for case in all_cases]
    with a._fix_state(True):
        fixed = [a.run_case(case) for case in all_cases]
    return list(zip(all_cases, stock, fixed))


def _totals(outcomes) -> str:
    outcomes = list(outcomes)
    found = Counter(outcome.kind for outcome in outcomes)
    after_change = sum(1 for outcome in outcomes if "after changing" in outcome.detail)
    parts = [f"{found[kind]} {label}" for kind, label in LABELS.items()]
    return ", ".join(parts) + f" (of which {after_change} refused only after changing the cache)"


def main(argv) -> int:
    import transformers

    a.APPEND = APPEND
    a._observe_attention_states = _observe_attention_states_524
    a._compare_with_reference = _compare_with_reference_524
    rows = run()
    if "--rows" in argv:
        for case, stock, fixed in rows:
            if stock.kind != a.CORRECT or fixed.kind != a.CORRECT:
                print(f"{case.family} | {case.scenario} | {case.argument} | stock: {stock} | fixed: {fixed}")
    print(f"transformers {transformers.__version__}, {len(rows)} cases")
    print(f"stock: {_totals(stock for _, stock, _ in rows)}")
    print(f"fixed: {_totals(fixed for _, _, fixed in rows)}")
    return 0 if all(fixed.kind in (a.CORRECT, a.REFUSED) for _, _, fixed in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
