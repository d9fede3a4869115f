# Step 2 of the fix for transformers 5.24.x, in `transformers/generation/candidate_generator.py`: now that layers refuse
# crops they cannot honour (e.g. linear attention recurrent states), an assistant cache that refuses to remove the
# rejected tokens is rolled back fully instead of failing the generation, and the assistant encodes the sequence again.
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
        has_cache = self.assistant_kwargs.get("cache", None) is not None
        if has_cache:
            cache = self.assistant_kwargs["cache"]
            target_cache_size = input_ids.shape[-1] - 1 - remove_from_pkv - num_added_tokens
            tokens_to_remove = cache.get_seq_length() - target_cache_size
            if tokens_to_remove >= 0:
                try:
                    cache.crop(-tokens_to_remove)
                except (ValueError, RuntimeError):
                    # A refused `crop` changed nothing. Some layers cannot remove a few tokens (e.g. recurrent states
                    # of linear attention): the assistant then encodes the whole sequence again, slower but exact
                    cache.crop(-cache.get_seq_length())
            self.assistant_kwargs = _prepare_attention_mask(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_position_ids(
                self.assistant_kwargs, input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            )
            self.assistant_kwargs = _prepare_token_type_ids(self.assistant_kwargs, input_ids.shape[-1])

        return has_cache
