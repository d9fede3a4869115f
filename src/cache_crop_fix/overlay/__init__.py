"""Our versions of the upstream methods that the fix changes, one package per target release line.

`overlay/<target>/<step>/cache_utils.py` holds what that step changes in `transformers/cache_utils.py`,
`.../generation/...` what it changes in `transformers/generation/...`, and so on. The steps of a target, in order, are
listed in `cache_crop_fix/targets/<target>.py`. Nothing here is imported by user code: the patcher installs it at
runtime and the exporter transplants it into a transformers source tree.
"""
