"""The certificates a repair claims, each one object in its own module.

:data:`CERTIFICATES` is the one table the runs, the audit, the report and the plugin find them in:
what each case's verdict carries (:class:`~warp_check.certificates.numbers.CaseNumbers`) and its
JUnit properties follow it. Adding a certificate: a module with a :class:`Cert` subclass, and its
line here (or :func:`register` from outside the package).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from warp_check.certificates.base import Cert, CertNumbers
from warp_check.certificates.kept import CERT2
from warp_check.certificates.margins import CERT1
from warp_check.certificates.radius import CERT3
from warp_check.certificates.traffic import CERT4
from warp_check.certify.certificate import CaseCertificate, FurtherClaim
from warp_check.repair.settings import RepairSettings

CERTIFICATES: list[Cert] = [
    CERT1,
    CERT2,
    CERT3,
    CERT4,
]


def register(cert: Cert) -> Cert:
    """Add ``cert`` to the table (after those there); a name already taken is refused."""
    if any(c.name == cert.name for c in CERTIFICATES):
        raise ValueError(f"a certificate named {cert.name!r} is registered already")
    CERTIFICATES.append(cert)
    return cert


def unregister(cert: Cert) -> None:
    """Take ``cert`` out of the table."""
    CERTIFICATES.remove(cert)


def judged(records: Sequence[CaseCertificate], settings: RepairSettings) -> list[CaseCertificate]:
    """``records`` (Cert 1–3 recomputed) with every further certificate's verdict and figures."""
    out = []
    for record in records:
        claims = []
        for cert in CERTIFICATES:
            measured = cert.measure(record, settings)
            if measured is not None:
                holds, figures = measured
                claims.append(
                    FurtherClaim(name=cert.name, holds=holds, figures={} if figures is None else figures.properties())
                )
        out.append(dataclasses.replace(record, further=tuple(claims)) if claims else record)
    return out


def cert_named(name: str) -> Cert:
    """The certificate of the table called ``name``."""
    for cert in CERTIFICATES:
        if cert.name == name:
            return cert
    raise KeyError(f"no certificate {name!r}: {', '.join(c.name for c in CERTIFICATES)}")


__all__ = ["CERTIFICATES", "Cert", "CertNumbers", "cert_named", "judged", "register", "unregister"]
