# Step 5 of the fix for transformers 5.25.x, in `transformers/cache_utils.py`: `StaticIndexedLayer` holds the positions
# of every cached token in `indexer_position_ids` for the models that keep them there (Qwen4-Exp concatenates its 3-D
# positions to them every forward, "so cache operations such as reset, crop and beam reordering also update the position
# history"), but its `crop` never cut them: after a rollback the indexer read the positions of rejected tokens.
# `DynamicIndexedLayer.crop` already cuts them.
#
# Each class below is named like the upstream class it changes and holds only the methods this step replaces; the
# patcher installs them on the upstream classes at runtime and the exporter transplants them into upstream's file. The
# classes here are never instantiated.


class StaticIndexedLayer:
    def crop(self, tokens_to_remove: int) -> None:
        """
        Remove `tokens_to_remove` tokens from the current cache layer.
        """
        super().crop(tokens_to_remove)
        if self.is_indexer_initialized and tokens_to_remove:
            self.indexer_cumulative_length.sub_(min(-tokens_to_remove, self.max_cache_len)).clamp_(min=0)
        if self.indexer_position_ids is not None and tokens_to_remove:
            kept = max(self.indexer_position_ids.shape[-1] + tokens_to_remove, 0)
            self.indexer_position_ids = self.indexer_position_ids[..., :kept]
