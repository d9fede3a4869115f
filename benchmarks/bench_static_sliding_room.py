"""Reports the memory that speculative decoding adds to static sliding-window caches on transformers 5.25 (step 17 of
the 5.25 target).

`activate_past_recording(recurrent_states_to_keep=N)`, called by assisted decoding before its first forward, makes
room in each `StaticSlidingWindowLayer` for the `N` tokens a round can remove: it stores `sliding_window + N - 1`
tokens instead of `sliding_window`. For the key/value shapes of real checkpoints (their sliding layers, window, key/value
heads and head size, bfloat16, batch 1) and the drafts of each candidate generator's default (`num_assistant_tokens`:
20, prompt lookup: 10, MTP: 1 to 3 layers), the table gives the sliding layers' memory before and after, measured on
`StaticCache` objects allocated with `early_initialization` (no model weights).

(That the room compiles as many frames as stock's window is a test: `tests/test_compile.py`.)

    .venv-v5_25/bin/python benchmarks/bench_static_sliding_room.py    # about 20 seconds
"""

from __future__ import annotations

import sys

import torch

import cache_crop_fix
import transformers
from transformers import StaticCache


# label, config class, arguments (the sliding layers' shapes of the checkpoint)
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


def main():
    if not transformers.__version__.startswith("5.25"):
        sys.exit(f"needs transformers 5.25 (installed: {transformers.__version__})")
    cache_crop_fix.apply()
    memory_table()


if __name__ == "__main__":
    main()
