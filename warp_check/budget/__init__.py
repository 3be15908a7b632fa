"""A traffic budget: which must_fix cases it cannot buy (``fit``), and the strongest repair within it
(``tune``, ``warp-check tune``)."""
