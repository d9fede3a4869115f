"""What the project tests need to know about the installed target: its name, and the names 5.24 changed.

5.15 renamed the cache argument and output attribute of models and `generate` from `past_key_values` to `cache` (5.24
still accepts `past_key_values` with a deprecation warning). Tests that run under both targets use these names.
"""

import transformers
from cache_crop_fix.targets import target_for


TARGET = target_for(transformers.__version__)
# The cache's keyword in model calls and in the candidate generators' `assistant_kwargs`, and its attribute on outputs
CACHE_KWARG = "past_key_values" if TARGET.name == "v5_14" else "cache"
# Whether the target rolls linear attention caches back through a bounded state history (a `*_history` step), so that
# linear attention assistants are cropped exactly instead of being rolled back fully
HAS_STATE_HISTORY = any(step.package.endswith("_history") for step in TARGET.steps)


def output_cache(output):
    """The cache of a model or `generate` output."""
    return getattr(output, CACHE_KWARG)
