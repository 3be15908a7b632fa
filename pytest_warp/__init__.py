"""pytest_warp: the pytest face of warp-check (suites as tests, --warp-repair, audits).

Thin by design: everything it does goes through ``warp_check``'s public API, and nothing
heavy (torch, transformers, osqp) is imported until a suite is actually run.
"""
