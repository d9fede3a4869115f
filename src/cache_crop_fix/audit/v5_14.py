"""The audit's cases for the 5.14 backport (transformers 5.14.x), where `crop(max_length)` keeps `max_length` tokens and
a negative value removes that many (`crop(0)` empties the cache).
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
    _encoder_decoder_cache,
    _filled_layers,
    _layers,
    _minimax_cache,
    _tiny_configs,
)


# Slots of static layers at or beyond their count are shown empty: the fix only moves the count, without a host sync
# (the next update overwrites them, and the causal mask hides them), as on 5.24 and upstream
Setup = functools.partial(common.Setup, hide_stale_static=True)

ARGUMENTS = (2, 0, -1, -3, -5)


def kept(argument: int, length: int) -> int:
    """The tokens 5.14's `crop(max_length)` keeps: `max_length` of them, or all but `-max_length` when negative."""
    return max(length + argument, 0) if argument < 0 else min(argument, length)


def cases(table: Table) -> list[Case]:
    c = _classes()
    llama, mistral, deepseek = _tiny_configs()
    all_cases: list[Case] = []

    def add(family, scenario, setup, chunks, arguments=None, refuse=()):
        all_cases.extend(table.argument_cases(family, scenario, setup, chunks, arguments, refuse))

    three, steps, six = (3,), (1, 1, 1), (1,) * 6

    # Dynamic layers
    add("DynamicLayer", "3 tokens", Setup(_layers(c.DynamicLayer)), three)
    sliding = Setup(_layers(lambda: c.DynamicSlidingWindowLayer(sliding_window=WINDOW)))
    add(f"DynamicSlidingWindowLayer (window {WINDOW})", "3 tokens (below the window)", sliding, three)
    add(
        f"DynamicSlidingWindowLayer (window {WINDOW})",
        "4 tokens, 1 by 1 (window reached)",
        sliding,
        (1,) * 4,
        (2, 0, -1, -4, -6),
        refuse=(2, -1),
    )
    add(
        f"DynamicSlidingWindowLayer (window {WINDOW})",
        "6 tokens, 1 by 1 (beyond the window)",
        sliding,
        six,
        (2, 0, -1, -3, -6, -9),
        refuse=(2, -1, -3),
    )
    add("DynamicIndexedLayer", "3 tokens", Setup(_layers(c.DynamicIndexedLayer)), three)

    # Static layers
    static = Setup(_layers(lambda: c.StaticLayer(max_cache_len=MAX_CACHE_LEN)))
    add(f"StaticLayer (max_cache_len {MAX_CACHE_LEN})", "3 tokens", static, three)
    add(f"StaticLayer (max_cache_len {MAX_CACHE_LEN})", "3 tokens, 1 by 1", static, steps)
    static_sliding = Setup(
        _layers(lambda: c.StaticSlidingWindowLayer(max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW))
    )
    family = f"StaticSlidingWindowLayer (window {WINDOW})"
    add(family, "3 tokens (below the window)", static_sliding, three)
    add(family, "4 tokens, 1 by 1 (at the window)", static_sliding, (1,) * 4, (2, 0, -1, -4, -6))
    add(
        family, "6 tokens, 1 by 1 (beyond the window)", static_sliding, six, (2, 0, -1, -3, -6, -9), refuse=(2, -1, -3)
    )
    add(
        f"StaticIndexedLayer (max_cache_len {MAX_CACHE_LEN})",
        "3 tokens",
        Setup(_layers(lambda: c.StaticIndexedLayer(max_cache_len=MAX_CACHE_LEN))),
        three,
    )

    # Quantized layers
    quantized = Setup(_layers(lambda: c.IdentityQuantizedLayer(residual_length=RESIDUAL_LENGTH)))
    family = f"QuantizedLayer (exact test quantizer, residual_length {RESIDUAL_LENGTH})"
    add(family, "3 tokens at once (all quantized)", quantized, three)
    add(family, "3 tokens, 1 by 1 (quantized + residual)", quantized, steps)
    add(family, "5 tokens, 1 by 1", quantized, (1,) * 5, (2, 0, -1, -2, -3, -5))
    add(
        "QuantizedLayer (exact test quantizer, residual_length 8)",
        "3 tokens, 1 by 1 (1 quantized + 2 residual)",
        Setup(_layers(lambda: c.IdentityQuantizedLayer(residual_length=8))),
        steps,
    )

    # Linear attention layers, next to a full-attention layer (as in hybrid models)
    def linear_setup(linear="conv", record_past=True, kernel=KERNEL):
        return Setup(_layers(c.DynamicLayer, c.LinearAttentionLayer), linear, record_past, kernel)

    family = f"LinearAttentionLayer (conv kernel {KERNEL}), after a DynamicLayer"
    add(family, "conv states, past recorded, 3 tokens", linear_setup(), three, refuse=())
    add(family, "conv states, past recorded, 3 tokens, 1 by 1", linear_setup(), steps)
    add(family, "conv + recurrent states, past recorded", linear_setup("conv+recurrent"), three, refuse=(2, -1))
    add(family, "conv states, past not recorded", linear_setup(record_past=False), three, refuse=(2, -1))
    add(family, "conv kernel 4 (longer than the recorded past)", linear_setup(kernel=4), three, refuse=(2, -1))
    add(family, "never updated (a `moe` placeholder)", linear_setup("none"), three)
    linear_only = Setup(_layers(c.LinearAttentionLayer, c.LinearAttentionLayer))
    add(
        "Cache of LinearAttentionLayers only (no sequence length)",
        "conv states, past recorded, 3 tokens",
        linear_only,
        three,
        (2, 0, -1, -3),
        refuse=(2, -3),
    )

    # Hybrid layers (linear attention and attention in one layer)
    hybrids = [
        ("LinearAttentionAndFullAttentionLayer", lambda: c.LinearAttentionAndFullAttentionLayer()),
        (
            f"LinearAttentionAndSlidingWindowAttentionLayer (window {WINDOW})",
            lambda: c.LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW),
        ),
        (
            f"LinearAttentionAndStaticFullAttentionLayer (max_cache_len {MAX_CACHE_LEN})",
            lambda: c.LinearAttentionAndStaticFullAttentionLayer(max_cache_len=MAX_CACHE_LEN),
        ),
        (
            f"LinearAttentionAndStaticSlidingWindowAttentionLayer (window {WINDOW})",
            lambda: c.LinearAttentionAndStaticSlidingWindowAttentionLayer(
                max_cache_len=MAX_CACHE_LEN, sliding_window=WINDOW
            ),
        ),
    ]
    for family, factory in hybrids:
        add(family, "conv states, past recorded", Setup(_layers(factory)), three)
        add(family, "conv + recurrent states", Setup(_layers(factory), "conv+recurrent"), three, refuse=(2, -1))
        if "Sliding" in family:
            add(family, "6 tokens, 1 by 1 (beyond the window)", Setup(_layers(factory)), six, (-1, -6), refuse=(-1,))

    # Model-specific layers and caches
    add(
        "MiniMaxM3VLSparseCacheLayer",
        "3 tokens",
        Setup(_layers(c.MiniMaxM3VLSparseCacheLayer)),
        three,
    )
    add(
        f"MiniMaxM3VLSparseStaticCacheLayer (max_cache_len {MAX_CACHE_LEN})",
        "3 tokens",
        Setup(_layers(lambda: c.MiniMaxM3VLSparseStaticCacheLayer(max_cache_len=MAX_CACHE_LEN))),
        three,
    )
    add(
        "MiniMaxCache (attention + lightning attention)",
        "3 tokens",
        Setup(_minimax_cache, record_past=False),
        three,
        refuse=ARGUMENTS,
    )
    hca = Setup(_layers(lambda: c.DeepseekV4HCACache(deepseek)))
    family = "DeepseekV4HCACache (compress rate 4)"
    add(family, "3 tokens (all in the compressor buffer)", hca, three)
    add(family, "6 tokens: 1 compressed entry + 2 buffered", hca, (6,), (-1, -2, -3, -6, 0), refuse=(-3,))
    csa = Setup(_layers(lambda: c.DeepseekV4CSACache(deepseek)))
    family = "DeepseekV4CSACache (compress rate 2)"
    add(family, "3 tokens: 1 compressed entry + 1 buffered", csa, three)
    add(family, "5 tokens, 1 by 1", csa, (1,) * 5, (-1, -2, -5, 0), refuse=(-2,))

    # Whole caches
    add("DynamicCache()", "2 layers, 3 tokens", Setup(lambda: _filled_layers(c.DynamicCache(), 2)), three)
    add(
        f"DynamicCache(config) with sliding layers (window {WINDOW})",
        "6 tokens, 1 by 1 (beyond the window)",
        Setup(lambda: c.DynamicCache(config=mistral)),
        six,
        (-1, -6, 0),
        refuse=(-1,),
    )
    add(
        f"StaticCache(config, max_cache_len={MAX_CACHE_LEN})",
        "3 tokens",
        Setup(lambda: c.StaticCache(config=llama, max_cache_len=MAX_CACHE_LEN)),
        three,
    )
    add(
        "EncoderDecoderCache (self-attention cropped, cross-attention kept)",
        "3 tokens",
        Setup(_encoder_decoder_cache),
        three,
    )
    add("MtpCache", "2 layers, 3 tokens", Setup(lambda: _filled_layers(c.MtpCache(), 2)), three)
    add(
        "DynamicCache(config) of DeepSeek-V4 (HCA + CSA layers)",
        "3 tokens",
        Setup(lambda: c.DynamicCache(config=deepseek)),
        three,
    )

    # Arguments
    family = "Arguments (`DynamicCache`, 3 tokens)"
    dynamic = Setup(lambda: _filled_layers(c.DynamicCache(), 1))
    bad = [
        ("`crop(True)`", _crop(True)),
        ("`crop(-1.0)`", _crop(-1.0)),
        ('`crop("-1")`', _crop("-1")),
        ("`crop(None)`", _crop(None)),
        ("`crop(torch.tensor([-1, -2]))`", _crop(torch.tensor([-1, -2]))),
        ("`crop(torch.tensor([-1]))`", _crop(torch.tensor([-1]))),
        ("`crop(torch.tensor(True))`", _crop(torch.tensor(True))),
        ("`crop(-1, tokens_to_remove=-1)`", _crop(-1, tokens_to_remove=-1)),
    ]
    for argument, call in bad:
        all_cases.append(Case(family, "invalid", argument, dynamic, three, call, None, TypeError))
    valid = [
        ("`crop(torch.tensor(-1))` (as `generate` passes it)", _crop(torch.tensor(-1)), 2),
        ("`crop(np.int64(-1))`", _crop(np.int64(-1)), 2),
        ("`crop(tokens_to_remove=-1)`", _crop(tokens_to_remove=-1), 2),
        ("`crop(tokens_to_remove=0)` (5.15 meaning: nothing)", _crop(tokens_to_remove=0), 3),
        ("`crop(-0)`", _crop(-0), 0),
    ]
    for argument, call, kept in valid:
        all_cases.append(Case(family, "valid", argument, dynamic, three, call, kept))
    return all_cases


TABLE = Table(
    target="v5_14",
    arguments=ARGUMENTS,
    kept=kept,
    cases=cases,
    append=2,
    notes=(
        "On 5.14, `crop(max_length)` keeps the first `max_length` tokens and a negative value removes that many from "
        "the end: `crop(0)` empties the cache, and any removal beyond the cached length empties it too. Quantized "
        "layers use an exact test quantizer (the real `optimum-quanto` / `HQQ` backends are optional dependencies, "
        "tested in `tests/v5_14/utils/test_cache_utils.py` when installed)."
    ),
)
