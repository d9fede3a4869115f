# The one statement of `GenerationMixin._assisted_decoding` (transformers/generation/utils.py, 5.25.x) that changes:
# assisted decoding turns on the past recording of the main cache and never turned it off, so that the cache it returns
# (or the caller's own) kept recording: a later `generate` continuing it kept every conv column and sliding-window
# token until a `crop` that plain decoding never calls. It now stops recording before returning, as
# `DeferredStopCheck.finish` does. A codemod rather than a copy of the 300-line method (see `cache_crop_fix.codemod`).

CODEMODS = {
    "GenerationMixin._assisted_decoding": (
        "if streamer is not None:\n    streamer.end()",
        "if streamer is not None:\n"
        "    streamer.end()\n"
        "\n"
        "# The cache outlives `generate` when it is returned or was passed in: stop recording its past (the last\n"
        "# `crop` brought its states back to their working size), as `DeferredStopCheck.finish` does\n"
        "for layer in cache.self_attention_cache.layers if isinstance(cache, EncoderDecoderCache) else cache.layers:\n"
        '    if hasattr(layer, "record_past"):\n'
        "        layer.record_past = False",
    )
}
