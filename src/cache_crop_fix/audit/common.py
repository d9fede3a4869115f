"""The machinery of the audit that both targets share: token-coded caches, what a model can read from them, and the
verdict of one `crop` case. The case tables (which layers, which calls, what the contract keeps) are per target:
`audit/v5_14.py` and `audit/v5_24.py`.

Each case fills a real cache with tokens whose states encode their position, crops it, and compares everything the
cache exposes (tensors, side tensors, conv / recurrent / compressor states, `cumulative_length`, `get_seq_length()`,
`get_mask_sizes()`) with a fresh cache of the same type that received only the tokens the contract says to keep. A crop
that succeeds is then followed by an append to both caches, which must return and hold the same states. A crop that
raises must leave every layer bit-identical.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import torch


KERNEL = 2  # conv kernel size of the linear attention layers (3-token caches can then roll back a token)
WINDOW = 4  # sliding window of the sliding layers
MAX_CACHE_LEN = 8  # of the static layers
RESIDUAL_LENGTH = 2  # of the quantized layers: 3 tokens cross the residual part into the quantized one
CORRECT, REFUSED, INCONSISTENT, CRASH = "correct", "raises clearly", "INCONSISTENT", "crash"
# Errors that are bugs rather than refusals, whatever their message says
_CRASH_TYPES = (AttributeError, IndexError, KeyError, ZeroDivisionError, AssertionError, UnboundLocalError)


# --------------------------------------------------------------------------------------------------------------------
# Token-coded states: the token at position `p` has code `p + 1` (0 marks an empty static slot)


def _code(position: int) -> float:
    return float(position + 1)


def _attention_states(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value states `[1, 1, count, 1]`: keys hold the codes, values their negation."""
    keys = torch.tensor([_code(p) for p in range(start, start + count)]).reshape(1, 1, count, 1)
    return keys, -keys


def _decode(tensor: torch.Tensor | None, axis: int) -> tuple | None:
    """The token positions stored along `axis` of a token-coded tensor (`_` for an empty slot), or `None`."""
    if tensor is None:
        return None
    if isinstance(tensor, (tuple, list)):  # quantized tensors of other backends: not decoded
        return ("<quantized>",)
    if tensor.numel() == 0:
        return ()
    rows = tensor.detach().movedim(axis, 0).reshape(tensor.shape[axis], -1) if tensor.dim() else tensor.reshape(1, 1)
    decoded = []
    for row in rows:
        value = float(row.abs().max()) if row.numel() else 0.0
        if value == 0:
            decoded.append("_")
        elif value == int(value):
            decoded.append(int(value) - 1)
        else:
            decoded.append(round(value - 1, 3))
    return tuple(decoded)


_classes_cache: SimpleNamespace | None = None


def _classes() -> SimpleNamespace:
    """The transformers classes the audit builds, imported on first use (model modules are patched when imported)."""
    global _classes_cache
    if _classes_cache is not None:
        return _classes_cache
    from transformers import cache_utils
    from transformers.models.deepseek_v4 import modeling_deepseek_v4
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config
    from transformers.models.llama.configuration_llama import LlamaConfig
    from transformers.models.minimax import modeling_minimax
    from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl
    from transformers.models.mistral.configuration_mistral import MistralConfig

    class IdentityQuantizedLayer(cache_utils.QuantizedLayer):
        """A `QuantizedLayer` whose "quantization" is exact, so that its crop can be checked token by token."""

        def _quantize(self, tensor, axis):
            return tensor.clone()

        def _dequantize(self, q_tensor):
            return q_tensor

    names = {name: getattr(cache_utils, name) for name in dir(cache_utils) if not name.startswith("_")}
    if hasattr(cache_utils, "Fp8QuantizedLayer"):  # new in 5.24

        class ExactFp8QuantizedLayer(cache_utils.Fp8QuantizedLayer):
            """
            An `Fp8QuantizedLayer` whose scale is 1/32 instead of being calibrated on its first update: FP8 then holds
            the audit's codes (1 to 14) exactly, and the scale does not depend on which tokens came first.
            """

            def _quantize(self, tensor, scale=None):
                return super()._quantize(tensor, scale=torch.tensor(1 / 32) if scale is None else scale)

        names["ExactFp8QuantizedLayer"] = ExactFp8QuantizedLayer
    names.update(
        IdentityQuantizedLayer=IdentityQuantizedLayer,
        DeepseekV4Config=DeepseekV4Config,
        DeepseekV4HCACache=modeling_deepseek_v4.DeepseekV4HCACache,
        DeepseekV4CSACache=modeling_deepseek_v4.DeepseekV4CSACache,
        LlamaConfig=LlamaConfig,
        MistralConfig=MistralConfig,
        MiniMaxCache=modeling_minimax.MiniMaxCache,
        MiniMaxM3VLSparseCacheLayer=modeling_minimax_m3_vl.MiniMaxM3VLSparseCacheLayer,
        MiniMaxM3VLSparseStaticCacheLayer=modeling_minimax_m3_vl.MiniMaxM3VLSparseStaticCacheLayer,
    )
    _classes_cache = SimpleNamespace(**names)
    return _classes_cache


# --------------------------------------------------------------------------------------------------------------------
# Feeding tokens to a cache, as the models do


@dataclass(frozen=True)
class Setup:
    """How to build and fill one cache.

    Args:
        make: builds the (empty) cache.
        linear: what the linear attention parts receive per update: `"conv"`, `"conv+recurrent"` or `"none"` (a
            placeholder layer that never receives states).
        record_past: call `activate_past_recording()` on the cache before filling it.
        kernel: conv kernel size of the linear attention parts.
        recurrent_states_to_keep: passed to `activate_past_recording` when set (5.25: how many per-token recurrent
            states the models hand over per forward); `None` calls it without arguments.
        per_token: feed the linear attention parts as 5.25's models do: the conv states of a single decoded token of a
            layer that does not record go through `increase_count` and an in-place update, and a forward hands over the
            recurrent states after each of its last `min(get_recurrent_states_to_keep(), tokens)` tokens (a list), or
            its final state alone (a decoded token with a previous state, or nothing to keep). State `s` of a layer is
            `100 * s` plus the number of tokens seen.
        between: called on the cache after every update but the last (e.g. `generate`'s `crop(0)` after a forward).
        hide_stale_static: slots of static layers at or beyond their count are shown empty (5.25's static `crop` only
            moves the count, as upstream documents: the next update overwrites them, and the causal mask hides them).
        keep_addresses: a crop must leave the tensors that compiled decoding holds by address where they are (the keys
            and values of static layers, the recurrent states of linear attention layers): restored in place.
    """

    make: Callable
    linear: str = "conv"
    record_past: bool = True
    kernel: int = KERNEL
    recurrent_states_to_keep: int | None = None
    per_token: bool = False
    between: Callable | None = None
    hide_stale_static: bool = False
    keep_addresses: bool = False


def _self_attention(cache):
    return getattr(cache, "self_attention_cache", cache)


def _build(setup: Setup, chunks: tuple[int, ...]):
    """A cache built by `setup` that received `sum(chunks)` tokens, in updates of `chunks[i]` tokens."""
    cache = setup.make()
    if setup.record_past:
        if setup.recurrent_states_to_keep is None:
            cache.activate_past_recording()
        else:
            cache.activate_past_recording(recurrent_states_to_keep=setup.recurrent_states_to_keep)
    start = 0
    for index, count in enumerate(chunks):
        _append(cache, setup, start, count)
        start += count
        if setup.between is not None and index < len(chunks) - 1:
            setup.between(cache)
    return cache


def _append(cache, setup: Setup, start: int, count: int) -> list:
    """Appends the tokens `start ... start + count - 1` to every layer; returns what the update methods returned."""
    c = _classes()
    outputs = []
    target = _self_attention(cache)
    for layer_idx, layer in enumerate(target.layers):
        keys, values = _attention_states(start, count)
        if isinstance(layer, c.CacheLayerMixin):
            if hasattr(layer, "store_compression_weights"):
                # DeepSeek-V4: shared-KV attention, and the compressor(s) fed with the same tokens
                returned = target.update(keys, keys, layer_idx)
                outputs.append(("keys", _decode(returned[0], -2)))
                outputs.extend(_feed_compressors(layer, start, count))
            else:
                returned = target.update(keys, values, layer_idx)
                outputs.append(("keys", _decode(_visible(layer, returned[0], -2, setup), -2)))
                outputs.append(("values", _decode(_visible(layer, returned[1], -2, setup), -2)))
            if hasattr(layer, "update_indexer"):
                indexer = target.update_indexer(keys[:, 0].clone(), layer_idx)
                indexer = _visible(layer, indexer, 1, setup, "indexer_cumulative_length")
                outputs.append(("indexer", _decode(indexer, 1)))
            if hasattr(layer, "update_index"):
                idx = _visible(layer, layer.update_index(keys.clone()), -2, setup, "idx_cumulative_length")
                outputs.append(("idx", _decode(idx, -2)))
        if isinstance(layer, c.LinearAttentionCacheLayerMixin) and setup.linear != "none" and setup.per_token:
            for state_idx in range(layer.number_of_states):
                outputs.extend(_feed_per_token(target, layer_idx, state_idx, setup, start, count))
        elif isinstance(layer, c.LinearAttentionCacheLayerMixin) and setup.linear != "none":
            for state_idx in range(layer.number_of_states):
                # Like Inkling: the conv input of the new tokens (2 channels), with the kernel size
                conv = torch.tensor([_code(p) for p in range(start, start + count)]).expand(1, 2, count).clone()
                returned = target.update_conv_state(
                    conv, layer_idx, state_idx=state_idx, conv_kernel_size=setup.kernel
                )
                outputs.append((f"conv[{state_idx}]", _window(returned, setup.kernel)))
                if setup.linear == "conv+recurrent":
                    # A recurrent state summarizes every token seen: here, their number
                    summary = float(start + count)
                    target.update_recurrent_state(torch.full((1, 2), summary), layer_idx, state_idx=state_idx)
    if hasattr(cache, "set_linear_cache"):  # MiniMaxCache: one linear attention layer after the attention ones
        summary = float(start + count)
        cache.set_linear_cache(len(target.layers), torch.full((1, 2), summary))
    return outputs


def _state_after(state_idx: int, tokens_seen: int) -> torch.Tensor:
    """The per-token recurrent state `state_idx` after `tokens_seen` tokens (5.25's protocol)."""
    return torch.full((1, 2), float(tokens_seen + 100 * state_idx))


def _feed_per_token(target, layer_idx: int, state_idx: int, setup: Setup, start: int, count: int) -> list:
    """Feeds state `state_idx` of a linear attention layer like 5.25's Qwen3-Next / Mamba2 do (`causal_conv1d_forward`,
    then the recurrent states of the last tokens)."""
    outputs = []
    # Read before the conv update, as the models do
    recurrent = target.get_recurrent_state(layer_idx, state_idx=state_idx)
    conv_state = target.get_conv_state(layer_idx, state_idx=state_idx)
    conv = torch.tensor([_code(p) for p in range(start, start + count)]).expand(1, 2, count).clone()
    if conv_state is not None and count == 1 and not target.is_recording_past(layer_idx):
        # Single-token decode: the fused kernel updates the conv state in place, the cache only counts the token
        target.increase_count(layer_idx, state_idx)
        conv_state.copy_(torch.cat([conv_state[..., 1:], conv], dim=-1))
        returned = conv_state
    else:
        returned = target.update_conv_state(conv, layer_idx, state_idx=state_idx, conv_kernel_size=setup.kernel)
    outputs.append((f"conv[{state_idx}]", _window(returned, setup.kernel)))
    if setup.linear == "conv+recurrent":
        if recurrent is not None and count == 1:
            states = _state_after(state_idx, start + 1)
        else:
            # Cannot be more than the number of tokens (`None`, 5.25's default, fails here as in the models)
            keep = min(target.get_recurrent_states_to_keep(layer_idx), count)
            if keep > 0:
                states = [_state_after(state_idx, start + count - keep + 1 + i) for i in range(keep)]
            else:
                states = _state_after(state_idx, start + count)
        target.update_recurrent_state(states, layer_idx, state_idx=state_idx)
    return outputs


def _feed_compressors(layer, start: int, count: int) -> list:
    """Feeds the DeepSeek-V4 compressor(s) of `layer` like the model does; the "compressed" entry of a window is the
    mean of its codes."""
    outputs = []
    for name in list(layer.buffer_kv):
        kv = torch.tensor([_code(p) for p in range(start, start + count)]).reshape(1, count, 1).expand(1, count, 4)
        chunk_kv, chunk_gate, first_position = layer.store_compression_weights(name, kv.clone(), -kv.clone())
        windows = chunk_kv.shape[1] // layer.compress_rate
        compressed = chunk_kv.reshape(1, windows, layer.compress_rate, 4).mean(dim=2)
        if hasattr(layer, "update_overlap_state") and windows > 0:
            chunk_kv = chunk_kv.reshape(1, windows, layer.compress_rate, 4)
            chunk_gate = chunk_gate.reshape(1, windows, layer.compress_rate, 4)
            prior_kv, _ = layer.update_overlap_state(name, chunk_kv, chunk_gate, head_dim=2)
            outputs.append((f"{name}.overlap_prior", _decode(prior_kv, 1)))
        returned = layer.update_compressor_states(name, compressed)
        outputs.append((f"{name}.window_start", first_position))
        outputs.append((f"{name}.compressed", _decode(returned, 1)))
    return outputs


def _window(conv_states: torch.Tensor | None, kernel: int) -> tuple | None:
    """The last `kernel` columns of conv states (zero-padded on the left): what the next conv step reads."""
    if conv_states is None:
        return None
    if conv_states.shape[-1] < kernel:
        conv_states = torch.nn.functional.pad(conv_states, (kernel - conv_states.shape[-1], 0))
    return _decode(conv_states[..., -kernel:], -1)


# --------------------------------------------------------------------------------------------------------------------
# What a cache exposes


def _observe(cache, setup: Setup) -> dict:
    """Everything a model can read from `cache`, as plain values (token positions for token-coded tensors)."""
    c = _classes()
    target = _self_attention(cache)
    seen = {}
    try:
        seen["get_seq_length()"] = int(cache.get_seq_length())
    except Exception as error:  # a cache of linear attention layers only has no length
        seen["get_seq_length()"] = type(error).__name__
    for layer_idx, layer in enumerate(target.layers):
        prefix = f"layer {layer_idx} " if len(target.layers) > 1 else ""
        if isinstance(layer, c.CacheLayerMixin):
            seen.update(_observe_attention(cache, layer, layer_idx, prefix, setup))
        if isinstance(layer, c.LinearAttentionCacheLayerMixin):
            seen.update(_observe_linear(layer, setup, prefix))
    if hasattr(cache, "cross_attention_cache"):
        seen["cross-attention keys"] = _decode(cache.cross_attention_cache.layers[0].keys, -2)
    if hasattr(cache, "linear_cache"):
        seen["linear_cache"] = [
            int(state.max()) if isinstance(state, torch.Tensor) else None for state in cache.linear_cache
        ]
    return seen


def _observe_attention(cache, layer, layer_idx: int, prefix: str, setup: Setup | None = None) -> dict:
    seen = {f"{prefix}get_seq_length()": int(layer.get_seq_length())}
    seen.update(_observe_attention_states(layer, prefix, setup))
    seen[f"{prefix}get_mask_sizes(1)"] = tuple(int(x) for x in cache.get_mask_sizes(1, layer_idx))
    seen[f"{prefix}get_mask_sizes(3)"] = tuple(int(x) for x in cache.get_mask_sizes(3, layer_idx))
    return seen


def _visible(layer, tensor, axis: int, setup: Setup | None, counter: str = "cumulative_length"):
    """`tensor` with the slots of a static layer at or beyond its `counter` emptied, when `setup.hide_stale_static`."""
    c = _classes()
    if (
        tensor is None
        or setup is None
        or not setup.hide_stale_static
        or not isinstance(layer, c.StaticLayer)
        or getattr(layer, counter, None) is None
    ):
        return tensor
    index = torch.arange(tensor.shape[axis]).reshape([-1] + [1] * (tensor.dim() - (axis % tensor.dim()) - 1))
    if hasattr(layer, "prefill_keys"):
        if layer.keys is None:  # never updated: zeros already
            return tensor
        # UnlimitedOcr's reference-sliding layer: its sliding part (`keys`), or the prefill part then the sliding part
        # (what `update` returns), each held up to its own count
        prefill_slots = tensor.shape[axis] - layer.keys.shape[-2]
        if prefill_slots not in (0, layer.prefill_keys.shape[-2]):
            return tensor  # the states of a prefill, not the buffers
        sliding = min(int(layer.cumulative_length), layer.keys.shape[-2])
        stale = (index < prefill_slots) & (index >= layer.prefill_cumulative_length)
        return tensor.masked_fill(stale | (index >= prefill_slots + sliding), 0)
    count = int(layer.get_seq_length()) if counter == "cumulative_length" else int(getattr(layer, counter))
    if hasattr(layer, "first_stored_token") and tensor.shape[axis] == layer.max_cache_len:
        # Slot `j` of a static sliding window that makes room for the drafts (5.25 step 17) holds token
        # `max(count - max_cache_len, 0) + j`: the ones before the window of the next token are never attended again (the
        # mask hides them), whatever they hold (a crop puts the removed tokens there)
        token = index + max(count - layer.max_cache_len, 0)
        return tensor.masked_fill((index >= max(count, 0)) | (token < count - layer.sliding_window + 1), 0)
    return tensor.masked_fill(index >= max(count, 0), 0)


def _observe_attention_states(layer, prefix: str, setup: Setup | None = None) -> dict:
    c = _classes()
    seen = {}
    if isinstance(layer, c.QuantizedLayer):
        # What the next `update` returns before the new tokens: dequantized part, then the residual one
        if layer.is_initialized:
            parts = [layer._dequantize(layer._quantized_keys)]
            if layer.keys.dim() == 4:
                parts.append(layer.keys)
            seen[f"{prefix}keys (dequantized + residual)"] = _decode(torch.cat(parts, dim=-2), -2)
        else:
            seen[f"{prefix}keys (dequantized + residual)"] = ()
        seen[f"{prefix}cumulative_length"] = layer.cumulative_length
        return seen
    keys = layer.keys if layer.is_initialized else None
    values = layer.values if layer.is_initialized else None
    if isinstance(layer, c.StaticLayer) and keys is None:
        # A static layer that was never updated holds the same as one whose slots are all empty
        keys = values = torch.zeros(1, 1, layer.max_cache_len, 1)
    if keys is None:
        keys = values = torch.zeros(1, 1, 0, 1)
    seen[f"{prefix}keys"] = _decode(_visible(layer, keys, -2, setup), -2)
    if not hasattr(layer, "store_compression_weights"):  # DeepSeek-V4 shares keys and values
        seen[f"{prefix}values"] = _decode(_visible(layer, values, -2, setup), -2)
    for name in ("cumulative_length", "cumulative_length_int", "indexer_cumulative_length", "idx_cumulative_length"):
        if hasattr(layer, name):
            value = getattr(layer, name)  # `None` before the first update (5.24's static indexer counter)
            seen[f"{prefix}{name}"] = 0 if value is None else int(value)
    if hasattr(layer, "indexer_keys"):
        indexer = layer.indexer_keys if layer.is_indexer_initialized else None
        if isinstance(layer, c.StaticLayer) and indexer is None:
            indexer = torch.zeros(1, layer.max_cache_len, 1)
        indexer = _visible(layer, indexer, 1, setup, "indexer_cumulative_length")
        seen[f"{prefix}indexer_keys"] = _decode(indexer, 1) if indexer is not None else ()
    if hasattr(layer, "idx_keys"):
        idx = layer.idx_keys
        if isinstance(layer, c.StaticLayer) and idx is None:
            idx = torch.zeros(1, 1, layer.max_cache_len, 1)
        idx = _visible(layer, idx, -2, setup, "idx_cumulative_length")
        seen[f"{prefix}idx_keys"] = _decode(idx, -2) if idx is not None else ()
    if hasattr(layer, "buffer_kv"):
        for name in layer.buffer_kv:
            for attribute in ("buffer_kv", "buffer_gate", "compressed_kv", "overlap_kv", "overlap_gate"):
                if hasattr(layer, attribute):
                    value = getattr(layer, attribute)[name]
                    seen[f"{prefix}{attribute}[{name}]"] = _decode(value, 1) if value is not None else ()
            seen[f"{prefix}entry_count[{name}]"] = layer.entry_count[name]
    return seen


def _observe_linear(layer, setup: Setup, prefix: str) -> dict:
    seen = {}
    if hasattr(layer, "cumulative_length_linear"):  # 5.25: linear attention layers count their tokens
        seen[f"{prefix}cumulative_length_linear"] = int(layer.cumulative_length_linear)
    for state_idx in range(layer.number_of_states):
        has_previous = bool(layer.has_previous_state[state_idx])
        seen[f"{prefix}has_previous_state[{state_idx}]"] = has_previous
        # Models only read the states of a layer that has previous state
        if has_previous:
            seen[f"{prefix}conv window[{state_idx}]"] = _window(layer.conv_states[state_idx], setup.kernel)
            if layer.is_recurrent_states_initialized[state_idx]:
                # The number of tokens it summarizes
                seen[f"{prefix}recurrent state[{state_idx}]"] = int(layer.recurrent_states[state_idx].max())
    return seen


def _addresses(cache) -> dict:
    """The data pointers of the tensors compiled decoding holds by address: static keys and values, recurrent states."""
    c = _classes()
    found = {}
    layers = _self_attention(cache).layers
    for idx, layer in enumerate(layers):
        prefix = f"layer {idx} " if len(layers) > 1 else ""
        if isinstance(layer, c.StaticLayer) and layer.is_initialized:
            found[f"{prefix}keys"] = layer.keys.data_ptr()
            found[f"{prefix}values"] = layer.values.data_ptr()
        if isinstance(layer, c.LinearAttentionCacheLayerMixin):
            for state_idx in range(layer.number_of_states):
                if layer.is_recurrent_states_initialized[state_idx]:
                    found[f"{prefix}recurrent state[{state_idx}]"] = layer.recurrent_states[state_idx].data_ptr()
    return found


def _snapshot(cache) -> dict:
    """A deep copy of the raw attributes of every layer (and of the cache's own tensors), to check atomicity."""
    layers = _self_attention(cache).layers
    objects = {f"layer {idx}" if len(layers) > 1 else "the layer": layer for idx, layer in enumerate(layers)}
    objects["the cache"] = cache
    if hasattr(cache, "cross_attention_cache"):
        objects["the cross-attention cache"] = cache.cross_attention_cache.layers[0]
    return {name: _copy(vars(obj)) for name, obj in objects.items()}


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items() if key != "layers"}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item) for item in value)
    return value


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and torch.equal(a, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


# --------------------------------------------------------------------------------------------------------------------
# Running one case


@dataclass(frozen=True)
class Case:
    """One row of the audit: a cache filled with `chunks`, cropped with `call` (a description and a function)."""

    family: str
    scenario: str
    argument: str
    setup: Setup
    chunks: tuple[int, ...]
    call: Callable
    kept: int | None  # tokens the contract keeps (`None`: the crop must raise)
    expect_error: type | None = None
    # Called on the filled cache before the audited `call` (e.g. an earlier crop); not checked for atomicity
    prepare: Callable | None = None
    # The crop can be done exactly (the states to restore were handed over): refusing it is wrong too
    exact: bool = False


@dataclass(frozen=True)
class Outcome:
    kind: str  # CORRECT, REFUSED, INCONSISTENT or CRASH
    detail: str = ""

    def __str__(self) -> str:
        if self.kind == CORRECT:
            return CORRECT
        if self.kind == REFUSED:
            return f"{REFUSED} ({self.detail})"
        return f"{self.kind}: {self.detail}"


def run_case(case: Case, append: int = 2, settle: Callable | None = None) -> Outcome:
    """The verdict on `case`: after a crop that succeeds, `append` more tokens go to the cropped cache and to its
    reference; `settle` is what generation does to a cache after every forward (applied to the reference first)."""
    try:
        cache = _build(case.setup, case.chunks)
    except Exception as error:  # the audit's own setup failed, or the release fails to take the tokens
        return Outcome(CRASH, f"setup failed: {_describe_error(error)}")
    if case.prepare is not None:
        try:
            case.prepare(cache)
        except Exception as error:
            return Outcome(CRASH, f"before the audited crop: {_describe_error(error)}")
    before = _snapshot(cache)
    addresses = _addresses(cache) if case.setup.keep_addresses else {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.call(cache)
    except Exception as error:
        changed = _changed_layers(before, _snapshot(cache))
        if changed:
            return Outcome(INCONSISTENT, f"raised {type(error).__name__} after changing {changed}")
        if _is_crash(error):
            return Outcome(CRASH, _describe_error(error))
        if case.expect_error is not None and not isinstance(error, case.expect_error):
            return Outcome(CRASH, f"expected {case.expect_error.__name__}, got {_describe_error(error)}")
        if case.exact:
            return Outcome(INCONSISTENT, f"refused a crop it can undo exactly: {_describe_error(error)}")
        return Outcome(REFUSED, type(error).__name__)
    if case.kept is None:
        return Outcome(INCONSISTENT, f"not refused, now {_summary(cache, case.setup)}")
    moved = [name for name, address in _addresses(cache).items() if addresses.get(name, address) != address]
    outcome = _compare_with_reference(case, cache, append, settle)
    if outcome.kind == CORRECT and moved:
        return Outcome(INCONSISTENT, f"right states, but {', '.join(moved)} moved (assigned, not restored in place)")
    return outcome


def _compare_with_reference(case: Case, cache, append: int, settle: Callable | None) -> Outcome:
    reference = _build(case.setup, _truncate(case.chunks, case.kept))
    if settle is not None:
        settle(reference, case.setup)
    differences = _differences(_observe(cache, case.setup), _observe(reference, case.setup))
    if differences:
        return Outcome(INCONSISTENT, differences)
    try:
        returned = _append(cache, case.setup, case.kept, append)
    except Exception as error:
        return Outcome(CRASH, f"next update raised {_describe_error(error)}")
    expected = _append(reference, case.setup, case.kept, append)
    differences = _differences(dict(returned), dict(expected)) or _differences(
        _observe(cache, case.setup), _observe(reference, case.setup)
    )
    if differences:
        return Outcome(INCONSISTENT, f"after the next update: {differences}")
    return Outcome(CORRECT)


def _truncate(chunks: tuple[int, ...], kept: int) -> tuple[int, ...]:
    """The same update pattern, stopped after `kept` tokens."""
    truncated, total = [], 0
    for count in chunks:
        if total >= kept:
            break
        truncated.append(min(count, kept - total))
        total += truncated[-1]
    return tuple(truncated)


def _differences(got: dict, expected: dict) -> str:
    parts = []
    for name in list(expected) + [name for name in got if name not in expected]:
        if not _same(got.get(name), expected.get(name)):
            parts.append(f"{name} {_show(got.get(name))}, expected {_show(expected.get(name))}")
    if len(parts) > 3:
        parts = parts[:3] + [f"{len(parts) - 3} more"]
    return "; ".join(parts)


def _show(value) -> str:
    if isinstance(value, tuple) and all(isinstance(x, (int, float, str)) for x in value):
        shown = ",".join(str(x) for x in value)
        return f"[{shown}]" if len(shown) <= 40 else f"[{shown[:37]}...]"
    return str(value)


def _summary(cache, setup: Setup) -> str:
    seen = _observe(cache, setup)
    return ", ".join(f"{name} {_show(value)}" for name, value in list(seen.items())[:2])


def _changed_layers(before: dict, after: dict) -> str:
    return ", ".join(name for name in before if not _same(before[name], after[name]))


def _is_crash(error: Exception) -> bool:
    if isinstance(error, _CRASH_TYPES):
        return True
    # A `TypeError` that does not come from the argument check (e.g. `None` reached an arithmetic operation)
    return isinstance(error, TypeError) and "crop" not in str(error)


def _describe_error(error: Exception) -> str:
    message = " ".join(str(error).split())
    if len(message) > 90:
        message = message[:87] + "..."
    return f"{type(error).__name__}: {message}".replace("|", "\\|")


# --------------------------------------------------------------------------------------------------------------------
# The cases


def _crop(*args, **kwargs) -> Callable:
    return lambda cache: cache.crop(*args, **kwargs)


@dataclass(frozen=True)
class Table:
    """One target's audit: its meaning of `crop`, and its cases (`cases(table)` builds them)."""

    target: str  # the target's name, e.g. "v5_24"
    arguments: tuple[int, ...]  # the crops every layer type goes through
    kept: Callable[
        [int, int], int | None
    ]  # (argument, cached tokens) -> tokens the contract keeps; `None`: must raise
    cases: Callable[[Table], list[Case]]
    append: int = 2  # tokens appended after a successful crop, to the cropped cache and to its reference
    settle: Callable | None = None  # what generation does to a cache after every forward (applied to references)
    notes: str = ""  # what the report says about this target's meaning of `crop` (markdown)

    def argument_cases(self, family, scenario, setup, chunks, arguments=None, refuse=()) -> list[Case]:
        """`crop(argument)` for each argument; `refuse` lists those the contract cannot honour exactly."""
        length = sum(chunks)
        return [
            Case(
                family,
                scenario,
                f"`crop({argument})`",
                setup,
                chunks,
                _crop(argument),
                None if argument in refuse else self.kept(argument, length),
            )
            for argument in (self.arguments if arguments is None else arguments)
        ]

    def run_case(self, case: Case) -> Outcome:
        return run_case(case, self.append, self.settle)


def _layers(*factories) -> Callable:
    c = _classes()

    def make():
        return c.Cache(layers=[factory() for factory in factories])

    return make


def _tiny_configs():
    c = _classes()
    common = {"vocab_size": 16, "hidden_size": 8, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 1}
    llama = c.LlamaConfig(num_hidden_layers=2, **common)
    mistral = c.MistralConfig(num_hidden_layers=2, sliding_window=WINDOW, **common)
    deepseek = c.DeepseekV4Config(
        num_hidden_layers=2,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
        sliding_window=MAX_CACHE_LEN,
    )
    return llama, mistral, deepseek


def _filled_layers(cache, num_layers: int):
    """A `DynamicCache` / `MtpCache` whose `num_layers` layers exist before the first update."""
    c = _classes()
    cache.layers = [c.DynamicLayer() for _ in range(num_layers)]
    cache.layer_class_to_replicate = None
    return cache


def _minimax_cache():
    """A `MiniMaxCache` with one attention layer (its lightning attention state is set after it by `_append`)."""
    c = _classes()
    return _filled_layers(c.MiniMaxCache(), 1)


def _encoder_decoder_cache():
    c = _classes()
    cache = c.EncoderDecoderCache(_filled_layers(c.DynamicCache(), 1), _filled_layers(c.DynamicCache(), 1))
    cross_keys, cross_values = _attention_states(100, 5)
    cache.cross_attention_cache.update(cross_keys, cross_values, 0)
    return cache


# --------------------------------------------------------------------------------------------------------------------
# Stock vs fixed, and the report


def shared_cases(add, layers, Setup, c, ocr, configs, refuse_all) -> None:  # noqa: N803 (a class, as in the targets)
    """The cases every target from 5.24 on audits the same way: the placeholder layer, the model-specific layers and
    caches, and whole caches. `add(family, scenario, setup, chunks, refuse=...)`, `layers(*factories)` and `Setup` are
    the target's own (its contract and its view of static layers); `refuse_all` are the arguments of its cases."""
    llama, mistral, deepseek = configs
    three, six = (3,), (1,) * 6
    window, max_len = WINDOW, MAX_CACHE_LEN
    add("DummyLayer (after a DynamicLayer)", "3 tokens", layers(c.DynamicLayer, c.DummyLayer), three)

    # Model-specific layers and caches
    add("MiniMaxM3VLSparseCacheLayer", "3 tokens", layers(c.MiniMaxM3VLSparseCacheLayer), three)
    add(
        f"MiniMaxM3VLSparseStaticCacheLayer (max_cache_len {max_len})",
        "3 tokens",
        layers(lambda: c.MiniMaxM3VLSparseStaticCacheLayer(max_len)),
        three,
    )
    add(
        "MiniMaxCache (attention + lightning attention)",
        "3 tokens",
        Setup(_minimax_cache, record_past=False),
        three,
        refuse=refuse_all,
    )
    add(
        "DeepseekV4HCACache (compress rate 4)",
        "3 tokens (all in the compressor buffer)",
        layers(lambda: c.DeepseekV4HCACache(deepseek)),
        three,
    )
    add(
        "DeepseekV4CSACache (compress rate 2)",
        "3 tokens: 1 compressed entry + 1 buffered",
        layers(lambda: c.DeepseekV4CSACache(deepseek)),
        three,
    )

    def reference_sliding(layer_class, **kwargs):
        def make():
            layer = layer_class(sliding_window=window, **kwargs)
            # The prefill length is declared, so that the fresh reference treats its tokens the same way
            layer.set_prefill_length(2)
            return layer

        return make

    add(
        f"UnlimitedOcrDynamicReferenceSlidingWindowLayer (window {window})",
        "3 tokens (2 prefill + 1 decoded)",
        layers(reference_sliding(ocr.UnlimitedOcrDynamicReferenceSlidingWindowLayer)),
        three,
    )
    add(
        f"UnlimitedOcrStaticReferenceSlidingWindowLayer (window {window})",
        "3 tokens (2 prefill + 1 decoded)",
        layers(reference_sliding(ocr.UnlimitedOcrStaticReferenceSlidingWindowLayer, max_cache_len=max_len)),
        three,
    )

    # Whole caches
    add("DynamicCache()", "2 layers, 3 tokens", Setup(lambda: _filled_layers(c.DynamicCache(), 2)), three)
    add(
        f"DynamicCache(config) with sliding layers (window {window})",
        "6 tokens, 1 by 1, past not recorded (beyond the window)",
        Setup(lambda: c.DynamicCache(config=mistral), record_past=False),
        six,
        refuse=(2, -1, -3),
    )
    add(
        f"StaticCache(config, max_cache_len={max_len})",
        "3 tokens",
        Setup(lambda: c.StaticCache(config=llama, max_cache_len=max_len)),
        three,
    )
    add(
        "EncoderDecoderCache (self-attention cropped, cross-attention kept)",
        "3 tokens",
        Setup(_encoder_decoder_cache),
        three,
    )
    add("MtpCache", "2 layers, 3 tokens", Setup(lambda: _filled_layers(c.MtpCache(), 2)), three)
    add("DFlashCache", "2 layers, 3 tokens", Setup(lambda: _filled_layers(c.DFlashCache(), 2)), three)
