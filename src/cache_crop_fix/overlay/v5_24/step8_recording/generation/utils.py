# The main line's step 14 (see `cache_crop_fix.overlay.v5_25.step14_recording`) in 5.24's `_assisted_decoding`, plus a
# `crop(0)` once recording is off: while it records, a sliding window of this stack keeps one more token than its
# working size (step 1), which a layer that no longer records must not hold (its next update returns one key more than
# its mask has). A codemod rather than a copy of the 300-line method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "GenerationMixin._assisted_decoding": (
        "if streamer is not None:\n    streamer.end()",
        "if streamer is not None:\n"
        "    streamer.end()\n"
        "\n"
        "# The cache outlives `generate` when it is returned or was passed in: stop recording its past, and bring the\n"
        "# states kept for a rollback back to their working size\n"
        "for layer in cache.self_attention_cache.layers if isinstance(cache, EncoderDecoderCache) else cache.layers:\n"
        '    if hasattr(layer, "record_past"):\n'
        "        layer.record_past = False\n"
        "cache.crop(0)",
    )
}
