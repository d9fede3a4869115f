# The one statement of `PI0ForConditionalGeneration.sample_actions` (transformers/models/pi0/modeling_pi0.py, 5.14.x)
# that changes: after each denoising step it rolled the cache back to the VLM prefix with the deprecated absolute
# `crop(prefix_length)`; it now removes the states the step appended, and skips the call when there are none (under
# the 5.14 contract `crop(-0)` empties the cache). A codemod rather than a copy of the 80-line method (see
# `cache_crop_fix.codemod`): the patcher and the exporter (also for `modular_pi0.py`) change that statement only.

CODEMODS = {
    "PI0ForConditionalGeneration.sample_actions": (
        "past_key_values.crop(prefix_length)",
        "tokens_to_remove = past_key_values.get_seq_length() - prefix_length\n"
        "if tokens_to_remove > 0:\n"
        "    past_key_values.crop(-tokens_to_remove)",
    )
}
