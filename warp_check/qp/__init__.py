"""The repair QP (paper eq. 5–8) and the backends that solve it.

``problem`` holds the linearised problem; ``registry`` the backends, each registered by its file in
``backends`` (its settings record, advice and place in ``auto``'s rule); ``solve`` picks one and
passes on what ``auto``'s pick cannot decide. Every backend maps its outcomes to
:class:`~warp_check.qp.solution.QPStatus` through a named table.
"""
