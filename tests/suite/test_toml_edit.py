"""warp.toml edited line by line: keys set where they are, comments and layout kept."""

from __future__ import annotations

import pytest

from warp_check.suite.toml_lines import TomlEdit, edited_toml

TEXT = """# top comment
[model]
path = "m"  # the model

[repair]   # our settings
gamma_s = 1.0   # margin, with a '#' inside: "x # y"
rank = 2
"""


def test_a_key_is_set_in_place_and_comments_stay():
    text = edited_toml(TEXT, [TomlEdit(table="repair", key="gamma_s", value=0.5)])
    assert text == TEXT.replace("gamma_s = 1.0   #", "gamma_s = 0.5  #")


def test_new_keys_go_after_their_table_and_new_tables_at_the_end():
    edits = [
        TomlEdit(table="repair", key="mu", value=1000.0),
        TomlEdit(table="repair.neighbours", key="per_case", value=4),
    ]
    text = edited_toml(TEXT, edits, cases=("g.jsonl", "must_keep"))
    assert text.startswith(TEXT.replace("rank = 2\n", "rank = 2\nmu = 1000.0\n"))
    assert text.endswith('[repair.neighbours]\nper_case = 4\n\n[[cases]]\npath = "g.jsonl"\nkind = "must_keep"\n')


def test_a_dotted_key_in_the_parent_table_is_the_one_set():
    text = edited_toml(
        "[repair]\nneighbours.per_case = 8 # copies\n", [TomlEdit(table="repair.neighbours", key="per_case", value=4)]
    )
    assert text == "[repair]\nneighbours.per_case = 4  # copies\n"


def test_an_inline_table_is_refused():
    with pytest.raises(ValueError, match=r"\[repair.neighbours\] is written inline"):
        edited_toml(
            "[repair]\nneighbours = { per_case = 8 }\n", [TomlEdit(table="repair.neighbours", key="per_case", value=4)]
        )
