# Our version of the methods of `transformers/generation/candidate_generator.py` that roll back the assistant cache
# (5.14.x), step 7: the assistant cache records its past from its first token (with a history of its linear attention
# states), and how it is rolled back is decided once per generation: exactly, or fully (re-encoding) only when it must.
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.generation.candidate_generator import (
        AssistedCandidateGeneratorDifferentTokenizers,
        _prepare_attention_mask,
        _prepare_position_ids,
        _prepare_token_type_ids,
    )


class AssistedCandidateGenerator:
    def _update_past_and_masks(
        self, input_ids: torch.LongTensor, remove_from_pkv: int = 0, num_added_tokens: int = 1
    ) -> bool:
        """Update past key values and attention masks for subsequent generation rounds."""
        if (
            self.assistant_kwargs.get("past_key_values", None) is None
            and self.generation_config.use_cache is not False
        ):
            # First round: prepare the assistant cache here, so that it records its past from the first token
            self._prepare_assistant_cache(input_ids)
        has_past_key_values = self.assistant_kwargs.get("past_key_values", None) is not None
        if has_past_key_values:
            past_key_values = self.assistant_kwargs["past_key_values"]
            # Decided once, when the first forward pass of the assistant has set up every layer
            if getattr(self, "_assistant_rollback", None) is None and past_key_values.get_seq_length() > 0:
                self._assistant_rollback = self._get_assistant_rollback(past_key_values)
            # The assistant cache must hold every token but the last `num_added_tokens` (and `remove_from_pkv`) of the
            # sequence minus its newest token, which the assistant has not processed yet. A linear attention history
            # restores the states between two forward passes of the assistant: keep every token it processed.
            if getattr(self, "_assistant_rollback", None) == "history":
                num_added_tokens = 0
                self._set_assistant_history_length(past_key_values)
            new_cache_size = max(input_ids.shape[-1] - 1 - remove_from_pkv - num_added_tokens, 0)
            tokens_to_remove = past_key_values.get_seq_length() - new_cache_size
            # Only crop when there is something to remove: `crop(-0)` would empty the cache
            if tokens_to_remove > 0:
                if getattr(self, "_assistant_rollback", None) == "full":
                    tokens_to_remove = past_key_values.get_seq_length()
                past_key_values.crop(-tokens_to_remove)
            self.assistant_kwargs = _prepare_attention_mask(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_position_ids(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[-1])

            # This unsets `dynamic_full`, needed to initialize a new cache for the assistant. After the first forward
            # pass on each generation, we reuse the cache instead.
            self.generation_config.cache_implementation = None

        return has_past_key_values

    def _prepare_assistant_cache(self, input_ids: torch.LongTensor) -> None:
        """
        Prepares the cache the assistant would get in its first `generate` call (`dynamic_full`), and makes it record
        its past, with a history of the linear attention states long enough to undo a round of drafts. Caches without
        linear attention layers, and models that prepare their own cache, are left to `generate`.
        """
        from ..cache_utils import EncoderDecoderCache, LinearAttentionCacheLayerMixin

        model_kwargs = {}
        self.assistant_model._prepare_cache_for_generation(
            self.generation_config, model_kwargs, None, input_ids.shape[0], self.main_model_max_length
        )
        cache = model_kwargs.get("past_key_values")
        if cache is None:
            return
        decoder_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        # Attention caches need nothing more: `generate` prepares the same one in the first round
        if not any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in decoder_cache.layers):
            return
        decoder_cache.activate_past_recording(history_length=int(self.num_assistant_tokens) + 1)
        self.assistant_kwargs["past_key_values"] = cache
        self.generation_config.cache_implementation = None

    def _get_assistant_rollback(self, past_key_values) -> str:
        """
        Decides, once per generation, how the assistant cache is rolled back after each round:

        - `"exact"`: every layer removes the rejected tokens (attention layers),
        - `"history"`: the same, with linear attention layers that record their past (conv states) and keep a history
          of their recurrent states, provided the cache is cropped only between two forward passes of the assistant,
        - `"full"`: some layer cannot remove a few tokens, so the cache is emptied and the assistant encodes the whole
          sequence again in every round (slower, but exact).
        """
        from ..cache_utils import CacheLayerMixin, EncoderDecoderCache, LinearAttentionCacheLayerMixin
        from ..utils import logging

        cache = (
            past_key_values.self_attention_cache
            if isinstance(past_key_values, EncoderDecoderCache)
            else past_key_values
        )
        linear_layers = [layer for layer in cache.layers if isinstance(layer, LinearAttentionCacheLayerMixin)]
        attention_layers = [layer for layer in cache.layers if isinstance(layer, CacheLayerMixin)]
        if any(getattr(layer, "is_sliding", False) for layer in attention_layers):
            reason = "its sliding window layers drop the states of past tokens"
        elif not linear_layers:
            return "exact"
        elif not attention_layers:
            reason = "it has no attention layer to count the tokens of its linear attention layers"
        elif isinstance(self, AssistedCandidateGeneratorDifferentTokenizers):
            reason = "with different tokenizers, rollbacks do not fall between two forward passes of the assistant"
        elif not all(layer.record_past for layer in linear_layers):
            reason = "its linear attention layers do not record their past"
        elif any(
            any(layer.is_recurrent_states_initialized.values())
            and (getattr(layer, "history", None) is None or layer.number_of_states != 1)
            for layer in linear_layers
        ):
            reason = "the recurrent states of its linear attention layers have no history"
        else:
            return "history"
        logging.get_logger(__name__).warning_once(
            f"The assistant cache (`{cache.__class__.__name__}`) cannot remove a few tokens: {reason}. It is emptied "
            "after every round instead, and the assistant encodes the whole sequence again, which is exact but slow."
        )
        return "full"

    def _set_assistant_history_length(self, past_key_values) -> None:
        """The linear attention history must undo every draft of the coming round (their number may grow)."""
        history_length = int(self.num_assistant_tokens) + 1
        if getattr(self, "_assistant_history_length", 0) < history_length:
            from ..cache_utils import EncoderDecoderCache

            if isinstance(past_key_values, EncoderDecoderCache):
                past_key_values = past_key_values.self_attention_cache
            past_key_values.activate_past_recording(history_length=history_length)
            self._assistant_history_length = history_length
