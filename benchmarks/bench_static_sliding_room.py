"""Reports the memory that speculative decoding adds to static sliding-window caches, and checks that a compiled decode
step over such a cache compiles one frame, on transformers 5.25 (step 17 of the 5.25 target).

`activate_past_recording(recurrent_states_to_keep=N)`, called by assisted decoding before its first forward, makes
room in each `StaticSlidingWindowLayer` for the `N` tokens a round can remove: it stores `sliding_window + N - 1`
tokens instead of `sliding_window`. For the key/value shapes of real checkpoints (their sliding layers, window, key/value
heads and head size, bfloat16, batch 1) and the drafts of each candidate generator's default (`num_assistant_tokens`:
20, prompt lookup: 10, MTP: 1 to 3 layers), the table gives the sliding layers' memory before and after, measured on
`StaticCache` objects allocated with `early_initialization` (no model weights).

Then a tiny Mistral (window 4) decodes 24 tokens one at a time through `torch.compile` (backend counting frames) over a
static cache that recorded room for 4 tokens and stopped recording, as the cache assisted decoding returns, fixed and
stock (no room): the room must compile no more frames than stock does. (Called without `position_ids`, the model reads
the layer's host count, on which dynamo guards: both recompile as the count moves, up to dynamo's limit.)

    .venv-v5_25/bin/python benchmarks/bench_static_sliding_room.py    # about 1 minute
"""

from __future__ import annotations

import sys

import torch
from torch._dynamo.testing import CompileCounter

import cache_crop_fix
import transformers
from transformers import MistralConfig, MistralForCausalLM, StaticCache


# label, config class, arguments (the sliding layers' shapes of the checkpoint), max_cache_len
CHECKPOINTS = (
    (
        "Gemma-2 9B",
        "Gemma2Config",
        {"num_hidden_layers": 42, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096},
    ),
    (
        "Gemma-3 12B",
        "Gemma3TextConfig",
        {"num_hidden_layers": 48, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 1024},
    ),
    (
        "Mistral 7B v0.1",
        "MistralConfig",
        {"num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 4096},
    ),
    (
        "gpt-oss 20B",
        "GptOssConfig",
        {"num_hidden_layers": 24, "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128},
    ),
)
MAX_CACHE_LEN = 8192
DRAFTS = (1, 3, 10, 20)


def sliding_bytes(cache):
    return sum(
        layer.keys.nbytes + layer.values.nbytes
        for layer in cache.layers
        if isinstance(layer, transformers.cache_utils.StaticSlidingWindowLayer)
    )


def memory_table():
    rows = []
    for label, config_class, arguments in CHECKPOINTS:
        config = getattr(transformers, config_class)(
            hidden_size=64, intermediate_size=64, num_attention_heads=8, vocab_size=32, **arguments
        )
        base = None
        for drafts in (0, *DRAFTS):
            cache = StaticCache(config=config, max_cache_len=MAX_CACHE_LEN)
            cache.early_initialization(
                1, arguments["num_key_value_heads"], arguments["head_dim"], torch.bfloat16, "cpu"
            )
            if drafts:
                cache.activate_past_recording(recurrent_states_to_keep=drafts)
            size = sliding_bytes(cache)
            base = base or size
            rows.append((label, drafts, size, size / base - 1))
            del cache
    print("| checkpoint | tokens to remove (N) | sliding layers' K/V (MiB) | added |")
    print("|---|---|---|---|")
    for label, drafts, size, added in rows:
        print(f"| {label} | {drafts or 'no recording'} | {size / 2**20:.1f} | {added:+.2%} |")


def compiled_decode_frames():
    torch._dynamo.reset()
    torch.manual_seed(0)
    config = MistralConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=37,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_hidden_layers=2,
        sliding_window=4,
    )
    model = MistralForCausalLM(config).eval()
    cache = StaticCache(config=config, max_cache_len=64)
    cache.activate_past_recording(recurrent_states_to_keep=4)
    with torch.no_grad():
        model(torch.tensor([[5, 9, 2, 7, 1, 3]]), cache=cache)
        for layer in cache.layers:
            layer.record_past = False  # as assisted decoding leaves the cache it returns
        counter = CompileCounter()
        compiled = torch.compile(model, backend=counter, dynamic=False)
        token = torch.tensor([[4]])
        for _ in range(24):
            token = compiled(token, cache=cache).logits[:, -1:].argmax(-1)
    return counter.frame_count


def main():
    if not transformers.__version__.startswith("5.25"):
        sys.exit(f"needs transformers 5.25 (installed: {transformers.__version__})")
    cache_crop_fix.apply()
    memory_table()
    frames = compiled_decode_frames()
    cache_crop_fix.revert()
    stock_frames = compiled_decode_frames()
    print(
        f"\ncompiled decode of 24 tokens over a static cache: {frames} frame(s) with room for 4 tokens, {stock_frames} on stock"
    )
    sys.exit(0 if frames <= stock_frames else 1)


if __name__ == "__main__":
    main()
