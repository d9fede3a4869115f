# Step 10 of the fix for transformers 5.25.x, in `transformers/models/inkling/modeling_inkling.py`: the one statement of
# `InklingAttention.forward` that changes. It reads the query offset before `cache.update` (as its comment says it
# must) and uses it after, but a static layer returns its length as the counter tensor that `update` advances in place:
# every forward continuing a static cache put its queries `q_length` positions too far in the relative position bias.
# It now keeps the value from before. A codemod rather than a copy of the method (see `cache_crop_fix.codemod`); the
# exporter applies it to `modular_inkling.py` as well.

CODEMODS = {
    "InklingAttention.forward": (
        "q_offset = cache.get_query_offset(self.layer_idx)",
        "q_offset = cache.get_query_offset(self.layer_idx)\n"
        "if isinstance(q_offset, torch.Tensor):\n"
        "    q_offset = q_offset.clone()  # a static layer's length: the counter `update` advances in place",
    )
}
