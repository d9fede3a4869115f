"""Command line: `python -m cache_crop_fix status` and `python -m cache_crop_fix fingerprints`."""

import argparse
import sys
import warnings

from . import patcher


def _status() -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import cache_crop_fix  # noqa: F401  (applies the fix where supported)

    import torch

    state = patcher.status()
    print(f"cache_crop_fix: {'active' if state.active else 'inactive'}")
    print(
        f"transformers:   {state.transformers_version} ({'supported' if state.supported else 'unsupported'}: {patcher.SUPPORTED_RANGE})"
    )
    print(f"torch:          {torch.__version__}")
    for warning in caught:
        print(f"warning:        {warning.message}")
    for qualname in state.patches:
        print(f"  patched {qualname}" if state.active else f"  would patch {qualname}")
    return 0 if state.supported and state.active else 1


def _fingerprints() -> int:
    for qualname, fingerprint in sorted(patcher.installed_fingerprints().items()):
        print(f'    "{qualname}": frozenset({{"{fingerprint}"}}),')
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cache_crop_fix", description=__doc__)
    parser.add_argument("command", choices=["status", "fingerprints"])
    args = parser.parse_args(argv)
    return _status() if args.command == "status" else _fingerprints()


if __name__ == "__main__":
    sys.exit(main())
