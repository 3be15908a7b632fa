"""The ``warp-check`` command's parts beside its entry point (:mod:`warp_check.cli`): what the commands
share, how a run is printed, and the commands that are not run modes, one module per concern."""
