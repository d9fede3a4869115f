# Our version of the methods of `transformers/generation/candidate_generator.py` that crop a cache (5.14.x), step 3:
# an assistant cache that cannot remove a few tokens is rolled back fully instead.
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
        has_past_key_values = self.assistant_kwargs.get("past_key_values", None) is not None
        if has_past_key_values:
            # The assistant cache must hold every token but the last `num_added_tokens` (and `remove_from_pkv`) of the
            # sequence minus its newest token, which the assistant has not processed yet
            past_key_values = self.assistant_kwargs["past_key_values"]
            new_cache_size = max(input_ids.shape[-1] - 1 - remove_from_pkv - num_added_tokens, 0)
            tokens_to_remove = past_key_values.get_seq_length() - new_cache_size
            # Only crop when there is something to remove: `crop(-0)` would empty the cache
            if tokens_to_remove > 0:
                try:
                    past_key_values._check_crop(-tokens_to_remove)
                except (ValueError, RuntimeError):
                    # Some assistant caches cannot remove a few tokens (e.g. linear attention recurrent states, or a
                    # sliding window that moved on): roll them back fully, and the assistant encodes the whole
                    # sequence again, which is slower but exact
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
