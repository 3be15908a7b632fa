"""``warp_check.serial``: a frozen record to JSON and back, driven by its fields and their types,
with the per-field forms a file needs, and a reader that names the file and the key it found
wrong. Its own small records; the certificate's and the run files' are in tests/certify and
tests/runs."""

from __future__ import annotations

import enum
import json
import math
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from warp_check.cases import Kind
from warp_check.serial import FieldError, Reader, Record, finite, on_disk, read, to_json, view


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, kw_only=True)
class Point(Record):
    x: float
    y: float | None = field(default=0.0, metadata=on_disk(finite=True))  # null where not finite


@dataclass(frozen=True, kw_only=True)
class Stamp:
    """A class with its own on-disk form: one string."""

    text: str

    def to_json(self) -> str:
        return f"<{self.text}>"

    @classmethod
    def from_json(cls, data: Any) -> Stamp:
        return cls(text=data["s"])


@dataclass(frozen=True, kw_only=True)
class Drawing(Record):
    name: str = field(metadata=on_disk(key="title"))
    colour: Colour
    points: tuple[Point, ...]
    tags: tuple[str, ...]
    counts: Mapping[Kind, int]
    folder: Path | None
    anchor: Point | None = field(default=None, metadata=on_disk(none_as_empty=True))
    note: str | None = field(default=None, metadata=on_disk(omit_none=True))
    layer: int = field(default=1, metadata=on_disk(since=True))  # older files lack it
    by: str | None = field(default=None, metadata=on_disk(last=True))
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.layer < 0:
            raise FieldError("layer", f"is {self.layer}, below 0")


DRAWING = Drawing(
    name="d",
    colour=Colour.BLUE,
    points=(Point(x=1.5, y=math.inf), Point(x=2)),
    tags=("a", "b"),
    counts={Kind.MUST_FIX: 2, Kind.AUX: 1},
    folder=Path("/out/d"),
    by="gw0",
    extra={"gap": math.nan, "list": (1, 2)},
)


def test_a_record_is_its_fields_in_order_each_by_its_value():
    assert to_json(DRAWING) == {
        "title": "d",
        "colour": "blue",
        "points": [{"x": 1.5, "y": None}, {"x": 2, "y": 0.0}],  # y: finite or null
        "tags": ["a", "b"],
        "counts": {"must_fix": 2, "aux": 1},
        "folder": "/out/d",
        "anchor": {},  # None as an empty object
        "layer": 1,  # note: None is left out
        "extra": {"gap": math.nan, "list": [1, 2]},
        "by": "gw0",  # written last
    }
    assert to_json(DRAWING, null_nonfinite=True)["extra"]["gap"] is None


def test_a_record_reads_back_from_its_json():
    data = json.loads(json.dumps(to_json(DRAWING, null_nonfinite=True)))
    again = read(Drawing, data)
    points = (Point(x=1.5, y=None), Point(x=2))
    assert again == Drawing(**{**DRAWING.__dict__, "points": points, "extra": {"gap": None, "list": [1, 2]}})
    assert again.counts == {Kind.MUST_FIX: 2, Kind.AUX: 1} and isinstance(again.folder, Path)
    del data["layer"]
    assert read(Drawing, data).layer == 1  # a file written before the key existed


def test_a_field_at_its_default_is_left_out_where_its_form_says_so_and_reads_back():
    @dataclass(frozen=True, kw_only=True)
    class Counted(Record):
        name: str
        merged: int = field(default=0, metadata=on_disk(omit_default=True))

    assert to_json(Counted(name="a")) == {"name": "a"}  # files stay as they were before the field
    assert to_json(Counted(name="a", merged=3)) == {"name": "a", "merged": 3}
    assert read(Counted, {"name": "a"}) == Counted(name="a")
    assert read(Counted, {"name": "a", "merged": 3}).merged == 3


def test_a_class_may_order_its_fields_and_keep_its_own_form():
    @dataclass(frozen=True, kw_only=True)
    class Framed(Record):
        stamp: Stamp
        size: int
        JSON_FIELDS: ClassVar[tuple[str, ...]] = ("size", "stamp")

    framed = Framed(stamp=Stamp(text="t"), size=2)
    assert list(to_json(framed).items()) == [("size", 2), ("stamp", "<t>")]
    assert read(Framed, {"size": 2, "stamp": {"s": "t"}}) == framed
    assert Framed.from_json({"size": 2, "stamp": {"s": "t"}}) == framed and framed.to_json() == to_json(framed)


class Bad(Exception):
    pass


BAD = {
    "missing": (lambda d: d.pop("colour"), "colour is missing or not a string"),
    "wrong type": (lambda d: d.update(tags=[1]), "tags is missing or not a list of strings"),
    "nested": (lambda d: d["points"][1].pop("x"), r"points\[1\].x is missing or not a number"),
    "not an object": (lambda d: d["points"].__setitem__(0, 3), r"points\[0\] must be an object, got int"),
    "enum": (lambda d: d.update(colour="green"), "colour is 'green', not one of 'red', 'blue'"),
    "enum key": (lambda d: d["counts"].update(sometimes=1), "counts.sometimes is not one of 'must_fix'"),
    "renamed key": (lambda d: d.pop("title"), "title is missing or not a string"),
    "optional": (lambda d: d.update(folder=3), r"folder is missing or not a string \(or null\)"),
    "the record's own check": (lambda d: d.update(layer=-1), "layer is -1, below 0"),
}


@pytest.mark.parametrize(("edit", "message"), BAD.values(), ids=BAD.keys())
def test_a_bad_value_names_the_file_and_the_key(edit, message):
    data = json.loads(json.dumps(to_json(DRAWING, null_nonfinite=True)))
    edit(data)
    with pytest.raises(Bad, match=f"^/files/d.json: {message}"):
        read(Drawing, data, path="/files/d.json", error=Bad)
    with pytest.raises(ValueError, match=f"^{message}"):  # no file: the key alone
        read(Drawing, data)


def test_a_reader_is_the_mapping_it_reads():
    reader = Reader({"a": 1}, "top", "/f.json", Bad)
    assert dict(reader) == {"a": 1} and "a" in reader and len(reader) == 1
    with pytest.raises(Bad, match=r"^/f.json: top.b is missing$"):
        reader.object("b")


def test_a_view_is_a_declared_selection_of_a_record_s_fields():
    @dataclass(frozen=True, kw_only=True)
    class Step:
        index: int
        gap: float
        cost: float
        label: Colour

    Short = view(
        Step, "Short", ("gap", "index"), finite_fields=("gap",), doc="What a file keeps of a step.", module=__name__
    )
    short = Short.of(Step(index=3, gap=-math.inf, cost=2.0, label=Colour.RED))
    assert short == Short(gap=None, index=3) and Short.__doc__ == "What a file keeps of a step."
    assert list(short.to_json()) == ["gap", "index"] and read(Short, {"gap": 1.5, "index": 3}).gap == 1.5
    with pytest.raises(ValueError, match="index is missing or not an integer"):
        read(Short, {"gap": 1.5, "index": "3"})
    assert finite(math.nan) is None and finite(2) == 2.0


def test_the_records_read_a_certificate_and_a_run_file_without_numpy(tmp_path):
    data = Path(__file__).parent
    code = (
        "import json, sys\n"
        "from warp_check.certify.certificate import Certificate\n"
        "from warp_check.runs.result import RunResult\n"
        f"Certificate.read({str(data / 'certify/data/certificate-v1.json')!r})\n"
        f"runs = json.loads(open({str(data / 'runs/data/run-results.json')!r}).read())['runs']\n"
        "[RunResult.from_dict(run).to_dict() for run in runs]\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'torch', 'osqp', 'scipy'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
