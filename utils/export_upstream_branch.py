"""Builds the fix as a stack of upstream-style branches of transformers (`fix-cache-crop-1-clamp`, ...,
`fix-cache-crop`), one pull request each, and verifies every step (`make branch`).

    python utils/export_upstream_branch.py                    # the PyPI sdist of transformers 5.14.1, under build/
    python utils/export_upstream_branch.py --repo ~/transformers   # a transformers checkout at v5.14.x

See `cache_crop_fix.export` for what it does; `--help` for the options.
"""

import sys

from cache_crop_fix.export import main


if __name__ == "__main__":
    sys.exit(main())
