"""Property tests for hybrid (linear attention + attention) and quantized caches: random sequences of updates and
crops on real caches, checked against a plain model of what must hold.

The model is the list of cached tokens (each with a unique id). Linear attention layers are driven like a model drives
them: the conv input of each token is its id, and the recurrent state is read back from the cache (only when the layer
says it has previous state, as models do) and advanced by the ids of the new tokens. So a stale conv or recurrent state
left behind by a crop shows up in what the next update computes. After every step:

- attention parts hold exactly the states of the cached tokens, with the lengths and mask sizes of a fresh layer given
  those tokens;
- conv states end with the conv inputs of the last cached tokens; recurrent states summarize exactly the cached tokens;
- a crop that is accepted is exact, and one that is refused changed nothing, in any layer. A crop must be accepted
  when it is a full rollback, or when it removes tokens that every layer can give back: conv states recorded since the
  last crop, no recurrent state, no sliding window that moved on. It must be refused when a recurrent state or a
  sliding window cannot give the tokens back.

Quantized layers use an exact test quantizer, so their contents are checked token by token.

These tests prove the fix: they fail on stock transformers 5.14 (`pytest --stock`).
"""

import warnings
from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from transformers.cache_utils import (
    Cache,
    CacheLayerMixin,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    LinearAttentionAndFullAttentionLayer,
    LinearAttentionAndSlidingWindowAttentionLayer,
    LinearAttentionAndStaticFullAttentionLayer,
    LinearAttentionAndStaticSlidingWindowAttentionLayer,
    LinearAttentionCacheLayerMixin,
    LinearAttentionLayer,
    QuantizedLayer,
    StaticLayer,
    StaticSlidingWindowLayer,
)


WINDOW = 8
MAX_CACHE_LEN = 16
QUERY_LENGTHS = (1, 3)

SETTINGS = settings(
    max_examples=80,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# One run per layout and mode of the hybrid cache (more for conv-only states, which can be cropped partially)
HYBRID_SETTINGS = settings(SETTINGS, max_examples=10, stateful_step_count=20)
CONV_ONLY_SETTINGS = settings(SETTINGS, max_examples=25, stateful_step_count=20)


def _settings(base, stock_mode):
    # On stock transformers (`pytest --stock`) these tests fail: shrinking the failing example would only take time
    return settings(base, phases=[Phase.explicit, Phase.generate]) if stock_mode else base


class ExactQuantizedLayer(QuantizedLayer):
    """A `QuantizedLayer` whose quantization is exact (so its crop can be checked token by token)."""

    def _quantize(self, tensor, axis):
        return tensor.clone()

    def _dequantize(self, q_tensor):
        return q_tensor


def _kept_length(argument, length):
    if argument < 0:
        return max(length + argument, 0)
    return min(argument, length)


def _attention_states(uids):
    """Key states `[1, 1, len(uids), 1]` holding the token ids (values are their negation)."""
    return torch.tensor(uids, dtype=torch.float32).reshape(1, 1, len(uids), 1)


def _conv_inputs(uids, channels=2):
    return torch.tensor(uids, dtype=torch.float32).expand(1, channels, len(uids)).contiguous()


def _last_columns(conv_states, kernel):
    """The last `kernel` columns of conv states, zero-padded on the left: what the next conv step reads."""
    if conv_states.shape[-1] < kernel:
        conv_states = torch.nn.functional.pad(conv_states, (kernel - conv_states.shape[-1], 0))
    return conv_states[..., -kernel:]


def _shown(layer, states):
    """
    Key or value states of `layer` as attention sees them: a static layer's `crop` only moves its write position back
    (no device sync), and the slots at or beyond it, which keep stale states, are hidden by the causal mask until the
    next update overwrites them (sliding-window ones empty them).
    """
    if not isinstance(layer, StaticLayer) or isinstance(layer, StaticSlidingWindowLayer):
        return states
    index = torch.arange(states.shape[-2]).reshape(-1, 1)
    return states.masked_fill(index >= int(layer.get_seq_length()), 0)


def _is_attention(layer):
    return isinstance(layer, CacheLayerMixin)


def _is_linear(layer):
    return isinstance(layer, LinearAttentionCacheLayerMixin)


def _refuses_beyond_window(layer, length):
    """Whether a sliding-window layer that has seen `length` tokens can no longer give back any of them."""
    if isinstance(layer, StaticSlidingWindowLayer):
        return length > layer.max_cache_len
    if isinstance(layer, DynamicSlidingWindowLayer):
        return length >= layer.sliding_window
    return False


class CropMachine(RuleBasedStateMachine):
    """Drives one cache and the model (`self.tokens`: the ids of the cached tokens, in order)."""

    seen = Counter()  # which situations the random runs reached (checked after the run)

    def __init__(self):
        super().__init__()
        self.cache = None
        self.tokens = []
        self.next_uid = 1

    # Rules shared by every machine

    @rule(num_tokens=st.integers(1, 3))
    def update(self, num_tokens):
        self.append(num_tokens)

    @rule()
    def decode(self):
        self.append(1)

    @precondition(lambda self: len(self.tokens) < 4)
    @rule(num_tokens=st.integers(3, 5))
    def prefill(self, num_tokens):
        self.append(num_tokens)

    def append(self, num_tokens):
        if len(self.tokens) + num_tokens > MAX_CACHE_LEN:
            return  # the static layers are full
        uids = list(range(self.next_uid, self.next_uid + num_tokens))
        self.next_uid += num_tokens
        self.feed(uids)
        self.tokens.extend(uids)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def crop_rule(self, data):
        """`crop(-k)` (k small), a full rollback `crop(-L - extra)`, or an absolute `crop(target)`."""
        length = len(self.tokens)
        kind = data.draw(st.sampled_from(["negative", "negative", "everything", "absolute"]), label="kind")
        if kind == "negative":
            argument = -data.draw(st.sampled_from([1, 1, 2, 3]), label="tokens_to_remove")
        elif kind == "absolute":
            argument = data.draw(st.integers(0, length + 1), label="target_length")
        else:
            argument = -(length + data.draw(st.integers(0, 2), label="extra"))
        self.crop(argument)

    def crop(self, argument):
        length = len(self.tokens)
        kept = _kept_length(argument, length)
        must_refuse, may_refuse = self.refusal_reasons(kept, length)
        self.note_crop(kept, length)
        before = self.snapshot()
        error = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            try:
                self.cache.crop(argument)
            except (ValueError, RuntimeError) as caught:
                error = caught
        if error is not None:
            assert must_refuse or may_refuse, f"crop({argument}) of {length} tokens refused: {error}"
            assert any(type(layer).__name__ in str(error) for layer in self.cache.layers), str(error)
            self.assert_unchanged(before)
            self.seen[f"refused: {(must_refuse or may_refuse)[0]}"] += 1
            return
        assert not must_refuse, f"crop({argument}) of {length} tokens accepted despite: {must_refuse}"
        self.seen["full rollback" if kept == 0 < length else "partial crop" if kept < length else "no-op"] += 1
        self.crop_model(kept, length)
        del self.tokens[kept:]

    # To implement

    def feed(self, uids):
        raise NotImplementedError

    def refusal_reasons(self, kept, length):
        """(reasons why the crop must be refused, reasons why it may be refused): lists of strings."""
        return [], []

    def note_crop(self, kept, length):
        """Called before each crop, to count which situations the random runs reached."""

    def crop_model(self, kept, length):
        """Updates the machine's own bookkeeping for an accepted crop."""

    # Atomicity

    def snapshot(self):
        return [_copy(vars(layer)) for layer in self.cache.layers]

    def assert_unchanged(self, before):
        after = self.snapshot()
        for layer_idx, (state_before, state_after) in enumerate(zip(before, after)):
            _assert_same(state_after, state_before, f"layer {layer_idx}")


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item) for item in value)
    return value


def _assert_same(got, expected, path):
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.equal(got, expected), path
    elif isinstance(expected, dict):
        assert got.keys() == expected.keys(), path
        for key in expected:
            _assert_same(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), path
        for idx, (got_item, expected_item) in enumerate(zip(got, expected)):
            _assert_same(got_item, expected_item, f"{path}[{idx}]")
    else:
        assert got == expected, (path, got, expected)


# --------------------------------------------------------------------------------------------------------------------
# Hybrid caches

LAYOUTS = {
    "linear_after_dynamic": lambda states: [DynamicLayer(), LinearAttentionLayer(number_of_states=states)],
    "linear_after_sliding": lambda states: [
        DynamicSlidingWindowLayer(sliding_window=WINDOW),
        LinearAttentionLayer(number_of_states=states),
    ],
    "linear_after_static": lambda states: [StaticLayer(MAX_CACHE_LEN), LinearAttentionLayer(number_of_states=states)],
    "hybrid_full": lambda states: [LinearAttentionAndFullAttentionLayer(number_of_states=states), DynamicLayer()],
    "hybrid_sliding": lambda states: [
        LinearAttentionAndSlidingWindowAttentionLayer(sliding_window=WINDOW, number_of_states=states),
        LinearAttentionAndFullAttentionLayer(number_of_states=states),
    ],
    "hybrid_static": lambda states: [
        LinearAttentionAndStaticFullAttentionLayer(MAX_CACHE_LEN, number_of_states=states),
        StaticLayer(MAX_CACHE_LEN),
    ],
    "hybrid_static_sliding": lambda states: [
        LinearAttentionAndStaticSlidingWindowAttentionLayer(MAX_CACHE_LEN, WINDOW, number_of_states=states),
        LinearAttentionLayer(number_of_states=states),
    ],
}


class HybridCacheMachine(CropMachine):
    """A cache of attention, linear attention and hybrid layers. Linear attention states are conv-only or also
    recurrent, with or without recorded past, with a conv kernel of 2 or 3 and 1 or 2 states per layer."""

    # Set by the subclass of each test: a key of `LAYOUTS`, and one of `MODES`
    layout = None
    mode = None
    seen = Counter()

    @initialize(kernel=st.sampled_from([2, 2, 3]), number_of_states=st.sampled_from([1, 2]))
    def make_cache(self, kernel, number_of_states):
        recurrent, record_past = self.mode == "conv+recurrent", self.mode != "conv, past not recorded"
        self.cache = Cache(layers=LAYOUTS[self.layout](number_of_states))
        if record_past:
            self.cache.activate_past_recording()
        self.recurrent, self.record_past, self.kernel = recurrent, record_past, kernel
        # Conv columns recorded beyond the kernel, per linear layer: how many tokens they can give back
        self.recorded = [0] * len(self.cache.layers)

    def feed(self, uids):
        keys = _attention_states(uids)
        for layer_idx, layer in enumerate(self.cache.layers):
            if _is_attention(layer):
                self.cache.update(keys, -keys, layer_idx)
            if not _is_linear(layer):
                continue
            for state_idx in range(layer.number_of_states):
                has_previous = layer.has_previous_state[state_idx]
                conv_states = self.cache.update_conv_state(
                    _conv_inputs(uids), layer_idx, state_idx=state_idx, conv_kernel_size=self.kernel
                )
                # The conv step reads the states of the previous tokens, then the new ones
                expected = _conv_inputs(self.tokens + uids) if has_previous else _conv_inputs(uids)
                assert torch.equal(_last_columns(conv_states, self.kernel), _last_columns(expected, self.kernel))
                if self.recurrent:
                    previous = layer.recurrent_states[state_idx] if has_previous else torch.zeros(1, 2)
                    self.cache.update_recurrent_state(previous + sum(uids), layer_idx, state_idx=state_idx)
            if has_previous:
                self.recorded[layer_idx] += len(uids)
            else:
                # A prefill records its whole input (not padded to the kernel)
                self.recorded[layer_idx] = len(uids) - self.kernel

    def refusal_reasons(self, kept, length):
        must, may = [], []
        if not 0 < kept < length:
            return must, may
        removed = length - kept
        for layer_idx, layer in enumerate(self.cache.layers):
            if _is_attention(layer) and _refuses_beyond_window(layer, length):
                must.append("beyond the sliding window")
            if _is_linear(layer) and any(layer.is_conv_states_initialized.values()):
                if self.recurrent:
                    must.append("recurrent states")
                elif not self.record_past:
                    must.append("past not recorded")
                elif self.recorded[layer_idx] < removed:
                    may.append("not enough recorded conv states")
        return must, may

    def crop_model(self, kept, length):
        # A partial crop keeps the kernel's worth of conv states; a full rollback makes the next update a prefill
        if kept < length:
            self.recorded = [0] * len(self.cache.layers)

    @invariant()
    def cache_matches_model(self):
        if self.cache is None:
            return
        length = len(self.tokens)
        assert self.cache.get_seq_length() == length
        reference = Cache(layers=LAYOUTS[self.layout](1))
        if self.tokens:
            keys = _attention_states(self.tokens)
            for layer_idx, layer in enumerate(reference.layers):
                if _is_attention(layer):
                    reference.update(keys, -keys, layer_idx)
        for layer_idx, (layer, reference_layer) in enumerate(zip(self.cache.layers, reference.layers)):
            if _is_attention(layer):
                assert int(layer.get_seq_length()) == length, layer_idx
                for query_length in QUERY_LENGTHS:
                    assert layer.get_mask_sizes(query_length) == reference_layer.get_mask_sizes(query_length)
                if self.tokens:
                    keys, values = _shown(layer, layer.keys), _shown(layer, layer.values)
                    assert torch.equal(keys, reference_layer.keys), (layer_idx, keys.flatten().tolist())
                    assert torch.equal(values, reference_layer.values), layer_idx
                elif isinstance(layer, StaticLayer) and layer.is_initialized:
                    assert not _shown(layer, layer.keys).any() and not _shown(layer, layer.values).any(), layer_idx
            if _is_linear(layer):
                for state_idx in range(layer.number_of_states):
                    assert layer.has_previous_state[state_idx] == (length > 0), layer_idx
                    if not length:
                        continue
                    window = _last_columns(layer.conv_states[state_idx], self.kernel)
                    assert torch.equal(window, _last_columns(_conv_inputs(self.tokens), self.kernel)), layer_idx
                    if self.recurrent:
                        assert layer.recurrent_states[state_idx].max().item() == sum(self.tokens), layer_idx


# --------------------------------------------------------------------------------------------------------------------
# Quantized caches


class QuantizedCacheMachine(CropMachine):
    """Quantized layers (exact test quantizer) with a small residual part, next to a dynamic layer."""

    seen = Counter()

    @initialize(residual_length=st.integers(1, 4), num_quantized=st.integers(1, 2))
    def make_cache(self, residual_length, num_quantized):
        layers = [ExactQuantizedLayer(residual_length=residual_length) for _ in range(num_quantized)]
        self.cache = Cache(layers=layers + [DynamicLayer()])

    def feed(self, uids):
        keys = _attention_states(uids)
        expected = _attention_states(self.tokens + uids)
        for layer_idx in range(len(self.cache.layers)):
            returned_keys, returned_values = self.cache.update(keys, -keys, layer_idx)
            # What the attention computes with: every cached token, then the new ones
            assert torch.equal(returned_keys, expected), (layer_idx, returned_keys.flatten().tolist())
            assert torch.equal(returned_values, -expected), layer_idx

    def note_crop(self, kept, length):
        layer = self.cache.layers[0]
        if not (layer.is_initialized and 0 < kept < length):
            return
        quantized_length = layer._quantized_keys.shape[-2]
        self.seen["crop into the quantized part" if kept < quantized_length else "crop of the residual part"] += 1

    @invariant()
    def cache_matches_model(self):
        if self.cache is None:
            return
        length = len(self.tokens)
        assert self.cache.get_seq_length() == length
        for layer_idx, layer in enumerate(self.cache.layers):
            assert layer.get_seq_length() == length
            assert layer.get_mask_sizes(1) == (length + 1, 0)
            if not isinstance(layer, QuantizedLayer):
                continue
            assert layer.cumulative_length == length
            if not layer.is_initialized:
                assert length == 0
                continue
            stored = [layer._dequantize(layer._quantized_keys)] + ([layer.keys] if layer.keys.dim() == 4 else [])
            stored = torch.cat(stored, dim=-2)
            assert torch.equal(stored, _attention_states(self.tokens)), (layer_idx, stored.flatten().tolist())


@pytest.fixture(autouse=True)
def _single_thread():
    # Tiny tensors: intra-op threads only add synchronisation overhead
    num_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(num_threads)


# What the random runs must reach, per mode of the linear attention states
MODES = {
    "conv": ["partial crop", "full rollback", "refused: not enough recorded conv states"],
    "conv+recurrent": ["full rollback", "refused: recurrent states"],
    "conv, past not recorded": ["full rollback", "refused: past not recorded"],
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_hybrid_cache_matches_token_model(layout, mode, stock_mode):
    attributes = {"layout": layout, "mode": mode, "seen": Counter()}
    machine = type(f"HybridCacheMachine_{layout}", (HybridCacheMachine,), attributes)
    base = CONV_ONLY_SETTINGS if mode == "conv" else HYBRID_SETTINGS
    run_state_machine_as_test(machine, settings=_settings(base, stock_mode))
    situations = MODES[mode]
    if "sliding" in layout:
        # Most runs soon go beyond the window, where only full rollbacks are possible
        situations = [situation for situation in situations if situation != "partial crop"]
        situations.append("refused: beyond the sliding window")
    for situation in situations:
        assert machine.seen[situation] > 0, (situation, machine.seen)


def test_quantized_cache_matches_token_model(stock_mode):
    QuantizedCacheMachine.seen.clear()
    run_state_machine_as_test(QuantizedCacheMachine, settings=_settings(SETTINGS, stock_mode))
    seen = QuantizedCacheMachine.seen
    for situation in ("partial crop", "full rollback", "crop into the quantized part", "crop of the residual part"):
        assert seen[situation] > 0, (situation, seen)
