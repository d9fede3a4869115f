"""The survivors of each target's mutants argued equivalent, one module per target (`OPERATOR`, `SEMANTIC`)."""
