"""The suite layer: ``warp.toml`` and its JSONL case files, read into validated records.

Standard library only (suites load in warm checks, which import no numpy). Every mistake is a
SuiteError naming the file, the line and the field.
"""
