"""Property tests for the history of linear attention layers (step 7): random sequences of forward passes and crops on
a cache made of a linear attention layer (conv and recurrent states) and an attention layer, checked against a
reference that recomputes the states from scratch over the cached tokens.

The linear attention layer is driven like Qwen3-Next's gated delta net drives it: a single token with cached states
writes the conv states in place (`causal_conv1d_update`), several tokens hand the conv window to `update_conv_state`,
and the recurrent state is handed over as a new tensor, advanced token by token (`r = r / 2 + id`, exact in float64,
and order-sensitive: a restore to the wrong point shows). After every step:

- the conv states end with the conv inputs of the last cached tokens, the recurrent states equal those recomputed from
  scratch bit for bit, and the attention layer holds exactly the cached tokens;
- a crop is accepted exactly when it is a full rollback, or when it removes the tokens of the last updates the history
  still holds (at most `history_length` of them, since the last full rollback); a refused crop changes nothing.

On transformers 5.24 (the `main` target) models hand every update to `update_conv_state` while the cache records its
past (they check `cache.is_recording_past`), with only the new tokens and `conv_kernel_size`: the machine does the same,
and never writes the conv states in place.

These tests prove the history step (step 7 of the backport, step 6 of `main`): they fail without it (`pytest --stock`,
or the step dropped from the target's steps).
"""

from collections import deque

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

import transformers
from cache_crop_fix.targets import target_for
from transformers.cache_utils import Cache, DynamicLayer, LinearAttentionLayer


IS_MAIN = target_for(transformers.__version__).name == "v5_24"


KERNEL = 3
CHANNELS = 2

SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _recurrent(uids, start=None):
    """The recurrent state after `uids`, one token at a time, like a decode loop (or from scratch)."""
    state = torch.zeros(1, CHANNELS, dtype=torch.float64) if start is None else start
    for uid in uids:
        state = state / 2 + uid
    return state


class HistoryMachine(RuleBasedStateMachine):
    @initialize(
        linear_first=st.booleans(),
        history_length=st.integers(1, 6),
    )
    def make_cache(self, linear_first, history_length):
        layers = [LinearAttentionLayer(), DynamicLayer()]
        self.linear_idx, self.attention_idx = (0, 1) if linear_first else (1, 0)
        self.cache = Cache(layers=layers if linear_first else layers[::-1])
        self.cache.activate_past_recording(history_length=history_length)
        self.uids = []  # the cached tokens
        self.update_sizes = deque(maxlen=history_length)  # what the history can undo
        self.next_uid = 1

    @property
    def linear(self):
        return self.cache.layers[self.linear_idx]

    @rule(num_tokens=st.integers(1, 3), in_place_conv=st.booleans())
    def forward(self, num_tokens, in_place_conv):
        uids = list(range(self.next_uid, self.next_uid + num_tokens))
        self.next_uid += num_tokens
        tokens = torch.tensor(uids, dtype=torch.float64).reshape(1, 1, -1).expand(1, CHANNELS, -1)
        for layer_idx in range(2):
            if layer_idx == self.attention_idx:
                keys = tokens[:, :1, :, None]
                self.cache.update(keys, keys.clone(), layer_idx)
                continue
            has_previous_state = self.cache.has_previous_state(layer_idx)
            if IS_MAIN:
                self.cache.update_conv_state(tokens.clone(), layer_idx=layer_idx, conv_kernel_size=KERNEL)
            elif has_previous_state and num_tokens == 1 and in_place_conv:
                conv_states = self.linear.conv_states[0]
                conv_states.copy_(torch.cat([conv_states, tokens], dim=-1)[..., -conv_states.shape[-1] :])
            else:
                context = torch.cat([self.linear.conv_states[0], tokens], dim=-1) if has_previous_state else tokens
                self.cache.update_conv_state(
                    torch.nn.functional.pad(context, (KERNEL - context.shape[-1], 0)), layer_idx=layer_idx
                )
            start = self.linear.recurrent_states[0] if has_previous_state else None
            self.cache.update_recurrent_state(_recurrent(uids, start), layer_idx=layer_idx)
        self.uids += uids
        self.update_sizes.append(num_tokens)

    @rule(data=st.data())
    def crop(self, data):
        if not self.uids:
            return
        tokens_to_remove = data.draw(st.integers(1, len(self.uids)), label="tokens_to_remove")
        suffix_sums, total = [], 0
        for size in reversed(self.update_sizes):
            total += size
            suffix_sums.append(total)
        is_full = tokens_to_remove == len(self.uids)
        if is_full or tokens_to_remove in suffix_sums:
            self.cache.crop(-tokens_to_remove)
            self.uids = self.uids[:-tokens_to_remove]
            if is_full:
                self.update_sizes.clear()
            else:
                for _ in range(suffix_sums.index(tokens_to_remove) + 1):
                    self.update_sizes.pop()
            return
        before = self.snapshot()
        try:
            self.cache.crop(-tokens_to_remove)
        except RuntimeError as error:
            assert "recurrent states" in str(error)
        else:
            raise AssertionError(f"crop(-{tokens_to_remove}) accepted with updates {list(self.update_sizes)}")
        after = self.snapshot()
        assert len(before) == len(after)
        for got, expected in zip(after, before):
            assert torch.equal(got, expected)

    def snapshot(self):
        states = [self.cache.layers[self.attention_idx].keys.clone()]
        if self.linear.is_recurrent_states_initialized[0]:
            states += [self.linear.conv_states[0].clone(), self.linear.recurrent_states[0].clone()]
        return states

    @invariant()
    def states_are_those_of_the_cached_tokens(self):
        if not self.uids:
            assert self.cache.get_seq_length() == 0
            assert not self.linear.has_previous_state[0]
            return
        attention = self.cache.layers[self.attention_idx]
        assert attention.keys[0, 0, :, 0].tolist() == self.uids
        assert self.linear.has_previous_state[0]
        last = ([0] * KERNEL + self.uids)[-KERNEL:]
        conv_states = self.linear.conv_states[0]
        # 5.24 keeps a recorded prefill shorter than the kernel as it is (the convolution pads it)
        conv_states = torch.nn.functional.pad(conv_states, (max(KERNEL - conv_states.shape[-1], 0), 0))
        assert conv_states[..., -KERNEL:].tolist() == [[last] * CHANNELS]
        assert torch.equal(self.linear.recurrent_states[0], _recurrent(self.uids))


def test_linear_attention_history_matches_recomputation():
    run_state_machine_as_test(HistoryMachine, settings=SETTINGS)
