"""Perturbations drawn before, read back: a repair's neighbourhood draws thousands of variants
with hypothesis, a few milliseconds each, and the same text, count, seed and settings always
draw the same ones. A second repair of a suite (a changed model, a changed setting of the loop)
reads them from one JSON file beside the representations instead of drawing them again.

The file is stamped with what decides a draw besides its inputs (the perturbation code and
hypothesis' version, :func:`~warp_check.perturb.draws.drawing_code`); a file of another stamp,
a damaged or a foreign one is an empty memo, never an error. It is written only by
:meth:`DrawMemo.save`, atomically; a memo that cannot be written is given up with one
CacheWarning, and the run goes on with what it drew. Two runs that save at once: the last one's
file stands, and the other's draws are drawn again next time.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from warp_check.errors import CacheWarning
from warp_check.files import replaced_atomically

FORMAT = "warp-check-draws/1"
FILE_NAME = "perturbations.json"
MAX_ENTRIES = 50_000  # one key per perturbed case: a hundred neighbourhoods of 500; past this the oldest go


class DrawMemo:
    """Texts drawn for a key, remembered in ``<folder>/perturbations.json`` under ``code``.

    ``folder=None`` remembers nothing: :meth:`get` always answers None.
    """

    def __init__(self, folder: str | Path | None, code: str) -> None:
        self.path = Path(folder) / FILE_NAME if folder is not None else None
        self.code = code
        self._entries = self._read()
        self._changed = False
        self.read_back = 0  # keys answered from the file

    def _read(self) -> dict[str, list[str]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("code") != self.code:
            return {}
        entries = data.get("draws")
        if not isinstance(entries, dict):
            return {}
        return {
            k: v for k, v in entries.items() if isinstance(v, list) and all(isinstance(t, str) for t in v)
        }  # fmt: skip

    def get(self, key: str) -> list[str] | None:
        """The texts remembered for ``key``, or None."""
        found = self._entries.get(key)
        if found is None:
            return None
        self.read_back += 1
        return list(found)

    def put(self, key: str, texts: list[str]) -> None:
        """Remember ``texts`` for ``key`` (written by :meth:`save`)."""
        if self.path is not None:
            self._entries[key] = list(texts)
            self._changed = True

    def save(self) -> None:
        """Write the memo (temp file, then rename) if a draw was added."""
        if self.path is None or not self._changed:
            return
        entries = list(self._entries.items())[-MAX_ENTRIES:]  # insertion order: the newest last
        record = {"format": FORMAT, "code": self.code, "draws": dict(entries)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with replaced_atomically(self.path, suffix=".json") as tmp:
                Path(tmp).write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        except OSError as exc:
            warnings.warn(
                CacheWarning(
                    f"the perturbation memo {str(self.path)!r} cannot be written ({exc.strerror or exc}): "
                    "going on without it (the same draws, drawn again next time)"
                ),
                stacklevel=2,
            )
        self._changed = False
