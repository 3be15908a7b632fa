"""What the tests share: tiny trained models, suites written to disk, synthetic repair problems."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: benchmarks/ and example_suites/ are read from it
