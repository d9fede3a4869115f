# Step 9 of the fix for transformers 5.25.x, in `transformers/masking_utils.py`: the mask functions skip the causal mask
# of a single query token unless the cache is compileable, as a proxy for static layers (which return all their
# `max_cache_len` slots, the ones not written yet included). But linear attention layers are not compileable while they
# record their states for a rollback, so with a static hybrid cache the single-token forwards of assisted decoding and
# prompt lookup attended to empty and stale slots. The mask functions now ask for static layers themselves: one
# statement each (codemods, see `cache_crop_fix.codemod`) and a helper.
from transformers.cache_utils import Cache, StaticLayer


def _has_static_layers(cache: Cache | None) -> bool:
    """
    Whether `cache` has static attention layers. They return all their `max_cache_len` slots, the ones not written yet
    included, so that even a single query token needs a mask. Unlike `cache.is_compileable`, this does not depend on
    the linear attention layers, which are not compileable while they record their states for a rollback.
    """
    cache = getattr(cache, "self_attention_cache", cache)
    return any(isinstance(layer, StaticLayer) for layer in getattr(cache, "layers", ()))


# The same statement in each mask function
CODEMODS = {
    "create_causal_mask": (
        'allow_is_causal_skip = allow_is_causal_skip and not (getattr(cache, "is_compileable", False) and q_length == 1)',
        "allow_is_causal_skip = allow_is_causal_skip and not (_has_static_layers(cache) and q_length == 1)",
    ),
    "create_sliding_window_causal_mask": (
        'allow_is_causal_skip = allow_is_causal_skip and not (getattr(cache, "is_compileable", False) and q_length == 1)',
        "allow_is_causal_skip = allow_is_causal_skip and not (_has_static_layers(cache) and q_length == 1)",
    ),
    "create_chunked_causal_mask": (
        'allow_is_causal_skip = allow_is_causal_skip and not (getattr(cache, "is_compileable", False) and q_length == 1)',
        "allow_is_causal_skip = allow_is_causal_skip and not (_has_static_layers(cache) and q_length == 1)",
    ),
}
