"""The audit's cases for the `main` target (transformers 5.25.x, upstream `main`), under 5.25's meaning of `crop` (the
same as 5.24's): `crop(-k)` removes the last `k` tokens (at most all of them), `crop(0)` removes none, and a positive
value must raise.

5.25 rolls linear attention layers back through the per-token recurrent states the models hand over
(`activate_past_recording(recurrent_states_to_keep=N)`): the linear attention cases feed them as 5.25's models do
(`Setup.per_token`), and the reference of a cropped layer is a fresh one fed only the kept tokens the same way. A crop
whose states were handed over (and not dropped by a crop since) must be done exactly (`Case.exact`: refusing it is
wrong); one whose states were never handed over may be refused, and must not restore anything else.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from . import common
from .common import (
    KERNEL,
    MAX_CACHE_LEN,
    RESIDUAL_LENGTH,
    WINDOW,
    Case,
    Table,
    _append,
    _classes,
    _crop,
    _filled_layers,
    _layers,
    _tiny_configs,
    shared_cases,
)


# Static layers' stale slots (at or beyond their count) are what 5.25's static `crop` leaves by design
# and a crop must restore in place what compiled decoding holds by address
Setup = functools.partial(common.Setup, hide_stale_static=True, keep_addresses=True)

ARGUMENTS = (2, 0, -1, -3, -5)
# Linear attention layers: also `crop(-2)`, a rollback that reaches the state after the first of 3 tokens
LINEAR_ARGUMENTS = (2, 0, -1, -2, -3, -5)


def kept(argument: int, length: int) -> int | None:
    """The tokens 5.25's `crop(tokens_to_remove)` keeps, or `None` when it must raise (a positive value)."""
    if argument > 0:
        return None
    return max(length + argument, 0)


def settle(cache, setup) -> None:
    """
    What `generate` does after every forward on 5.25 (`DeferredStopCheck`): `crop(0)`, which restricts the recorded past
    of the layers that record it back to what the next forward needs.
    """
    if setup.record_past:
        try:
            cache.crop(0)
        except Exception:  # a cache that refuses every crop: its reference stays as built
            pass


def _generate_step(cache) -> None:
    cache.crop(0)


def cases(table: Table) -> list[Case]:
    c = _classes()
    from transformers.models.unlimited_ocr import modeling_unlimited_ocr as ocr

    llama, mistral, deepseek = _tiny_configs()
    all_cases: list[Case] = []

    def add(family, scenario, setup, chunks, arguments=None, refuse=()):
        """`crop(argument)` for each argument; `refuse` lists those the contract cannot honour exactly. Removing nothing
        or every token can always be done exactly (refusing it is wrong), unless listed in `refuse`."""
        length = sum(chunks)
        for argument in table.arguments if arguments is None else arguments:
            all_cases.append(
                Case(
                    family,
                    scenario,
                    f"`crop({argument})`",
                    setup,
                    chunks,
                    _crop(argument),
                    None if argument in refuse else table.kept(argument, length),
                    exact=argument not in refuse and argument <= 0 and (argument == 0 or -argument >= length),
                )
            )

    def layers(*factories, **kwargs):
        return Setup(_layers(*factories), **kwargs)

    three, steps, six = (3,), (1, 1, 1), (1,) * 6
    window, max_len = WINDOW, MAX_CACHE_LEN

    # Dynamic layers
    add("DynamicLayer", "3 tokens", layers(c.DynamicLayer), three)
    family = f"DynamicSlidingWindowLayer (window {window})"
    add(family, "3 tokens (below the window)", layers(lambda: c.DynamicSlidingWindowLayer(window)), three)
    add(
        family,
        "6 tokens, 1 by 1, past not recorded (beyond the window)",
        layers(lambda: c.DynamicSlidingWindowLayer(window), record_past=False),
        six,
        refuse=(2, -1, -3),
    )
    add(
        family,
        "6 tokens, 1 by 1, past recorded (beyond the window)",
        layers(lambda: c.DynamicSlidingWindowLayer(window)),
        six,
        arguments=(2, 0, -1, -3, -5, -9),
    )
    add("DynamicIndexedLayer", "3 tokens", layers(c.DynamicIndexedLayer), three)

    # Static layers
    add(f"StaticLayer (max_cache_len {max_len})", "3 tokens", layers(lambda: c.StaticLayer(max_len)), three)
    family = f"StaticSlidingWindowLayer (window {window})"
    add(family, "3 tokens (below the window)", layers(lambda: c.StaticSlidingWindowLayer(max_len, window)), three)
    add(
        family,
        "6 tokens, 1 by 1 (beyond the window)",
        layers(lambda: c.StaticSlidingWindowLayer(max_len, window)),
        six,
        arguments=(2, 0, -1, -3, -9),
        # Its window of 4 holds the 3 tokens the next one needs and one more: 1 can be removed (upstream step 17)
        refuse=(2, -3),
    )
    add(
        f"StaticIndexedLayer (max_cache_len {max_len})",
        "3 tokens",
        layers(lambda: c.StaticIndexedLayer(max_len)),
        three,
    )

    # Quantized layers
    family = f"QuantizedLayer (exact test quantizer, residual_length {RESIDUAL_LENGTH})"
    quantized = layers(lambda: c.IdentityQuantizedLayer(residual_length=RESIDUAL_LENGTH))
    add(family, "3 tokens at once (all quantized)", quantized, three, refuse=(2, -1))
    add(
        "QuantizedLayer (exact test quantizer, residual_length 8)",
        "3 tokens, 1 by 1 (1 quantized + 2 residual)",
        layers(lambda: c.IdentityQuantizedLayer(residual_length=8)),
        steps,
    )
    add("Fp8QuantizedLayer", "3 tokens, 1 by 1 (scale calibrated on the first)", layers(c.Fp8QuantizedLayer), steps)
    add("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens at once", layers(c.ExactFp8QuantizedLayer), three)
    add("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens, 1 by 1", layers(c.ExactFp8QuantizedLayer), steps)

    # ----------------------------------------------------------------------------------------------------------------
    # Linear attention layers (5.25: per-token recurrent states)

    def exact_cases(family, scenario, setup, chunks, doable, arguments=LINEAR_ARGUMENTS, prepare=None, length=None):
        """`crop(a)` for each argument; `doable` lists the partial removals whose states were handed over (removing
        nothing or every token is always doable). `length`: the cached tokens when the audited crop runs."""
        length = sum(chunks) if length is None else length
        for argument in arguments:
            removal = -argument
            all_cases.append(
                Case(
                    family,
                    scenario,
                    f"`crop({argument})`",
                    setup,
                    chunks,
                    _crop(argument),
                    table.kept(argument, length),
                    prepare=prepare,
                    exact=argument <= 0 and (removal == 0 or removal >= length or removal in doable),
                )
            )

    def linear(*factories, states="conv+recurrent", keep=3, record_past=True, kernel=KERNEL, between=None):
        return layers(
            *factories,
            linear=states,
            record_past=record_past,
            kernel=kernel,
            recurrent_states_to_keep=keep,
            per_token=True,
            between=between,
        )

    def after_dynamic(**kwargs):
        return linear(c.DynamicLayer, c.LinearAttentionLayer, **kwargs)

    family = f"LinearAttentionLayer (conv kernel {KERNEL}), after a DynamicLayer"
    exact_cases(
        family,
        "conv states only (LFM2), N=1, 3 tokens at once",
        after_dynamic(states="conv", keep=1),
        three,
        doable=(1, 2),
    )
    exact_cases(
        family,
        "conv states only (LFM2), N=1, 3 tokens, 1 by 1",
        after_dynamic(states="conv", keep=1),
        steps,
        doable=(1, 2),
    )
    exact_cases(
        family, "N=3, 3 tokens at once (every token's state handed over)", after_dynamic(keep=3), three, doable=(1, 2)
    )
    exact_cases(
        family,
        "N=2, 3 tokens at once (a verification of N+1 tokens: no state after the first)",
        after_dynamic(keep=2),
        three,
        doable=(1,),
    )
    exact_cases(
        family,
        "N=1, 3 tokens at once (no state before the last token)",
        after_dynamic(keep=1),
        three,
        doable=(),
    )
    exact_cases(
        family,
        "N=1, 3 tokens: prefill 2 + 1 decoded (removals beyond the history)",
        after_dynamic(keep=1),
        (2, 1),
        doable=(1,),
    )
    exact_cases(
        family,
        "N=2, 4 tokens: prefill 2 + 2 decoded, no crop between",
        after_dynamic(keep=2),
        (2, 1, 1),
        doable=(1, 2),
        arguments=(2, 0, -1, -2, -3, -4, -5),
    )
    exact_cases(
        family,
        "N=2, 4 tokens: prefill 2 + 2 decoded, `crop(0)` after each forward (as `generate`)",
        after_dynamic(keep=2, between=_generate_step),
        (2, 1, 1),
        doable=(1,),
        arguments=(2, 0, -1, -2, -4, -5),
    )
    exact_cases(
        family,
        "recorded with `activate_past_recording()` (default N), 3 tokens at once",
        after_dynamic(keep=None),
        three,
        doable=(),
    )
    exact_cases(
        family,
        "never recorded, 3 tokens at once",
        after_dynamic(keep=None, record_past=False),
        three,
        doable=(),
    )
    exact_cases(
        family,
        "never recorded, conv states only, 3 tokens, 1 by 1 (`increase_count`)",
        after_dynamic(states="conv", keep=None, record_past=False),
        steps,
        doable=(),
    )
    exact_cases(
        family,
        "conv kernel 4 (longer than the 3 tokens), N=3",
        after_dynamic(keep=3, kernel=4),
        three,
        doable=(1, 2),
    )
    exact_cases(
        family, "never updated (a `moe` placeholder), 3 tokens", after_dynamic(states="none"), three, doable=(1, 2)
    )

    # Several recurrent states per layer
    two_states = linear(c.DynamicLayer, lambda: c.LinearAttentionLayer(number_of_states=2), keep=3)
    exact_cases(
        f"LinearAttentionLayer (number_of_states=2, conv kernel {KERNEL}), after a DynamicLayer",
        "N=3, 3 tokens at once",
        two_states,
        three,
        doable=(1, 2),
    )
    exact_cases(
        f"LinearAttentionLayer (number_of_states=2, conv kernel {KERNEL}), after a DynamicLayer",
        "N=2, 3 tokens, 1 by 1",
        linear(c.DynamicLayer, lambda: c.LinearAttentionLayer(number_of_states=2), keep=2),
        steps,
        doable=(1, 2),
    )

    # Rollbacks after an earlier crop, and after `reset`
    family = f"LinearAttentionLayer (conv kernel {KERNEL}), after a DynamicLayer: crop sequences"

    def crops_before(*arguments):
        def prepare(cache):
            for argument in arguments:
                cache.crop(argument)

        return prepare

    exact_cases(
        family,
        "2 tokens left by `crop(-1)` of 3 tokens at once, N=3 (a second rollback in a row)",
        after_dynamic(keep=3),
        three,
        doable=(),
        arguments=(0, -1, -2, -3),
        prepare=crops_before(-1),
        length=2,
    )
    exact_cases(
        family,
        "N=3, 3 tokens at once, then `crop(0)`",
        after_dynamic(keep=3),
        three,
        doable=(),
        arguments=(0, -1, -3),
        prepare=crops_before(0),
    )

    def reset_then(setup, old_chunks):
        def prepare(cache):
            # The cache held another sequence before: reset, then the audited sequence again
            cache.reset()
            start = 0
            for count in old_chunks:
                _append(cache, setup, start, count)
                start += count
            cache.reset()
            _append(cache, setup, 0, 3)

        return prepare

    setup = after_dynamic(keep=2)
    exact_cases(
        family,
        "3 tokens at once after `reset()` of a 5-token sequence (decoded 1 by 1), N=2",
        setup,
        three,
        doable=(1,),
        arguments=(0, -1, -2, -3),
        prepare=reset_then(setup, (1,) * 5),
    )

    # The linear attention layer first (`Cache.get_seq_length()` reads layer 0)
    exact_cases(
        f"LinearAttentionLayer (conv kernel {KERNEL}), before a DynamicLayer",
        "N=3, 3 tokens at once",
        linear(c.LinearAttentionLayer, c.DynamicLayer, keep=3),
        three,
        doable=(1, 2),
    )
    exact_cases(
        f"LinearAttentionLayer (conv kernel {KERNEL}), before a DynamicLayer",
        "N=2, 3 tokens at once (no state after the first)",
        linear(c.LinearAttentionLayer, c.DynamicLayer, keep=2),
        three,
        doable=(1,),
    )
    exact_cases(
        "Cache of LinearAttentionLayers only",
        "2 layers, N=2, 3 tokens, 1 by 1",
        linear(c.LinearAttentionLayer, c.LinearAttentionLayer, keep=2),
        steps,
        doable=(1, 2),
    )

    # Hybrid layers (linear attention and attention in one layer)
    hybrids = [
        ("LinearAttentionAndFullAttentionLayer", c.LinearAttentionAndFullAttentionLayer),
        (
            f"LinearAttentionAndSlidingWindowAttentionLayer (window {window})",
            lambda: c.LinearAttentionAndSlidingWindowAttentionLayer(window),
        ),
        (
            f"LinearAttentionAndStaticFullAttentionLayer (max_cache_len {max_len})",
            lambda: c.LinearAttentionAndStaticFullAttentionLayer(max_len),
        ),
        (
            f"LinearAttentionAndStaticSlidingWindowAttentionLayer (max_cache_len {window}, window {window})",
            lambda: c.LinearAttentionAndStaticSlidingWindowAttentionLayer(window, window),
        ),
    ]
    for family, factory in hybrids:
        exact_cases(
            family,
            "conv states only, N=1, 3 tokens at once",
            linear(factory, states="conv", keep=1),
            three,
            doable=(1, 2),
        )
        exact_cases(family, "N=3, 3 tokens at once", linear(factory, keep=3), three, doable=(1, 2))
        exact_cases(
            family, "N=2, 3 tokens at once (no state after the first)", linear(factory, keep=2), three, doable=(1,)
        )
    # A static sliding window longer than the window makes room for the tokens to remove when recording starts
    # (upstream step 17): partial crops are exact
    exact_cases(
        f"LinearAttentionAndStaticSlidingWindowAttentionLayer (max_cache_len {max_len}, window {window})",
        "N=3, 3 tokens at once",
        linear(lambda: c.LinearAttentionAndStaticSlidingWindowAttentionLayer(max_len, window), keep=3),
        three,
        doable=(1, 2),
    )

    shared_cases(add, layers, Setup, c, ocr, (llama, mistral, deepseek), refuse_all=ARGUMENTS)

    # Arguments: the integer-like values callers pass (5.25 adds no argument validator: other types raise a
    # `TypeError` as on stock, pinned by tests/test_crop_arguments.py)
    family = "Arguments (`DynamicCache`, 3 tokens)"
    dynamic = Setup(lambda: _filled_layers(c.DynamicCache(), 1))
    valid = [
        ("`crop(torch.tensor(-1))` (as `generate` passes it)", _crop(torch.tensor(-1))),
        ("`crop(torch.tensor(-1, dtype=torch.int32))`", _crop(torch.tensor(-1, dtype=torch.int32))),
        ("`crop(np.int64(-1))`", _crop(np.int64(-1))),
        ("`crop(tokens_to_remove=-1)`", _crop(tokens_to_remove=-1)),
    ]
    for argument, call in valid:
        all_cases.append(Case(family, "valid", argument, dynamic, three, call, 2))
    return all_cases


TABLE = Table(
    target="v5_25",
    arguments=ARGUMENTS,
    kept=kept,
    cases=cases,
    settle=settle,
    notes=(
        "On 5.25 (as on 5.24), `crop(tokens_to_remove)` removes the last `-tokens_to_remove` tokens: `crop(0)` removes "
        "nothing, a removal beyond the cached length empties the cache, and a positive value must raise. After every "
        "forward `generate` calls `crop(0)`; the references of layers that record their past get the same `crop(0)`. "
        "Linear attention layers are fed as 5.25's models feed them (Qwen3-Next, Mamba2): after "
        "`activate_past_recording(recurrent_states_to_keep=N)` a forward hands over the recurrent states after each of "
        "its last `min(N, tokens)` tokens, a decoded token with a previous state hands over its state alone, and a layer "
        "that does not record takes a decoded token's conv state in place with `increase_count`. The recurrent state "
        "`s` after `p` tokens is `100 * s + p`, so a restored state tells which token it belongs to. A crop whose states "
        "were handed over (and not dropped by a crop since) must be exact: refusing it is reported as INCONSISTENT "
        '("refused a crop it can undo exactly"); one that needs a state never handed over may be refused. Static '
        "layers' slots at or beyond their count are shown empty: 5.25's static `crop` only moves the count (no device "
        "sync), the next update overwrites them and the causal mask hides them. A crop must restore in place what "
        "compiled decoding holds by address (static keys and values, recurrent states): the right state at a new "
        "address is INCONSISTENT too. Quantized layers use an exact test "
        "quantizer (see the 5.24 section for the FP8 scale)."
    ),
)
