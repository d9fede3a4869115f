# The change of the main line's step 13 (see `cache_crop_fix.overlay.v5_25.step13_continue`): 5.14 has the same code.

from cache_crop_fix.overlay.v5_25.step13_continue.generation.utils import CODEMODS  # noqa: F401
