# The change of the main line's step 15 (see `cache_crop_fix.overlay.v5_25.step15_stop_strings`): 5.24 has the same code.

from cache_crop_fix.overlay.v5_25.step15_stop_strings.generation.utils import CODEMODS  # noqa: F401
