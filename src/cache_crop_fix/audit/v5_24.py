"""The audit's cases for the `main` target (transformers 5.24.x), under 5.24's own meaning of `crop` (#47720):
`crop(tokens_to_remove)` removes the last `-tokens_to_remove` tokens (at most all of them), `crop(0)` removes none, and
a positive value must raise.
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
    _classes,
    _crop,
    _filled_layers,
    _layers,
    _tiny_configs,
    shared_cases,
)


# Slots of static layers at or beyond their count are shown empty: the 5.24 fix, like upstream, only moves the count
# (the next update overwrites them, and the causal mask hides them; zeroing them cost a host sync per layer)
Setup = functools.partial(common.Setup, hide_stale_static=True)

ARGUMENTS = (2, 0, -1, -3, -5)


def kept(argument: int, length: int) -> int | None:
    """The tokens 5.24's `crop(tokens_to_remove)` keeps, or `None` when it must raise (a positive value)."""
    if argument > 0:
        return None
    return max(length + argument, 0)


def settle(cache, setup: Setup) -> None:
    """
    What `generate` does after every forward on 5.24: `crop(0)`, which restricts the recorded past of the layers that
    record it back to what the next forward needs (the cropped cache's own `crop` does the same).
    """
    if setup.record_past:
        try:
            cache.crop(0)
        except Exception:  # a cache that refuses every crop: its reference stays as built
            pass


def cases(table: Table) -> list[Case]:
    c = _classes()
    from transformers.models.unlimited_ocr import modeling_unlimited_ocr as ocr

    llama, mistral, deepseek = _tiny_configs()
    all_cases: list[Case] = []

    def add(family, scenario, setup, chunks, arguments=None, refuse=()):
        all_cases.extend(table.argument_cases(family, scenario, setup, chunks, arguments, refuse))

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
        refuse=(2, -1, -3),
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
    # The real FP8 layer calibrates its frozen scale on its first update; the exact one (scale 1/32) also checks crops
    # into the first update, where a fresh reference would calibrate another scale (see the notes)
    add("Fp8QuantizedLayer", "3 tokens, 1 by 1 (scale calibrated on the first)", layers(c.Fp8QuantizedLayer), steps)
    add("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens at once", layers(c.ExactFp8QuantizedLayer), three)
    add("Fp8QuantizedLayer (exact scale 1/32)", "3 tokens, 1 by 1", layers(c.ExactFp8QuantizedLayer), steps)

    # Linear attention layers, after a full attention layer
    def linear(linear="conv", record_past=True, kernel=KERNEL):
        return layers(c.DynamicLayer, c.LinearAttentionLayer, linear=linear, record_past=record_past, kernel=kernel)

    family = f"LinearAttentionLayer (conv kernel {KERNEL}), after a DynamicLayer"
    add(family, "conv states, past recorded", linear(), three)
    add(family, "conv + recurrent states, past recorded", linear("conv+recurrent"), three, refuse=(2, -1))
    add(family, "conv states, past not recorded", linear(record_past=False), three, refuse=(2, -1))
    add(family, "conv kernel 4 (longer than the recorded past)", linear(kernel=4), three, refuse=(2, -1))
    add(family, "never updated (a `moe` placeholder)", linear("none"), three)

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
            f"LinearAttentionAndStaticSlidingWindowAttentionLayer (window {window})",
            lambda: c.LinearAttentionAndStaticSlidingWindowAttentionLayer(max_len, window),
        ),
    ]
    for family, factory in hybrids:
        add(family, "conv states, past recorded", layers(factory), three)
        add(family, "conv + recurrent states", layers(factory, linear="conv+recurrent"), three, refuse=(2, -1))

    shared_cases(add, layers, Setup, c, ocr, (llama, mistral, deepseek), refuse_all=ARGUMENTS)

    # Arguments
    family = "Arguments (`DynamicCache`, 3 tokens)"
    dynamic = Setup(lambda: _filled_layers(c.DynamicCache(), 1))
    for argument in (True, False, -1.0, "-1", None, torch.tensor([-1, -2]), torch.tensor([-1]), torch.tensor(True)):
        all_cases.append(
            Case(family, "invalid", f"`crop({argument!r})`", dynamic, three, _crop(argument), None, TypeError)
        )
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
    target="v5_24",
    arguments=ARGUMENTS,
    kept=kept,
    cases=cases,
    settle=settle,
    notes=(
        "On 5.24, `crop(tokens_to_remove)` removes the last `-tokens_to_remove` tokens (#47720): `crop(0)` removes "
        "nothing, a removal beyond the cached length empties the cache, and a positive value must raise. After every "
        "forward `generate` calls `crop(0)`, which restricts the past that layers record (for a later rollback) to what "
        "the next forward needs; the references of layers that record their past get the same `crop(0)`. Quantized "
        "layers use an exact test quantizer. `Fp8QuantizedLayer` freezes its scale at its first update, so a crop into "
        "the tokens of that update keeps the kept tokens bit-identical under the scale they were stored with, where a "
        "fresh cache would calibrate another scale on fewer tokens (and then saturate on larger ones): the real layer "
        "is audited with its first update of one token, and crops into the first update with an exact scale of 1/32."
    ),
)
