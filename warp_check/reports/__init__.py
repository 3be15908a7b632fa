"""A run's report: the folder (``report.md``, ``report.json``, plots, ``index.html``), the page, its
plots and its words."""
