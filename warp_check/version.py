"""The version of warp-check and where its documentation is: one place each, read by the package
metadata, the help texts and the documentation site's build (docs/hooks/reference.py)."""

__version__ = "0.1.0"
# The documentation site (built from docs/ by `mkdocs build`); --help points to its pages.
DOCS_URL = "https://warp-check.readthedocs.io/en/latest/"
