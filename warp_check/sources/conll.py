"""CoNLL files into a token classifier's suite: ``token<TAB>tag`` a line, a blank line between
sentences (``-DOCSTART-`` lines skipped), each sentence a case ``{"id", "tokens", "tags"}``.

Every tag is checked against the model's labels and every sentence against its window before
anything is written; a bad line is a SuiteError naming the file, the line and the field. With the
model (``split``), a sentence it tags all right becomes a must_keep case, any other a must_fix one.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from warp_check.cases import Case, Kind
from warp_check.decisions import LabelSpace
from warp_check.decisions.token_tags import row_id, row_text, sentence_id, word_problem
from warp_check.errors import SettingsError, SuiteError
from warp_check.model.encode import encode_cases, input_keys
from warp_check.progress import Progress
from warp_check.suite.casefile import AppendResult, append_sentences, writer_check
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter

DOCSTART = "-DOCSTART-"


@dataclass(frozen=True, kw_only=True)
class ConllSentence:
    """A sentence of a CoNLL file: its words, their tags as written, and the line it starts on."""

    id: str
    words: tuple[str, ...]
    tags: tuple[str, ...]
    line: int

    @property
    def record(self) -> dict[str, object]:
        """The case-file line that states it."""
        return {"id": self.id, "tokens": list(self.words), "tags": list(self.tags)}


@dataclass(frozen=True, kw_only=True)
class ConllImport:
    """What :func:`import_conll` did: sentences read, and where they went (``fixed`` None: not split)."""

    sentences: int
    kept: AppendResult
    fixed: AppendResult | None


def read_conll(path: str | Path, space: LabelSpace | None) -> list[ConllSentence]:
    """The sentences of ``path``, every tag one of ``space``'s; SuiteError naming file, line, field.
    ``space`` None: a file of words alone, a word a line (the model is to tag them), tags ()."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read the file ({exc.strerror or exc})", path=path) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"not valid UTF-8 (byte {exc.start + 1})", path=path) from None
    prefix = path.stem  # a sentence's id: the file's name and its first line, the same on every import
    sentences: list[ConllSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0

    def close() -> None:
        if words:
            sentences.append(ConllSentence(id=f"{prefix}-{start}", words=tuple(words), tags=tuple(tags), line=start))
            words.clear()
            tags.clear()

    # Lines end at "\n" only: a token may hold U+2028 or U+0085, which str.splitlines() would break on.
    for number, line in enumerate((raw.removesuffix("\r") for raw in text.split("\n")), start=1):
        if not any(unicodedata.category(ch)[0] not in "CZ" for ch in line):
            close()  # blank, or only a byte order mark or other invisible characters (WNUT-17's dev has two)
            continue
        if line.startswith(DOCSTART):
            continue
        columns = line.split("\t")
        if space is None and len(columns) > 1:
            why = "the model tags every word: give one word a line, no tag column (a blank line between sentences)"
            raise SuiteError(f"a tag column, {line[:60]!r}: {why}", path=path, line=number, field="tag")
        if len(columns) != (1 if space is None else 2) or not columns[0] or columns[0].strip() != columns[0]:
            shape = ("a word", "one word") if space is None else ("token<TAB>tag", "one word and its tag")
            raise SuiteError(
                f"expected {shape[0]}, got {line[:60]!r}: {shape[1]} a line, a blank line between sentences",
                path=path,
                line=number,
            )
        if (problem := word_problem(columns[0])) is not None:
            raise SuiteError(f"the token {problem}", path=path, line=number, field="token")
        if space is not None:
            try:
                space.class_id(columns[1].strip())
            except ValueError as exc:
                raise SuiteError(str(exc), path=path, line=number, field="tag") from None
            tags.append(columns[1].strip())
        if not words:
            start = number
        words.append(columns[0])
    close()
    return sentences


def import_conll(
    suite: Suite,
    source: str | Path,
    adapter: ClassifierAdapter,
    *,
    out: str | Path,
    kind: Kind = Kind.MUST_KEEP,
    fix_out: str | Path | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = False,
) -> ConllImport:
    """Append the sentences of ``source`` to ``out`` as ``kind`` cases; with ``fix_out`` (split by the
    model), only those the model tags all right, as must_keep cases, and the others to ``fix_out``.
    Every sentence is checked against the model's window first: nothing is written if one is refused."""
    source = Path(source)
    space = LabelSpace(names=suite.labels, num_classes=suite.num_classes)
    sentences = read_conll(source, space)
    rows = [
        Case(
            id=row_id(s.id, w),
            text=row_text(s.words, w),
            label=space.class_id(tag),
            kind=Kind.MUST_KEEP,
            origin=f"{source}:{s.line}",
        )
        for s in sentences
        for w, tag in enumerate(s.tags)
    ]
    if fix_out is not None and kind is not Kind.MUST_KEEP:
        raise SettingsError("kind", kind.value, "split by the model, the sentences it tags right are must_keep")
    keep_check = writer_check(suite, out, kind=kind)
    if fix_out is None:
        # Nothing to run, but a sentence over the window is refused here, not when the suite runs.
        input_keys(adapter, list({sentence_id(c.id): c for c in rows}.values()))
        kept = append_sentences(out, [s.record for s in sentences], check=keep_check)
        return ConllImport(sentences=len(sentences), kept=kept, fixed=None)
    encoded = encode_cases(adapter, rows, cache_dir=cache_dir, progress=progress)
    predictions = suite.decision.predict(adapter.head().logits(encoded.V))
    wrong = {sentence_id(c.id) for c, p in zip(rows, predictions, strict=True) if int(p) != c.label}
    right = [s.record for s in sentences if s.id not in wrong]
    failing = [s.record for s in sentences if s.id in wrong]
    kept = append_sentences(out, right, check=keep_check)
    fixed = append_sentences(fix_out, failing, check=writer_check(suite, fix_out, kind=Kind.MUST_FIX))
    return ConllImport(sentences=len(sentences), kept=kept, fixed=fixed)
