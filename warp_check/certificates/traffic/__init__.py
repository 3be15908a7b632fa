"""Cert 4: the share of predictions a repair changes on traffic like the suite's sample, bounded
exactly (Clopper–Pearson) from the changes counted on it. It is measured on the run as a whole (the
suite's ``traffic`` item), so it claims no case; its record in the certificate file is the
certificate's ``traffic`` (:class:`~warp_check.certify.certificate.TrafficRecord`).

Everything of Cert 4 is here, one module for each thing it owns:

- :mod:`.settings`: warp.toml's ``[traffic]`` table (:class:`TrafficSettings`), checked key by key as
  the suite loads, and a run's overrides of it;
- :mod:`.sample`: unlabelled texts as a sample, split by a hash of each text into the part Cert 4 is
  measured on and the part a tuner may use;
- :mod:`.reading`: the traffic file read into that sample, within bounds;
- :mod:`.changes`: how a run (and the audit, again) measures it: the predictions before and after the
  repair on the sample, in float64, and the record of what changed;
- :mod:`.verdicts`: what a run says of it: its record of the run, its verdicts' words, JUnit figures.
"""

from __future__ import annotations

from warp_check.certificates.base import Cert


class TrafficBound(Cert):
    name = "traffic"
    title = "Cert 4"
    claim = "the repair changes at most the bounded share of predictions on traffic like the sample"
    further = False


CERT4 = TrafficBound()

__all__ = ["CERT4", "TrafficBound"]
