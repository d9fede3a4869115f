"""Fixes `Cache.crop` semantics of transformers 5.14.x: importing this package installs the fix.

`crop(-k)` removes the last `k` tokens (removing at least the cached length empties the cache), `crop(0)` empties the
cache, and absolute crops (`crop(n)` with `n >= 0`) still work but emit a `FutureWarning`. See `docs/source/en/cache_crop.md`.
"""

import warnings

from .patcher import UnsupportedTransformersError, apply, is_active, revert, status


__all__ = ["UnsupportedTransformersError", "apply", "is_active", "revert", "status"]
__version__ = "0.1.0"


def _apply_on_import() -> None:
    try:
        apply()
    except UnsupportedTransformersError as error:
        warnings.warn(f"cache_crop_fix is inactive: {error}", RuntimeWarning, stacklevel=3)


_apply_on_import()
