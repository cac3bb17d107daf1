"""The committed corpus of drawn scripts, ``scripts.jsonl``, and its generator (docs/porting.rst).

A package only so that mypy tells its ``generate`` from proofs/traces/generate.py.
"""
