"""What the 5.25 fix keeps of upstream's `crop` on attention layers (these tests pass on stock 5.25.0 too, so they are
regression guards of the fix, not proofs; the proofs are in `tests/v5_25`): a positive value is refused before anything
changes, on every layer type, the indexer positions and keys of `DynamicIndexedLayer` follow the kept tokens, and a
recording sliding window that still holds every token it saw can keep any of them.
"""

import pytest
import torch

import transformers
from cache_crop_fix.targets import target_for


pytestmark = pytest.mark.skipif(
    target_for(transformers.__version__).name != "v5_25", reason="the 5.25 layer classes (indexed layers, recording)"
)


def _tokens(start, length):
    return torch.arange(start + 1, start + length + 1, dtype=torch.float64).view(1, 1, length, 1)


def _layer(kind):
    from transformers.cache_utils import (
        DynamicLayer,
        DynamicSlidingWindowLayer,
        StaticIndexedLayer,
        StaticLayer,
        StaticSlidingWindowLayer,
    )

    if kind == "quantized":
        pytest.importorskip("optimum.quanto")
        from transformers.cache_utils import QuantoQuantizedLayer
    if kind == "minimax_static":
        from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3VLSparseStaticCacheLayer

        layer = MiniMaxM3VLSparseStaticCacheLayer(max_cache_len=8)
        layer.update(_tokens(0, 3), _tokens(0, 3))
        layer.update_index(_tokens(0, 3))
        return layer
    if kind == "deepseek":
        from transformers import DeepseekV4Config
        from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4HCACache

        config = DeepseekV4Config(num_hidden_layers=1, layer_types=["heavily_compressed_attention"], sliding_window=8)
        layer = DeepseekV4HCACache(config)
        layer.update(_tokens(0, 3), _tokens(0, 3))
        return layer
    if kind == "dynamic_empty":
        return DynamicLayer()
    layer = {
        "dynamic": lambda: DynamicLayer(),
        "dynamic_sliding": lambda: DynamicSlidingWindowLayer(sliding_window=4),  # 3 tokens: not full
        "dynamic_sliding_full": lambda: DynamicSlidingWindowLayer(sliding_window=3),
        "static": lambda: StaticLayer(max_cache_len=8),
        "static_sliding": lambda: StaticSlidingWindowLayer(max_cache_len=8, sliding_window=8),
        "static_indexed": lambda: StaticIndexedLayer(max_cache_len=8),
        "quantized": lambda: QuantoQuantizedLayer(residual_length=2, q_group_size=16),
    }[kind]()
    if kind == "dynamic_sliding_full":
        layer.activate_past_recording()
    states = torch.ones(1, 1, 3, 64) if kind == "quantized" else _tokens(0, 3)
    layer.update(states, states)
    if kind == "static_indexed":
        layer.update_indexer(_tokens(0, 3).view(1, 3, 1))
    return layer


def _state(layer):
    return {
        name: value.clone() if isinstance(value, torch.Tensor) else value
        for name, value in vars(layer).items()
        if name
        in (
            "keys",
            "values",
            "cumulative_length",
            "cumulative_length_int",
            "_quantized_keys",
            "indexer_cumulative_length",
            "indexer_keys",
            "idx_cumulative_length",
        )
    }


@pytest.mark.parametrize(
    "kind, error",
    [
        ("dynamic", ValueError),
        ("dynamic_empty", ValueError),
        ("dynamic_sliding", ValueError),
        ("dynamic_sliding_full", RuntimeError),
        ("static", RuntimeError),
        ("static_sliding", RuntimeError),
        ("static_indexed", RuntimeError),
        ("quantized", ValueError),
        ("minimax_static", RuntimeError),
        ("deepseek", ValueError),
    ],
)
def test_positive_crop_is_refused_before_anything_changes(kind, error):
    layer = _layer(kind)
    before = _state(layer)
    with pytest.raises(error, match="positive|negative int"):
        layer.crop(1)
    after = _state(layer)
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert torch.equal(after[name], value) if isinstance(value, torch.Tensor) else after[name] == value, name


@pytest.mark.parametrize("removal", [-1, -5])
def test_dynamic_indexed_layer_crops_its_indexer_positions_and_keys(removal):
    from transformers.cache_utils import DynamicIndexedLayer

    layer = DynamicIndexedLayer()
    layer.update(_tokens(0, 3), _tokens(0, 3))
    layer.indexer_position_ids = torch.arange(3).view(1, 3)  # set by the model (Qwen4-Exp)
    layer.update_indexer(_tokens(0, 3).view(1, 3, 1))
    layer.crop(removal)
    kept = max(3 + removal, 0)
    assert layer.indexer_position_ids.tolist() == [list(range(kept))]
    assert layer.indexer_keys[0, :, 0].tolist() == [1.0, 2.0, 3.0][:kept]
    # One indexed token, removed
    layer = DynamicIndexedLayer()
    layer.update(_tokens(0, 1), _tokens(0, 1))
    layer.update_indexer(_tokens(0, 1).view(1, 1, 1))
    layer.crop(removal)
    assert layer.indexer_keys.shape[1] == 0
    # A layer whose model did not use the indexer yet (no positions, no index keys) crops its states only, and the
    # positions the model stored before running the indexer follow the kept tokens
    layer = DynamicIndexedLayer()
    layer.update(_tokens(0, 3), _tokens(0, 3))
    layer.crop(removal)
    assert (layer.get_seq_length(), layer.indexer_position_ids) == (kept, None)
    layer = DynamicIndexedLayer()
    layer.update(_tokens(0, 3), _tokens(0, 3))
    layer.indexer_position_ids = torch.arange(3).view(1, 3)
    layer.crop(removal)
    assert layer.indexer_position_ids.tolist() == [list(range(kept))]


def test_recording_sliding_layer_not_cropped_since_it_filled_can_keep_fewer_tokens_than_its_window():
    # It still holds every token it saw, so any removal keeps the right ones
    from transformers.cache_utils import DynamicSlidingWindowLayer

    layer = DynamicSlidingWindowLayer(sliding_window=4)
    layer.activate_past_recording()
    layer.update(_tokens(0, 6), _tokens(0, 6))
    layer.crop(-4)
    assert (layer.get_seq_length(), layer.keys[0, 0, :, 0].tolist()) == (2, [1.0, 2.0])


def test_unlimited_ocr_crop_0_of_a_window_that_wrapped_around_keeps_it():
    from transformers.models.unlimited_ocr.modeling_unlimited_ocr import UnlimitedOcrStaticReferenceSlidingWindowLayer

    layer = UnlimitedOcrStaticReferenceSlidingWindowLayer(max_cache_len=4, sliding_window=4)
    layer.set_prefill_length(2)
    layer.update(_tokens(0, 2), _tokens(0, 2))
    for position in range(2, 8):
        layer.update(_tokens(position, 1), _tokens(position, 1))
    keys = layer.keys.clone()
    layer.crop(0)
    assert layer.get_seq_length() == 8
    assert torch.equal(layer.keys, keys)
