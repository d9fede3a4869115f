"""The mutants of each target's overlay that survive and cannot change behaviour, one module per target
(`<target>.py`), each with the one-line argument the report shows.

`OPERATOR`: cosmic-ray's operator family, keyed by (file relative to the target's overlay, the mutated line as
cosmic-ray writes it, stripped, operator). `SEMANTIC`: the semantic family (`utils/semantic_mutants.py`), keyed by
(file, the mutant's one-line description, `semantic/<kind>`). A survivor that is in neither is unexplained:
`utils/mutation_testing.py` reports it and exits non-zero.
"""
