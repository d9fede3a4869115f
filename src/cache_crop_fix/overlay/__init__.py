"""Our versions of the upstream methods that the fix changes, in modules mirroring transformers' package paths.

`overlay/cache_utils.py` holds what changes in `transformers/cache_utils.py`, `overlay/generation/...` what changes in
`transformers/generation/...`, and so on. Nothing here is imported by user code: the patcher installs it at runtime
and the exporter transplants it into a transformers source tree.
"""
