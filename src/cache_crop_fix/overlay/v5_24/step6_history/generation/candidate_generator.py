# Step 6 of the fix for transformers 5.24.x, in `transformers/generation/candidate_generator.py`: the assistant cache
# records its past from its first token, with a history of its linear attention states, and how it is rolled back is
# decided once per generation: exactly, or fully (the assistant encodes the sequence again) only when it must.
from typing import TYPE_CHECKING

import torch


if TYPE_CHECKING:
    # Names that the upstream module binds and our methods use (at runtime they run with its globals)
    from transformers.generation.candidate_generator import (
        _prepare_attention_mask,
        _prepare_position_ids,
        _prepare_token_type_ids,
    )


class AssistedCandidateGenerator:
    def _update_past_and_masks(
        self, input_ids: torch.LongTensor, remove_from_pkv: int = 0, num_added_tokens: int = 1
    ) -> bool:
        """Update past key values and attention masks for subsequent generation rounds."""
        if self.assistant_kwargs.get("cache", None) is None and self.generation_config.use_cache is not False:
            # First round: prepare the assistant cache here, so that it records its past from the first token
            self._prepare_assistant_cache(input_ids)
        has_cache = self.assistant_kwargs.get("cache", None) is not None
        if has_cache:
            cache = self.assistant_kwargs["cache"]
            # Decided once, when the first forward pass of the assistant has set up every layer
            if getattr(self, "_assistant_rollback", None) is None and cache.get_seq_length() > 0:
                self._assistant_rollback = self._get_assistant_rollback(cache)
            # The history restores the linear attention states between two forward passes of the assistant: keep
            # every token it processed, so that only the drafts it made since are removed
            is_default_rollback = remove_from_pkv == 0 and num_added_tokens == 1
            if getattr(self, "_assistant_rollback", None) == "history" and is_default_rollback:
                num_added_tokens = 0
                self._set_assistant_history_length(cache)
            target_cache_size = input_ids.shape[-1] - 1 - remove_from_pkv - num_added_tokens
            tokens_to_remove = cache.get_seq_length() - target_cache_size
            if getattr(self, "_assistant_rollback", None) == "full" and tokens_to_remove >= 0:
                tokens_to_remove = cache.get_seq_length()
            if tokens_to_remove >= 0:
                try:
                    cache.crop(-tokens_to_remove)
                except (ValueError, RuntimeError) as error:
                    # A refused `crop` changed nothing. Roll back fully this time, slower but exact: once for recurrent
                    # states written in place by a kernel before the history noticed it and started copying them,
                    # and from the second refusal on for good (e.g. a model that writes its states without telling
                    # the cache)
                    self._assistant_refused_crops = getattr(self, "_assistant_refused_crops", 0) + 1
                    if self._assistant_refused_crops == 1:
                        from ..utils import logging

                        logging.get_logger(__name__).warning(
                            f"The assistant cache (`{cache.__class__.__name__}`) could not remove {tokens_to_remove} "
                            f"token(s): {error} It is emptied instead, and the assistant encodes the whole sequence "
                            "again, which is exact but slow."
                        )
                    else:
                        self._assistant_rollback = "full"
                    cache.crop(-cache.get_seq_length())
            self.assistant_kwargs = _prepare_attention_mask(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_position_ids(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[-1])

        return has_cache

    def _prepare_assistant_cache(self, input_ids: torch.LongTensor) -> None:
        """
        Prepares the cache the assistant would get in its first `generate` call, recording its past, with a history
        of its linear attention states long enough to undo a round of drafts. Caches without linear attention layers,
        and models that prepare their own cache, are left to `generate`.
        """
        from ..cache_utils import EncoderDecoderCache, LinearAttentionCacheLayerMixin

        model_kwargs = {}
        self.assistant_model._prepare_cache_for_generation(
            self.generation_config, model_kwargs, None, input_ids.shape[0], self.main_model_max_length
        )
        cache = model_kwargs.get("cache")
        if cache is None:
            return
        decoder_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        # Attention caches need nothing more: `generate` prepares the same one in the first round
        if not any(isinstance(layer, LinearAttentionCacheLayerMixin) for layer in decoder_cache.layers):
            return
        decoder_cache.activate_past_recording(history_length=int(self.num_assistant_tokens) + 1)
        self._assistant_history_length = int(self.num_assistant_tokens) + 1
        self.assistant_kwargs["cache"] = cache

    def _get_assistant_rollback(self, cache) -> str:
        """
        Decides, once per generation, how the assistant cache is rolled back after each round:

        - `"exact"`: every layer removes the rejected tokens (e.g. attention layers, linear attention layers with
          recorded conv states only),
        - `"history"`: the same, with linear attention layers that keep a history of their recurrent states, provided
          the cache is cropped only between two forward passes of the assistant,
        - `"full"`: some layer cannot remove a few tokens, so the cache is emptied and the assistant encodes the whole
          sequence again in every round (slower, but exact). This is said once.
        """
        from ..cache_utils import EncoderDecoderCache, LinearAttentionCacheLayerMixin
        from ..utils import logging

        decoder_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        linear_layers = [layer for layer in decoder_cache.layers if isinstance(layer, LinearAttentionCacheLayerMixin)]
        recurrent_layers = [layer for layer in linear_layers if any(layer.is_recurrent_states_initialized.values())]
        if not all(layer.record_past for layer in linear_layers):
            reason = "its linear attention layers do not record their past"
        elif any(getattr(layer, "history", None) is None or layer.number_of_states != 1 for layer in recurrent_layers):
            reason = "the recurrent states of its linear attention layers have no history"
        else:
            return "history" if recurrent_layers else "exact"
        logging.get_logger(__name__).warning_once(
            f"The assistant cache (`{decoder_cache.__class__.__name__}`) cannot remove a few tokens: {reason}. It is "
            "emptied after every round instead, and the assistant encodes the whole sequence again, which is exact "
            "but slow."
        )
        return "full"

    def _set_assistant_history_length(self, cache) -> None:
        """The linear attention history must undo every draft of the coming round (their number may grow)."""
        history_length = int(self.num_assistant_tokens) + 1
        if getattr(self, "_assistant_history_length", 0) < history_length:
            from ..cache_utils import EncoderDecoderCache

            decoder_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
            decoder_cache.activate_past_recording(history_length=history_length)
            self._assistant_history_length = history_length
