"""Random rollback schedules on tiny SSM and hybrid models (transformers 5.25 only, issue 41).

5.25 rolls linear attention layers back through a per-token history of the recurrent states:
`activate_past_recording(recurrent_states_to_keep=N)` makes the models hand the cache the states after the last `N`
tokens of each forward, and `crop(-k)` restores the one after the kept tokens. The contract (step 18), for the forwards
since the last `crop` (or since recording started): a forward of at most `N` tokens can be removed whole (the state from
before it is a rollback point), a longer one by `N - 1` tokens, and no further back; at most `N` tokens in all (see
`_window`). A removal beyond that window is refused before anything changes; removing every token is always possible
(it resets the cache).

Each schedule here is seeded and deterministic: a random prompt is prefilled without recording, recording starts with a
random `N`, then each round runs one to three forwards of random tokens (mostly `1..N` of them, sometimes `N + 1` or
`N + 2`) and ends with a crop of `0 <= k <= window` tokens, so that crops reach back across whole forwards. After every
crop, every layer's states must equal those of a fresh cache built by one forward over exactly the kept tokens (the
`_compare_caches` pattern of `test_generation_main_hybrid.py`); a `ValueError` from such a crop is a failure. Some
rounds first try a crop beyond the window: it must raise a `ValueError` and leave every state as it was. Some record
again with a new `N` (as the candidate generators do every round), some start with a full rollback and a new prompt
prefilled while recording.

Mamba, FalconMamba and Jamba (Mamba-1 mixers) write the cached recurrent state in place when a forward of several
tokens continues a cache: the state from before such a forward was lost, and a crop removing the whole forward was
refused although the contract allows it (step 18 now copies that state as the forward starts). A gated delta net hybrid
(Qwen3-Next) and Mamba2, which hand over new tensors, are controls. Every family runs with a dynamic cache and with a
`StaticCache`.

A `StaticSlidingWindowLayer` that made room for the drafts (step 17) runs random schedules too, at the layer level: a
crop of at most `N` tokens added since the last crop is exact (the next token sees exactly the kept tokens of its
window), any other is exact or refused before anything changes.

Also checked: without recording, the cache's update methods copy no state and keep none (the ops of stock 5.25); while
recording, they copy each state at most once per forward.
"""

import copy
import random

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import transformers

from .numerics import set_test_threads


pytestmark = pytest.mark.skipif(
    not transformers.__version__.startswith("5.25"), reason="recurrent-state history of transformers 5.25 only"
)

if transformers.__version__.startswith("5.25"):
    from transformers import DynamicCache, StaticCache
    from transformers.cache_utils import LinearAttentionCacheLayerMixin, StaticSlidingWindowLayer

    from .test_generation_main_hybrid import VOCAB_SIZE, _compare_caches, _fresh_cache, _main_model
    from .v5_25.utils.test_cache_utils import _next_token_window, _window_of


FAMILIES = ("mamba", "falcon_mamba", "jamba", "qwen3_next", "mamba2")
CACHE_KINDS = ("dynamic", "static")
SEEDS = range(50)
ROUNDS = 5
MAX_KEPT = 4  # the largest `recurrent_states_to_keep` drawn
MAX_PROMPT = 6
# A bound on the tokens a schedule holds: a prompt and every round's forwards (up to `N + 2` tokens), were none removed
MAX_CACHE_LEN = MAX_PROMPT + ROUNDS * 3 * (MAX_KEPT + 2)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    previous = set_test_threads()
    yield
    torch.set_num_threads(previous)


def _new_cache(model, cache_kind):
    if cache_kind == "static":
        return StaticCache(config=model.config, max_cache_len=MAX_CACHE_LEN)
    return DynamicCache(config=model.config)


def _forward(model, cache, tokens):
    with torch.no_grad():
        model(torch.tensor([tokens]), cache=cache, use_cache=True)


def _snapshot(cache):
    """Every tensor, counter and history length of every layer of `cache` (copies), to check that nothing changed."""
    snapshot = []
    for layer_idx, layer in enumerate(cache.layers):
        for name, value in sorted(vars(layer).items()):
            values = value.items() if isinstance(value, dict) else [(None, value)]
            for key, item in values:
                if isinstance(item, list):
                    item = len(item)
                elif isinstance(item, torch.Tensor):
                    item = item.clone()
                elif not isinstance(item, (int, bool, type(None))):
                    continue
                snapshot.append(((layer_idx, name, key), item))
    return snapshot


def _changes(before, after):
    """The entries of two `_snapshot`s that differ."""
    changed = [where for (where, _), (other, _) in zip(before, after) if where != other]
    for (where, old), (_, new) in zip(before, after):
        if isinstance(old, torch.Tensor):
            same = isinstance(new, torch.Tensor) and old.shape == new.shape and torch.equal(old, new)
        else:
            same = old == new
        if not same:
            changed.append(where)
    return changed if len(before) == len(after) else ["number of entries", *changed]


def _window(lengths, kept):
    """How many tokens a crop can remove after forwards of `lengths` tokens (since the last crop, or since recording
    started) with `kept` states recorded: a forward of `L <= kept` tokens hands over the states after each of them, so
    the state from before it is a rollback point too; a longer one the states after its last `kept` tokens only, so it
    can be rolled back by `kept - 1` tokens and no further. At most `kept` in all."""
    window = 0
    for length in reversed(lengths):
        window += min(length, kept)
        if length > kept:
            window -= 1
            break
    return min(window, kept)


def _random_tokens(rng, length):
    return [rng.randrange(3, VOCAB_SIZE) for _ in range(length)]


def _run_schedule(name, cache_kind, seed):
    """Runs one random schedule; returns `None` if every step was right, else what went wrong first."""
    rng = random.Random(f"{name}-{cache_kind}-{seed}")
    model = _main_model(name)
    cache = _new_cache(model, cache_kind)
    kept = rng.randint(1, MAX_KEPT)  # N, `recurrent_states_to_keep`
    tokens = _random_tokens(rng, rng.randint(1, MAX_PROMPT))
    _forward(model, cache, tokens)
    cache.activate_past_recording(recurrent_states_to_keep=kept)
    where = f"seed {seed}: N={kept}, prompt of {len(tokens)}"
    for round_idx in range(ROUNDS):
        where = f"{where}; round {round_idx}:"
        lengths = []
        if rng.random() < 0.2:
            # Recording again (the candidate generators do it every round) keeps the states recorded so far
            kept = rng.randint(1, MAX_KEPT)
            cache.activate_past_recording(recurrent_states_to_keep=kept)
            where = f"{where} N={kept},"
        if rng.random() < 0.1:
            # Removing every token (or more) starts a new sequence, prefilled while recording
            cache.crop(-len(tokens) - rng.randint(0, 2))
            if int(cache.get_seq_length()) != 0:
                return f"{where} a full rollback left {int(cache.get_seq_length())} token(s)"
            tokens = _random_tokens(rng, rng.randint(1, MAX_PROMPT))
            _forward(model, cache, tokens)
            lengths.append(len(tokens))
            where = f"{where} full rollback, prompt of {len(tokens)},"
        for _ in range(rng.choice((1, 1, 2, 3))):
            # Mostly at most N tokens (the verification forwards of assisted decoding), sometimes more
            length = rng.randint(1, kept) if rng.random() < 0.85 else rng.randint(kept + 1, kept + 2)
            tokens += _random_tokens(rng, length)
            _forward(model, cache, tokens[-length:])
            lengths.append(length)
        window = _window(lengths, kept)
        where = f"{where} forwards of {lengths} (window {window})"
        if window + 1 < len(tokens) and rng.random() < 0.3:
            beyond = rng.randint(window + 1, len(tokens) - 1)
            before = _snapshot(cache)
            try:
                cache.crop(-beyond)
            except ValueError:
                changed = _changes(before, _snapshot(cache))
                if changed:
                    return f"{where}: the refused crop(-{beyond}) changed {changed}"
            else:
                return f"{where}: crop(-{beyond}), beyond the window, was not refused"
            where = f"{where}, crop(-{beyond}) refused"
        removed = rng.randint(0, window)
        where = f"{where}, crop(-{removed})"
        try:
            cache.crop(-removed)
        except ValueError as error:
            return f"{where}: refused inside the window ({error})"
        del tokens[len(tokens) - removed :]
        if not tokens:
            # Every token removed: the next forward starts a new sequence
            if int(cache.get_seq_length()) != 0:
                return f"{where}: removing every token left {int(cache.get_seq_length())} token(s)"
            continue
        mismatches = _compare_caches(cache, _fresh_cache(model, torch.tensor([tokens])))
        if mismatches:
            return f"{where}: the cache differs from a fresh one over the kept tokens: {mismatches}"
    return None


@pytest.mark.parametrize("cache_kind", CACHE_KINDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_random_rollback_schedules_restore_the_kept_tokens(name, cache_kind):
    failures = [failure for seed in SEEDS if (failure := _run_schedule(name, cache_kind, seed)) is not None]
    assert not failures, f"{len(failures)} of {len(SEEDS)} schedules failed:\n" + "\n".join(failures)


@pytest.mark.parametrize("seed", range(40))
def test_random_rollback_schedules_of_a_static_sliding_window(seed):
    """A `StaticSlidingWindowLayer` (window 4) that made room for `N` tokens (5.25 step 17), through random forwards and
    crops: a crop of at most `N` tokens added since the last crop is exact (the next token sees exactly its window of
    kept tokens); any other is exact or refused before anything changes."""
    rng = random.Random(f"static-sliding-{seed}")
    layer = StaticSlidingWindowLayer(max_cache_len=64, sliding_window=4)
    length = rng.randint(1, 9)
    layer.update(*[torch.arange(1.0, length + 1, dtype=torch.float64).view(1, 1, -1, 1)] * 2)
    kept = rng.randint(1, MAX_KEPT)
    layer.activate_past_recording(recurrent_states_to_keep=kept)
    for _ in range(8):
        added = 0
        for _ in range(rng.choice((1, 1, 2))):
            count = rng.randint(1, kept)
            layer.update(*[torch.arange(length + 1.0, length + count + 1, dtype=torch.float64).view(1, 1, -1, 1)] * 2)
            length, added = length + count, added + count
        removed = rng.randint(0, min(kept, added)) if rng.random() < 0.8 else rng.randint(0, length)
        keys = layer.keys.clone()
        try:
            layer.crop(-removed)
        except ValueError:
            assert removed > min(kept, added), f"seed {seed}: refused crop(-{removed}) of {kept} recorded"
            assert layer.get_seq_length() == length and torch.equal(layer.keys, keys), "the refused crop changed it"
            continue
        length -= removed
        assert layer.get_seq_length() == length
        assert _next_token_window(copy.deepcopy(layer), length) == _window_of(length), (
            f"seed {seed}: wrong window after crop(-{removed})"
        )


class _CacheOps(TorchDispatchMode):
    """The aten ops that the update methods of a cache's linear attention layers dispatch, and how many of them copy a
    recurrent state (a new tensor of its shape, made from one of its shape: `clone` and the like)."""

    METHODS = ("update_conv_state", "update_recurrent_state", "increase_count")

    def __init__(self, cache):
        super().__init__()
        self.layers = [layer for layer in cache.layers if isinstance(layer, LinearAttentionCacheLayerMixin)]
        self.shape = self.layers[0].recurrent_states[0].shape
        self.inside = 0
        self.ops = set()
        self.state_copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.inside:
            self.ops.add(func.overloadpacket.__name__)
            new = isinstance(out, torch.Tensor) and not func._schema.is_mutable and not func.is_view
            if new and out.shape == self.shape and any(getattr(arg, "shape", None) == self.shape for arg in args):
                self.state_copies += 1
        return out

    def _counted(self, method):
        def counted(*args, **kwargs):
            self.inside += 1
            try:
                return method(*args, **kwargs)
            finally:
                self.inside -= 1

        return counted

    def __enter__(self):
        # On the instances, in front of the methods of their class
        for layer in self.layers:
            for method_name in self.METHODS:
                setattr(layer, method_name, self._counted(getattr(layer, method_name)))
        return super().__enter__()

    def __exit__(self, *exc_info):
        for layer in self.layers:
            for method_name in self.METHODS:
                del layer.__dict__[method_name]
        return super().__exit__(*exc_info)


@pytest.mark.parametrize("cache_kind", CACHE_KINDS)
def test_without_recording_the_cache_copies_no_state(cache_kind):
    """Mamba decode steps and a multi-token forward continuing the cache, without recording: the cache's update methods
    copy no recurrent state and keep none, and dispatch only the ops of stock 5.25 (the lengths' `add_`, the conv
    window's `cat` and `slice`, and the in-place `copy_` of the states; `pytest --stock` runs this test on stock)."""
    model = _main_model("mamba")
    cache = _new_cache(model, cache_kind)
    _forward(model, cache, [5, 6, 7, 8, 9])
    with _CacheOps(cache) as ops:
        for tokens in ([10], [11], [12, 13, 14]):
            _forward(model, cache, tokens)
    assert ops.state_copies == 0
    assert ops.ops == {"add_", "copy_", "cat", "slice"}
    for layer in ops.layers:
        assert all(state is None for state in getattr(layer, "recurrent_states_before_forward", {}).values())
        assert all(not history for history in getattr(layer, "recurrent_states_history", {}).values())


@pytest.mark.parametrize("cache_kind", CACHE_KINDS)
def test_recording_forward_copies_each_state_at_most_once(cache_kind):
    """While recording `N` states, a Mamba forward of at most `N` tokens makes one copy of each layer's state (the
    rollback point from before it, taken before the model writes it in place), a longer one none; the states the model
    hands over are kept as they are."""
    model = _main_model("mamba")
    cache = _new_cache(model, cache_kind)
    _forward(model, cache, [5, 6, 7, 8, 9])
    cache.activate_past_recording(recurrent_states_to_keep=3)
    for tokens, copies_per_layer in (([10], 1), ([11, 12, 13], 1), ([14, 15, 16, 17], 0)):
        with _CacheOps(cache) as ops:
            _forward(model, cache, tokens)
        assert ops.state_copies == copies_per_layer * len(ops.layers), f"a forward of {len(tokens)} token(s)"
        cache.crop(0)
