# Step 11 of the fix for transformers 5.25.x, in `transformers/conversion_mapping.py`: the renaming `MtpModel` gains.
# Bailing-hybrid's checkpoints name the post-norm of an MTP layer `final_layernorm` (the original Ling modeling code),
# which no renaming of `MtpModel`'s checkpoint layouts mapped: `MtpModel.from_pretrained` raised a `RuntimeError` (the
# `post_norm` weights missing). A codemod of the mapping's literal (see `cache_crop_fix.codemod`). transformers builds
# the mapping once, on the first load (`_checkpoint_conversion_mapping_cache`): the renaming is in it if the fix is
# applied before any model is loaded, and stays in it after a `revert()`.

CODEMODS = {
    "_build_checkpoint_conversion_mapping": (
        'WeightRenaming(source_patterns=".mtp_block.post_norm.", target_patterns=".post_norm."),',
        'WeightRenaming(source_patterns=".mtp_block.post_norm.", target_patterns=".post_norm."),\n'
        "# Bailing-hybrid checkpoint layout: the post-norm of an MTP layer is its `final_layernorm`\n"
        'WeightRenaming(source_patterns=".mtp_block.final_layernorm.", target_patterns=".post_norm."),',
    )
}
