"""The repair QP (paper eq. 5–8) and the backends that solve it.

``problem`` holds the linearised problem, ``solve`` picks a backend and hands undecided runs
over; every backend maps its outcomes to :class:`~warp_check.qp.solve.QPStatus` through a
named table.
"""
