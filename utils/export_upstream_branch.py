"""Builds the upstream-style branch `fix-cache-crop` of transformers with the fix, and verifies it (`make branch`).

    python utils/export_upstream_branch.py                    # the PyPI sdist of transformers 5.14.1, under build/
    python utils/export_upstream_branch.py --repo ~/transformers   # a transformers checkout at v5.14.x

See `cache_crop_fix.exporter` for what it does; `--help` for the options.
"""

import sys

from cache_crop_fix.exporter import main


if __name__ == "__main__":
    sys.exit(main())
