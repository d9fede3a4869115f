"""Property tests: random sequences of `update` and `crop` on real caches, checked against a plain token-list model.

Every token gets a unique id, and its key/value states encode that id, its layer and its position, so a stale token
left behind by a crop (or a token appended in the wrong place) shows up in the cached tensors. After every step the
cache must agree with the model: lengths, key/value (and indexer key) contents, `cumulative_length` and
`get_mask_sizes()`. Absolute crops (`crop(n)`, `n >= 0`) must emit exactly one `FutureWarning`, attributed to the
caller; negative crops and `tokens_to_remove=` must emit none.

These tests prove the fix: they fail on stock transformers 5.14 (`pytest --stock`).
"""

import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicIndexedLayer, DynamicLayer, DynamicSlidingWindowLayer


SLIDING_WINDOW = 4
NUM_HEADS = 2
QUERY_LENGTHS = (1, 3)

# Small enough for the whole file to run in a few seconds on a slow CPU, derandomized and database-free for CI
SETTINGS = settings(
    max_examples=100,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# How a crop argument is passed: `crop` accepts any integer-like value (the generation loop passes 0-d tensors)
ARGUMENT_KINDS = st.sampled_from(["int", "numpy", "tensor"])


def _as_kind(value, kind):
    if kind == "numpy":
        return np.int64(value)
    if kind == "tensor":
        return torch.tensor(value)
    return value


def _code(uid, layer_idx):
    return float(8 * uid + layer_idx)


def _states(uids, positions, layer_idx):
    """Key states `[1, NUM_HEADS, len(uids), 2]` holding `(code of the token, its position)` in the last dimension."""
    rows = [[_code(uid, layer_idx), float(position)] for uid, position in zip(uids, positions)]
    tensor = torch.tensor(rows, dtype=torch.float32).reshape(1, 1, len(uids), 2)
    return tensor.expand(1, NUM_HEADS, len(uids), 2).contiguous()


def _indexer_states(uids, positions, layer_idx):
    """Indexer key states `[1, len(uids), 2]`: `(code of the token + 0.5, its position)`."""
    rows = [[_code(uid, layer_idx) + 0.5, float(position)] for uid, position in zip(uids, positions)]
    return torch.tensor(rows, dtype=torch.float32).reshape(1, len(uids), 2)


def _kept_length(argument, length):
    """What the contract says a `length`-token cache keeps after `crop(argument)`."""
    if argument < 0:
        return max(length + argument, 0)
    return min(argument, length)


class CacheMachine(RuleBasedStateMachine):
    """Drives one cache (made by `make_cache`) and the model: `self.tokens`, the unique ids of the cached tokens."""

    def __init__(self):
        super().__init__()
        self.cache = None
        self.num_layers = 0
        self.tokens = []
        self.next_uid = 1

    def make_cache(self, num_layers):
        raise NotImplementedError

    def is_sliding(self, layer):
        return isinstance(layer, DynamicSlidingWindowLayer)

    def is_indexed(self, layer):
        return isinstance(layer, DynamicIndexedLayer)

    # Rules

    @rule(num_tokens=st.integers(1, 4))
    def update(self, num_tokens):
        uids = list(range(self.next_uid, self.next_uid + num_tokens))
        positions = list(range(len(self.tokens), len(self.tokens) + num_tokens))
        self.next_uid += num_tokens
        for layer_idx in range(self.num_layers):
            keys = _states(uids, positions, layer_idx)
            self.cache.update(keys, -keys, layer_idx=layer_idx)
            if self.is_indexed(self.cache.layers[layer_idx]):
                self.cache.update_indexer(_indexer_states(uids, positions, layer_idx), layer_idx=layer_idx)
        self.tokens.extend(uids)

    @rule(tokens_to_remove=st.integers(1, 4), kind=ARGUMENT_KINDS)
    def crop_negative(self, tokens_to_remove, kind):
        self.crop(-tokens_to_remove, _as_kind(-tokens_to_remove, kind), expect_warning=False)

    @rule(extra=st.integers(0, 3), kind=ARGUMENT_KINDS)
    def crop_everything(self, extra, kind):
        """`crop(-L)` (exact full rollback) and oversized negative crops `crop(-L - extra)`."""
        argument = -(len(self.tokens) + extra)
        if argument == 0:
            return  # `crop(0)` is the absolute form, drawn by `crop_absolute`
        self.crop(argument, _as_kind(argument, kind), expect_warning=False)

    @rule(target_length=st.integers(0, 6), kind=ARGUMENT_KINDS)
    def crop_absolute(self, target_length, kind):
        self.crop(target_length, _as_kind(target_length, kind), expect_warning=True)

    @rule(tokens_to_remove=st.integers(0, 4))
    def crop_tokens_to_remove(self, tokens_to_remove):
        # The keyword has its transformers 5.15 meaning: `tokens_to_remove=0` removes nothing
        argument = -tokens_to_remove if tokens_to_remove else None
        self.crop(argument, expect_warning=False, tokens_to_remove=-tokens_to_remove)

    def crop(self, argument, *args, expect_warning, **kwargs):
        """Crops the cache (with `*args, **kwargs`) and the model (with `argument`; `None` means no change)."""
        length = len(self.tokens)
        kept = length if argument is None else _kept_length(argument, length)
        expect_error = self.crop_is_refused(kept, length)
        before = self.snapshot()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if expect_error:
                with pytest.raises(ValueError, match="DynamicSlidingWindowLayer"):
                    self.cache.crop(*args, **kwargs)
            else:
                self.cache.crop(*args, **kwargs)
        future_warnings = [warning for warning in caught if issubclass(warning.category, FutureWarning)]
        if expect_error:
            # A refused crop changes nothing, in any layer
            self.assert_snapshot_equal(before, self.snapshot())
            return
        self.record_crop(kept, length)
        del self.tokens[kept:]
        # Contents first (the invariant runs again after this step), then the warnings
        self.cache_matches_model()
        assert len(future_warnings) == (1 if expect_warning else 0), [str(w.message) for w in future_warnings]
        if expect_warning:
            assert future_warnings[0].filename == __file__, future_warnings[0].filename
            assert "crop(-k)" in str(future_warnings[0].message)

    def crop_is_refused(self, kept, length):
        """A partial crop of a sliding-window layer that has already seen a full window must be refused."""
        has_full_window = any(self.is_sliding(layer) and length >= layer.sliding_window for layer in self.cache.layers)
        return has_full_window and 0 < kept < length

    def record_crop(self, kept, length):
        """Hook to count which situations were exercised."""

    # Invariants

    @invariant()
    def cache_matches_model(self):
        if self.cache is None:
            return
        length = len(self.tokens)
        assert self.cache.get_seq_length() == length
        for layer_idx in range(self.num_layers):
            for query_length in QUERY_LENGTHS:
                assert self.cache.get_mask_sizes(query_length, layer_idx) == self.expected_mask_sizes(
                    layer_idx, query_length
                )
            if layer_idx >= len(self.cache.layers):
                # `DynamicCache()` creates its layers on the first update
                assert length == 0
                continue
            layer = self.cache.layers[layer_idx]
            assert self.cache.get_seq_length(layer_idx) == length
            if not layer.is_initialized:
                assert length == 0
                continue
            stored = self.tokens
            if self.is_sliding(layer):
                assert layer.cumulative_length == length
                # A sliding-window layer stores the last `sliding_window - 1` tokens it has seen
                stored = self.tokens[-(layer.sliding_window - 1) :]
            positions = list(range(length - len(stored), length))
            expected_keys = _states(stored, positions, layer_idx)
            assert torch.equal(layer.keys, expected_keys), (layer_idx, layer.keys[0, 0].tolist(), stored)
            assert torch.equal(layer.values, -expected_keys), (layer_idx, layer.values[0, 0].tolist(), stored)
            if self.is_indexed(layer) and layer.is_indexer_initialized:
                assert layer.indexer_keys.shape[1] == length
                assert torch.equal(layer.indexer_keys, _indexer_states(stored, positions, layer_idx))

    def expected_mask_sizes(self, layer_idx, query_length):
        length = len(self.tokens)
        layer = self.cache.layers[layer_idx] if layer_idx < len(self.cache.layers) else None
        if layer is None or not self.is_sliding(layer):
            return length + query_length, 0
        window = layer.sliding_window
        kv_offset = max(length - window + 1, 0)
        if length >= window:
            return window - 1 + query_length, kv_offset
        return length + query_length, kv_offset

    # Helpers

    def snapshot(self):
        state = []
        for layer in self.cache.layers:
            tensors = [getattr(layer, name, None) for name in ("keys", "values", "indexer_keys")]
            state.append(
                ([t.clone() if t is not None else None for t in tensors], getattr(layer, "cumulative_length", None))
            )
        return state

    @staticmethod
    def assert_snapshot_equal(before, after):
        assert len(before) == len(after)
        for (tensors_before, length_before), (tensors_after, length_after) in zip(before, after):
            assert length_before == length_after
            for tensor_before, tensor_after in zip(tensors_before, tensors_after):
                assert (tensor_before is None) == (tensor_after is None)
                if tensor_before is not None:
                    assert torch.equal(tensor_before, tensor_after)


class DynamicCacheMachine(CacheMachine):
    @initialize(num_layers=st.integers(2, 3))
    def make_cache(self, num_layers):
        self.cache = DynamicCache()
        self.num_layers = num_layers


class SlidingWindowCacheMachine(CacheMachine):
    # Which situations of the sliding-window contract the random runs reached (checked after the run)
    seen = Counter()

    @initialize()
    def make_cache(self):
        self.cache = Cache(layers=[DynamicSlidingWindowLayer(sliding_window=SLIDING_WINDOW)])
        self.num_layers = 1

    def crop_is_refused(self, kept, length):
        refused = super().crop_is_refused(kept, length)
        if refused:
            self.seen["partial crop beyond the window refused"] += 1
        return refused

    def record_crop(self, kept, length):
        if length >= SLIDING_WINDOW and kept == 0:
            self.seen["full rollback beyond the window"] += 1
        elif length < SLIDING_WINDOW and 0 < kept < length:
            self.seen["partial crop below the window"] += 1
        elif length < SLIDING_WINDOW and kept == 0 < length:
            self.seen["full rollback below the window"] += 1


class IndexedCacheMachine(CacheMachine):
    @initialize()
    def make_cache(self):
        self.cache = Cache(layers=[DynamicIndexedLayer(), DynamicIndexedLayer()])
        self.num_layers = 2


class MixedCacheMachine(CacheMachine):
    """A dynamic, a sliding-window and an indexed layer: a crop the sliding layer refuses must change no layer."""

    seen = Counter()

    @initialize()
    def make_cache(self):
        layers = [DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=SLIDING_WINDOW), DynamicIndexedLayer()]
        self.cache = Cache(layers=layers)
        self.num_layers = 3

    def crop_is_refused(self, kept, length):
        refused = super().crop_is_refused(kept, length)
        if refused:
            self.seen["refused"] += 1
        return refused


def test_dynamic_cache_matches_token_model():
    run_state_machine_as_test(DynamicCacheMachine, settings=SETTINGS)


def test_sliding_window_cache_matches_token_model():
    SlidingWindowCacheMachine.seen.clear()
    run_state_machine_as_test(SlidingWindowCacheMachine, settings=SETTINGS)
    # The random runs went both below and beyond the window
    assert set(SlidingWindowCacheMachine.seen) == {
        "partial crop beyond the window refused",
        "full rollback beyond the window",
        "partial crop below the window",
        "full rollback below the window",
    }, SlidingWindowCacheMachine.seen


def test_indexed_cache_matches_token_model():
    run_state_machine_as_test(IndexedCacheMachine, settings=SETTINGS)


def test_mixed_cache_crops_atomically():
    MixedCacheMachine.seen.clear()
    run_state_machine_as_test(MixedCacheMachine, settings=SETTINGS)
    assert MixedCacheMachine.seen["refused"] > 0
