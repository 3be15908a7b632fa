"""A suite's traffic file read into a sample (:class:`~.sample.TrafficSample`), with the readers of
``warp-check import`` (:mod:`warp_check.data_files`: CSV, TSV, JSONL, Parquet, AdvGLUE's dev.json).

Reading is bounded: a file over :data:`MAX_BYTES` or with more than :data:`MAX_TEXTS` rows is
refused before it is parsed (rows counted cheaply first), naming the file, the limit and a sample
size that serves (a sample of traffic needs thousands of texts, not millions: the bound tightens
as 1/n). A file with no text to measure (empty, or every text a suite case) is refused with what
was read. A budget the sample cannot show even with no change at all (too few texts for
``max_change`` at ``confidence``) is refused before any repair runs, with the number of texts it
needs.

The suite loader stands a floor above Cert 4 (it reads ``[traffic]`` into :class:`~.settings.TrafficSettings`):
what is read here of a suite is :class:`SuiteTraffic`, which a loaded suite is.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from warp_check.cases import Case, Kind
from warp_check.certificates.traffic.sample import TrafficSample, split_traffic
from warp_check.certificates.traffic.settings import TrafficSettings
from warp_check.certify.binomial import change_bound
from warp_check.data_files import ImportSettings, format_of, read_unlabelled
from warp_check.errors import SettingsError, SuiteError

MAX_BYTES = 512 << 20  # 512 MiB
MAX_TEXTS = 1_000_000
SAMPLE_ROWS = 100_000  # the random sample a refusal of a larger file suggests


class SuiteTraffic(Protocol):
    """What Cert 4 reads of a suite (:class:`warp_check.suite.loader.Suite`): its cases, its ``[traffic]``
    table with a run's overrides, and errors naming a key's line in its warp.toml."""

    @property
    def cases(self) -> tuple[Case, ...]: ...

    @property
    def traffic(self) -> TrafficSettings | None: ...

    @property
    def key_lines(self) -> Mapping[str, int]: ...

    def error(self, field_name: str, message: str) -> SuiteError: ...

    def traffic_settings(
        self, *, path: Path | None = None, max_change: float | None = None
    ) -> TrafficSettings | None: ...


def read_traffic(
    settings: TrafficSettings, *, exclude: Iterable[Case] = (), suite: SuiteTraffic | None = None
) -> TrafficSample:
    """The file ``settings`` names as a sample: rows read with the import readers, each text once,
    ``exclude``'s must_fix and must_keep cases left out, split into the bound and tune parts.

    A mistake in the settings is named at the suite's warp.toml key where ``suite`` is given."""
    path = settings.path
    size = path.stat().st_size if path.is_file() else None
    if size is None:
        raise SuiteError("no such traffic file", path=path, field="traffic.path")
    if size > MAX_BYTES:
        why = f"{size / 2**20:,.0f} MiB is over the {MAX_BYTES >> 20} MiB a traffic file may have: give a sample of it"
        raise SuiteError(why, path=path)
    try:
        fmt = settings.format or format_of(path)
        reading = ImportSettings(format=fmt, text=settings.text, text_pair=settings.text_pair, task=settings.task)
    except SettingsError as exc:
        if suite is not None and suite.traffic is not None and f"traffic.{exc.field}" in suite.key_lines:
            raise suite.error(f"traffic.{exc.field}", exc.of_key) from None
        raise SuiteError(f"{exc.field}: {exc.why}", path=path, field=f"traffic.{exc.field}") from None
    counted = _rows_over_limit(path, fmt)
    rows = read_unlabelled(path, reading) if counted is None else []
    if counted is not None or len(rows) > MAX_TEXTS:
        raise SuiteError(_too_many(counted or len(rows), settings.confidence), path=path)
    where = [
        f"{path}:{row.where[0]}" if row.where[1] == "line" else f"{path} {row.where[1]} {row.where[0]}" for row in rows
    ]
    sample = split_traffic(
        ((row.text, row.text_pair, at) for row, at in zip(rows, where, strict=True)),
        source=str(path),
        confidence=settings.confidence,
        max_change=settings.max_change,
        exclude=exclude,
    )
    _check_measurable(sample, path, settings.text)
    return sample


def load_traffic(
    suite: SuiteTraffic, *, path: Path | None = None, max_change: float | None = None
) -> TrafficSample | None:
    """The suite's traffic (``[traffic]`` with a run's ``--traffic`` / ``--max-change``), its cases
    left out; None where the suite has none and none is given."""
    settings = suite.traffic_settings(path=path, max_change=max_change)
    if settings is None:
        return None
    sample = read_traffic(settings, exclude=suite.cases, suite=suite)
    cases = [case for case in suite.cases if case.kind is not Kind.AUX]
    texts = sample.bound + sample.tune
    if cases and texts and (cases[0].text_pair is None) != (texts[0].text_pair is None):
        why = (
            "the suite's cases are text pairs: name the traffic's second text column (text_pair)"
            if cases[0].text_pair is not None
            else "the suite's cases are single texts, the traffic's are pairs: leave text_pair out"
        )
        raise SuiteError(why, path=settings.path, field="traffic.text_pair")
    return sample


def texts_needed(max_change: float, confidence: float) -> int:
    """The fewest texts whose bound with no change at all is within ``max_change``: (1 − m)^n ≤ 1 − c."""
    return math.ceil(math.log1p(-confidence) / math.log1p(-max_change)) if max_change < 1 else 1


def _rows_over_limit(path: Path, fmt: str) -> int | None:
    """The rows of a CSV, TSV or JSONL file where they are more than :data:`MAX_TEXTS`, counted without
    parsing them (None: within the limit, or a format the reader counts as it reads)."""
    if fmt not in ("csv", "tsv", "jsonl"):
        return None
    with open(path, "rb") as handle:  # a row takes a line at least: most files stop here, read a block at a time
        if sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) < MAX_TEXTS:
            return None
    raw = path.read_bytes()
    if fmt == "jsonl":
        rows = sum(1 for line in raw.splitlines() if line.strip())  # the lines the reader parses
    else:
        text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
        dialect = {"delimiter": ","} if fmt == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
        try:
            rows = sum(1 for row in csv.reader(io.StringIO(text, newline=""), **dialect) if row) - 1  # the header
        except csv.Error:
            return None  # the reader says where the file is not CSV
    return rows if rows > MAX_TEXTS else None


def _too_many(rows: int, confidence: float) -> str:
    enough = change_bound(0, SAMPLE_ROWS // 2, confidence)
    return (
        f"{rows:,} rows is over the {MAX_TEXTS:,} a traffic file may have: give a random sample of it "
        f"(Cert 4's bound tightens as 1/n: {SAMPLE_ROWS:,} rows, about {SAMPLE_ROWS // 2:,} measured, bound a "
        f"repair that changes nothing at {100 * enough:.1g} %; e.g. shuf -n {SAMPLE_ROWS} on a JSONL file)"
    )


def _check_measurable(sample: TrafficSample, path: Path, column: str) -> None:
    counted = (
        f"{sample.rows:,} rows read, {sample.duplicates:,} repeating an earlier text, {sample.in_suite:,} suite "
        f"cases left out, {len(sample.tune):,} in the tune part"
    )
    if sample.rows == 0:
        why = "no rows in this file: Cert 4 needs unlabelled texts like the model's traffic, "
        why += f"one a row in column {column!r}"
        raise SuiteError(why, path=path)
    if not sample.bound and not sample.tune and sample.in_suite:
        why = (
            f"every text of this file is a must_fix or must_keep case of the suite ({counted}): their predictions "
            "are Cert 1 and 2's, not a sample of traffic; give texts like the model's traffic that are not suite cases"
        )
        raise SuiteError(why, path=path)
    if not sample.bound:
        raise SuiteError(f"no text left to measure Cert 4 on ({counted}): give more traffic texts", path=path)
    if sample.max_change is None:
        return
    best = change_bound(0, len(sample.bound), sample.confidence)
    if best > sample.max_change:
        need = texts_needed(sample.max_change, sample.confidence)
        raise SuiteError(
            f"max_change = {sample.max_change:g} cannot be shown on {len(sample.bound):,} texts: even a repair that "
            f"changed none would be bounded by {best:.3g} at confidence {sample.confidence:g} ({counted}); "
            f"the bound part needs at least {need:,} texts (about {2 * need:,} distinct rows: half go to the tune "
            "part), or a larger max_change",
            path=path,
            field="max_change",
        )


__all__ = ["MAX_BYTES", "MAX_TEXTS", "SuiteTraffic", "load_traffic", "read_traffic", "texts_needed"]
