# Step 17 of the fix for transformers 5.25.x, in `transformers/models/unlimited_ocr/modeling_unlimited_ocr.py`: the static
# reference sliding-window layer keeps its window as it is when recording starts. Its window and its prefill are views of
# one buffer, sized by `sliding_window`, which its mask reads too: the room that `StaticSlidingWindowLayer` makes would
# replace the window's buffer. Its `crop` still restores what its window stores. The exporter applies it to
# `modular_unlimited_ocr.py` as well.


class UnlimitedOcrStaticReferenceSlidingWindowLayer:
    def activate_past_recording(self, **kwargs):
        """The window and the prefill share one buffer: no room is made for the tokens to remove (see `crop`)."""
