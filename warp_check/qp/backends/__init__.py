"""The built-in QP backends: each file registers its backend (warp_check.qp.registry) when imported.

A backend's file holds its settings record, its advice, its place in ``auto``'s rule and its solve,
named ``"module:function"``: the numerics of the built-in ones live beside them in warp_check.qp and
import these files, never the other way round, and load when a QP is first solved, so reading
settings stays standard-library only. Adding a backend: its file, and its line below.
The order is the registration order: the order ``backend``'s error lists them in.
"""

from warp_check.qp.backends import osqp, ipm, active_set, alm  # noqa: F401, I001
