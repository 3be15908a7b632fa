"""A Ctrl-C Python would drop, delivered again.

A Ctrl-C that lands in a callback Python cannot raise from (an import lock's weakref callback, a
``__del__``) is printed as "Exception ignored ... Traceback" and then dropped, so the run goes on as
if no key were pressed. The ``warp-check`` command and the pytest plugin both run inside
:func:`ctrl_c_never_lost`.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading


@contextlib.contextmanager
def ctrl_c_never_lost():
    """Inside this block a dropped Ctrl-C is delivered again, once the unraisable hook has returned,
    at the next line of ordinary code (a KeyboardInterrupt raised inside the hook itself would be
    dropped the same way). Every other unraisable exception goes to the hook this one replaced."""
    previous = sys.unraisablehook
    hook_left = threading.Event()
    open_ = threading.Lock()
    is_open = [True]

    def redeliver() -> None:
        hook_left.wait()
        with open_:
            if is_open[0]:
                _thread.interrupt_main(signal.SIGINT)

    def deliver_again(unraisable) -> None:
        dropped_ctrl_c = (
            unraisable.exc_type is not None
            and issubclass(unraisable.exc_type, KeyboardInterrupt)
            and threading.current_thread() is threading.main_thread()  # where Python runs SIGINT's handler
        )
        if not dropped_ctrl_c:
            previous(unraisable)
            return
        hook_left.clear()
        threading.Thread(target=redeliver, name="warp-check-ctrl-c", daemon=True).start()
        hook_left.set()  # last: the bytecode left after it (a return) does not run signal handlers

    sys.unraisablehook = deliver_again
    try:
        yield
    finally:
        sys.unraisablehook = previous
        with open_:
            is_open[0] = False
