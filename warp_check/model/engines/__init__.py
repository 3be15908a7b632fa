"""Where the encoder pass runs: in this process (the default) or on Ray Data (the ``ray`` extra).

:mod:`.settings` holds the typed ``[model] engine`` record (standard library only); :mod:`.ray`
runs the pass as a Ray Data ``map_batches`` over the same one-length batches the local pass forms.
"""
