"""Fixes `Cache.crop` of the installed transformers (5.25.x, upstream `main`; 5.24.x and 5.14.x, backports): importing
this package installs the fix of that release line, and any other release is refused and left stock.

`crop(-k)` removes the last `k` tokens (removing at least the cached length empties the cache); every cache layer type
crops exactly or refuses before anything changes. `crop(0)` keeps its release line's meaning: it removes nothing on 5.24
and 5.25, and empties the cache on 5.14, where absolute crops (`crop(n)`, `n >= 0`) emit a `FutureWarning`. See
`docs/source/en/cache_crop.md`.
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
