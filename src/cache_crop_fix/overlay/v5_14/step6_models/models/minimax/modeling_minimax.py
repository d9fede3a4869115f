# Our version of `MiniMaxCache.crop` (transformers/models/minimax/modeling_minimax.py, 5.14.x): same refusal, with a
# message that says why and what to do. The exporter applies it to `modular_minimax.py` as well.


class MiniMaxCache:
    def crop(self, max_length: int | None = None, *, tokens_to_remove: int | None = None):
        raise RuntimeError(
            "`MiniMaxCache` does not support `crop`: its linear attention states summarize every past token and "
            "cannot be rolled back. Assisted and speculative decoding are not available for MiniMax models."
        )
