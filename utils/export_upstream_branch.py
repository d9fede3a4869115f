"""Builds the fix as a stack of upstream-style branches of transformers (`fix-cache-crop-1-clamp`, ...,
`fix-cache-crop`), one pull request each, and verifies every step (`make branch`).

    python utils/export_upstream_branch.py                    # every target, each on its PyPI sdist, under build/
    python utils/export_upstream_branch.py --target v5_25     # the stack for upstream `main` only (5.25.0 sdist)
    python utils/export_upstream_branch.py --repo ~/transformers   # a checkout: the target that supports its version

See `cache_crop_fix.export` for what it does; `--help` for the options.
"""

import sys

from cache_crop_fix.export import main


if __name__ == "__main__":
    sys.exit(main())
