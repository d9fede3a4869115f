# Statements of `MtpModel` (transformers/modeling_layers.py, 5.25.x) that change, so that MTP layers of linear attention
# (`mtp_layer_types=["linear_attention"]`) can be built after a main model whose last layer is linear attention, and
# run: `__init__` took the MTP layers' norm class from the first module of that layer named like a norm, which for a
# linear attention layer is its gated output norm (called without the gate it needs: `AttributeError`);
# and a linear attention layer's masks are only a `conv_mask`, while `MtpLayer.forward` requires an `attention_mask`
# (`TypeError`). Codemods rather than copies of the methods (see `cache_crop_fix.codemod`).

CODEMODS = {
    "MtpModel.__init__": (
        'if "norm" in name',
        "# A norm of the decoder layer itself, not of its mixer (e.g. the gated output norm of linear attention)\n"
        'if "norm" in name and "." not in name',
    ),
    "MtpModel.create_masks_for_mtp_layer": (
        "return masks",
        "# `MtpLayer.forward` takes an attention mask, which linear attention layers have none of\n"
        'masks.setdefault("attention_mask", None)\n'
        "return masks",
    ),
}
