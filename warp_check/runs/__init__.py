"""One run of a suite — check, repair or audit — and the verdict on each of its cases.

The pytest plugin and the ``warp-check`` command both get their results from here, so a case
passes or fails for the same reason and with the same words inside and outside pytest. A
:class:`RunResult` is plain data (JSON round trip), so pytest-xdist workers can share one
repair instead of each running their own.

Modes:

* ``check``: the model as it is. must_keep passes when the model predicts its label; so does
  must_fix (an unrepaired model fails its must_fix cases: that is the gate).
* ``repair``: repair, save, then must_fix asserts Cert 1 + Cert 3 (incl. no attack flip in the
  certified ball) and must_keep Cert 2 + unchanged label, on the repaired weights.
* ``audit``: the claims of a certificate, recomputed on a model folder.
"""
