"""A compiled decode step of a hybrid model compiles as many frames with the fix as on stock, on every target (issue 30).

torch.compile guards on the Python attributes the compiled forward reads: a host-side counter that a cache layer moves
in its update path makes dynamo recompile every decode step (after 8 recompiles, it runs eagerly). A tiny Qwen3-Next
(linear attention next to full attention) decodes 12 tokens with its forward compiled by a counting backend (no
inductor), with a static and a dynamic cache, recording the past or not; the frames are counted on stock (the fix
reverted in the same process) and with the fix.
"""

import warnings

import pytest
import torch

import cache_crop_fix
from tests.compat import CACHE_KWARG, TARGET
from tests.tiny_models import tiny_mistral_with_window, tiny_qwen3_next


DECODE_STEPS = 12
PROMPT_LENGTH = 5


def _compiled_frames(model, kind: str, record: bool) -> int:
    """Frames compiled over `DECODE_STEPS` decode steps (the prefill runs eagerly), with `crop(0)` after each step
    while recording, as assisted decoding does."""
    from torch._dynamo.testing import CompileCounter

    from transformers import DynamicCache, StaticCache

    torch._dynamo.reset()
    counter = CompileCounter()
    forward = torch.compile(model.forward, backend=counter)
    if kind == "static":
        cache = StaticCache(config=model.config, max_cache_len=PROMPT_LENGTH + DECODE_STEPS)
    else:
        cache = DynamicCache(config=model.config)
    if record:
        # 5.25 keeps `recurrent_states_to_keep` per-token states; the earlier lines take no argument
        cache.activate_past_recording(**({"recurrent_states_to_keep": 2} if TARGET.name == "v5_25" else {}))
    input_ids = torch.randint(0, 64, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logits = model(input_ids, use_cache=True, **{CACHE_KWARG: cache}).logits
        for position in range(PROMPT_LENGTH, PROMPT_LENGTH + DECODE_STEPS):
            next_token = logits[:, -1:].argmax(-1)
            cache_position = torch.tensor([position])
            logits = forward(next_token, use_cache=True, cache_position=cache_position, **{CACHE_KWARG: cache}).logits
            if record:
                cache.crop(0 if TARGET.name != "v5_14" else -0)
    return counter.frame_count


@pytest.mark.parametrize("record", [False, True], ids=["plain", "recording"])
@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_compiled_hybrid_decode_compiles_as_on_stock(kind, record):
    if record and TARGET.name == "v5_14" and kind == "static":
        pytest.skip("5.14 static caches cannot record their past (stock `crop` raises on them)")
    model = tiny_qwen3_next()
    cache_crop_fix.revert()
    try:
        stock = _compiled_frames(model, kind, record)
    finally:
        cache_crop_fix.apply()
    fixed = _compiled_frames(model, kind, record)
    assert fixed == stock, f"{fixed} frames with the fix, {stock} on stock"
    if kind == "static" and not record:
        # The production path: one graph for every decode step
        assert fixed == 1


def _sliding_window_frames(model, room: bool) -> int:
    """Frames compiled over 24 decode steps of a model with a window of 4 over a static cache that made room for 4
    tokens to remove (then stopped recording, as assisted decoding leaves the cache it returns), or not."""
    from torch._dynamo.testing import CompileCounter

    from transformers import StaticCache

    torch._dynamo.reset()
    counter = CompileCounter()
    forward = torch.compile(model.forward, backend=counter)
    cache = StaticCache(config=model.config, max_cache_len=64)
    if room:
        cache.activate_past_recording(recurrent_states_to_keep=4)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logits = model(torch.tensor([[5, 9, 2, 7, 1, 3]]), cache=cache).logits
        for layer in cache.layers:
            layer.record_past = False
        for position in range(6, 30):
            next_token = logits[:, -1:].argmax(-1)
            logits = forward(next_token, cache=cache, position_ids=torch.tensor([[position]])).logits
            cache.crop(0)
    return counter.frame_count


def test_compiled_decode_over_a_static_sliding_window_with_room_compiles_as_on_stock():
    """The room for the drafts (5.25 step 17) compiles no more frames than stock's window: one before the window is full,
    one after."""
    if TARGET.name != "v5_25":
        pytest.skip("static sliding windows make room for the drafts on 5.25 only")
    model = tiny_mistral_with_window()
    cache_crop_fix.revert()
    try:
        stock = _sliding_window_frames(model, room=False)
    finally:
        cache_crop_fix.apply()
    assert (_sliding_window_frames(model, room=True), stock) == (2, 2)
