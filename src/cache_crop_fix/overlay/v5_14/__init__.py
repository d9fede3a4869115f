"""The 5.14 backport: the fix for transformers 5.14.x, as a stack of steps applied in order (`targets/v5_14.py`).

Each `stepN_*` package mirrors transformers' package paths and holds only what that step adds or changes; a later
step may replace a method again, and its version wins.
"""
