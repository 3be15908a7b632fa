"""A traffic file read with the import readers, within bounds, and refused where it cannot show its budget."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from testkit.suite_builder import write_suite

from warp_check import SuiteError, TrafficSettings, load_suite, load_traffic, read_traffic
from warp_check.certificates.traffic.reading import SuiteTraffic, texts_needed
from warp_check.certificates.traffic.settings import TomlBeingRead
from warp_check.suite.loader import Suite
from warp_check.suite.toml_lines import SuiteToml


def csv_file(path: Path, texts: list[str], column: str = "sentence") -> Path:
    path.write_text(column + ",other\n" + "".join(f'"{t}",x\n' for t in texts), encoding="utf-8")
    return path


def test_any_import_format_and_column_is_read(tmp_path):
    path = csv_file(tmp_path / "traffic.csv", [f"review {i}" for i in range(50)] + ["review 3"])
    sample = read_traffic(TrafficSettings(path=path, text="sentence"))
    assert sample.rows == 51 and sample.duplicates == 1 and len(sample.bound) + len(sample.tune) == 50
    assert all(t.where.startswith(f"{path}:") for t in sample.bound)


def test_a_missing_column_names_the_file_and_line(tmp_path):
    path = csv_file(tmp_path / "traffic.csv", ["a", "b"])
    with pytest.raises(SuiteError) as caught:
        read_traffic(TrafficSettings(path=path, text="text"))
    assert caught.value.line == 2 and caught.value.field == "text"
    assert "columns here: sentence, other" in str(caught.value)


def test_a_format_the_name_does_not_tell_is_named_at_its_suite_key(tmp_path, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "traffic.txt").write_text("a\n", encoding="utf-8")
    folder = write_suite(tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right,
                         extra='[traffic]\npath = "traffic.txt"\nformat = "text"\n')  # fmt: skip
    with pytest.raises(SuiteError) as caught:
        load_traffic(load_suite(folder))
    assert caught.value.field == "traffic.format" and caught.value.line is not None and "csv" in str(caught.value)


def test_a_file_over_the_limits_is_refused_before_it_is_parsed_whole(tmp_path):
    # Over 512 MiB (a sparse file: no disk taken, and nothing read to refuse it)
    path = csv_file(tmp_path / "traffic.csv", [f"review {i}" for i in range(30)])
    with open(path, "r+b") as handle:
        handle.truncate((512 << 20) + 1)
    with pytest.raises(SuiteError, match="512 MiB is over the 512 MiB a traffic file may have: give a sample of it"):
        read_traffic(TrafficSettings(path=path, text="sentence"))
    # Over a million rows (2 MB of them)
    path.write_bytes(b"sentence\n" + b"r\n" * 1_000_001)
    with pytest.raises(SuiteError, match="1,000,001 rows is over the 1,000,000 a traffic file may have"):
        read_traffic(TrafficSettings(path=path, text="sentence"))
    path.write_text("sentence\n" + "".join(f"review {i}\n" for i in range(30)), encoding="utf-8")
    assert read_traffic(TrafficSettings(path=path, text="sentence")).rows == 30  # within both: read


def test_a_budget_too_few_texts_could_show_is_refused_with_the_count_it_needs(tmp_path):
    path = csv_file(tmp_path / "traffic.csv", [f"review {i}" for i in range(400)])
    with pytest.raises(SuiteError) as caught:
        read_traffic(TrafficSettings(path=path, text="sentence", max_change=0.01))
    need = texts_needed(0.01, 0.95)
    assert need == 299  # (1 − 0.01)^299 ≤ 0.05 < (1 − 0.01)^298
    assert f"needs at least {need:,} texts" in str(caught.value) and caught.value.field == "max_change"
    assert read_traffic(TrafficSettings(path=path, text="sentence", max_change=0.05)).max_change == 0.05


def test_a_suite_loads_its_traffic_without_its_own_cases(tmp_path, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    (tmp_path / "s").mkdir()
    texts = [c["text"] for c in wrong + right] + [f"unseen text {i}" for i in range(40)]
    csv_file(tmp_path / "s" / "traffic.csv", texts, column="text")
    folder = write_suite(tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right,
                         extra='[traffic]\npath = "traffic.csv"\n')  # fmt: skip
    sample = load_traffic(load_suite(folder))
    assert sample.in_suite == len({c["text"] for c in wrong + right}) and len(sample.bound) + len(sample.tune) == 40


def test_traffic_of_another_shape_than_the_suite_is_refused(tmp_path, distilbert_dir, tiny_split):
    wrong, right = tiny_split
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "traffic.csv").write_text("text,pair\n" + "".join(f"a {i},b\n" for i in range(20)))
    folder = write_suite(tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right,
                         extra='[traffic]\npath = "traffic.csv"\ntext_pair = "pair"\n')  # fmt: skip
    with pytest.raises(SuiteError, match="single texts, the traffic's are pairs") as caught:
        load_traffic(load_suite(folder))
    assert caught.value.field == "traffic.text_pair"


def stated(protocol: type) -> dict[str, list[str] | None]:
    """A protocol's members: a method's parameters (self left out), None for an attribute or property."""
    members: dict[str, list[str] | None] = dict.fromkeys(getattr(protocol, "__annotations__", {}))
    for name, member in vars(protocol).items():
        if not name.startswith("_"):
            members[name] = list(inspect.signature(member).parameters)[1:] if inspect.isfunction(member) else None
    return members


@pytest.mark.parametrize(("protocol", "real"), [(SuiteTraffic, Suite), (TomlBeingRead, SuiteToml)])
def test_what_cert4_states_of_a_suite_is_what_the_suite_loader_gives(
    protocol, real, tmp_path, distilbert_dir, tiny_split
):
    # Cert 4 stands below the suite loader and states what it reads of it; nothing type-checks that
    # statement, so a renamed member or argument of the loader's would otherwise show only at run time.
    wrong, right = tiny_split
    folder = write_suite(tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right)
    given = load_suite(folder) if real is Suite else SuiteToml(folder / "warp.toml")
    assert stated(protocol), protocol
    for name, parameters in stated(protocol).items():
        assert hasattr(given, name), f"{real.__name__} has no {name}"
        if parameters is not None:
            assert list(inspect.signature(getattr(given, name)).parameters)[: len(parameters)] == parameters, name
