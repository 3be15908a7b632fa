"""The site's reference pages, rendered from the code each time MkDocs builds: no page holds a copy.

A page asks for a part with a marker on a line of its own, ``<!-- warp:reference NAME -->``; this
hook replaces it with the markdown :data:`RENDERERS` makes of the code as it is:

- ``options``: every option of :data:`warp_check.options.OPTIONS` and every run mode's (pytest flag,
  ini key, ``warp-check`` flag, warp.toml key, value kind, default, help);
- ``commands``: every ``warp-check`` command from the parser (``warp_check.cli.build_parser``);
- ``warp-toml``: every table and key ``warp-check init`` writes, with its default and note, and the file;
- ``certificate``: the fields of ``warp_certificate.json``, record by record, from their dataclasses;
- ``api``: a mkdocstrings block per public name of ``warp_check`` (its table ``_PUBLIC``);
- ``readme-python-api``: the README's Python examples (tests/test_readme_api.py runs them), on the home page.

It also sets the site's URL from ``warp_check.version.DOCS_URL`` (the one place the help texts read it
from), and puts the report page's screenshot on the tutorial where ``WARP_DOCS_SCREENSHOT`` names the
PNG a headless browser took of it (tests/docs/test_site.py does, before it builds the site).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the checkout's code, whichever warp-check is installed
    sys.path.insert(0, str(REPO))

MARKER = re.compile(r"^<!-- warp:reference ([a-z-]+) -->$", re.MULTILINE)
SCREENSHOT_MARKER = "<!-- warp:report-screenshot -->"
SCREENSHOT_PATH = "assets/report.png"


def _cell(text: object) -> str:
    """``text`` in one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object) -> str:
    return f"`{text}`" if text not in (None, "") else "—"


def _table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


# -- options -------------------------------------------------------------------------------------


def _settings_records() -> dict[str, type]:
    from warp_check.certificates.traffic.settings import TrafficSettings
    from warp_check.repair.settings import RepairSettings
    from warp_check.suite.model_source import ModelSettings

    return {"model": ModelSettings, "repair": RepairSettings, "traffic": TrafficSettings}


def _toml_default(toml: str | None) -> str:
    """The default of the warp.toml key an option overrides, as warp.toml writes it."""
    if toml is None:
        return "—"
    from warp_check.suite.template import toml_value

    section, key = toml.split(".")
    record = _settings_records()[section]
    for one in dataclasses.fields(record):
        if one.name == key:
            if one.default is not dataclasses.MISSING:
                value = one.default
            elif one.default_factory is not dataclasses.MISSING:
                value = one.default_factory()
            else:
                return "—"
            try:
                return f"`{toml_value(value)}` (warp.toml)" if value is not None else "unset (warp.toml)"
            except TypeError:
                return f"`{value}` (warp.toml)"
    return "— (warp.toml)"


def all_options() -> tuple:
    """Every option a user can give: the declared ones, then each run mode's own."""
    from warp_check import frontend

    options = list(frontend.OPTIONS)
    for mode in frontend.MODES:
        if mode.selected_by is not None and mode.selected_by not in options:
            options.append(mode.selected_by)
    return tuple(options)


def render_options() -> str:
    """A table to find an option by its flag, then a section per option (its anchor: the flag's words)."""
    rows, sections = [], []
    for option in all_options():
        name = option.flag if option.in_pytest else option.cli[0]
        kind = option.kind.value + (f" (`{option.metavar}`)" if option.metavar else "")
        default = _toml_default(option.toml) if option.toml else ("off" if option.kind.value == "flag" else "not given")
        anchor = name.lstrip("-")
        rows.append(
            (f"[`{name}`](#{anchor})", ", ".join(f"`{flag}`" for flag in option.cli) or "—", _code(option.toml))
        )
        facts = [
            ("pytest flag", _code(option.flag) if option.in_pytest else "— (the `warp-check` command only)"),
            ("ini key", _code(option.ini) if option.in_pytest else "—"),
            ("`warp-check` flag", ", ".join(f"`{flag}`" for flag in option.cli) or "— (pytest only)"),
            ("warp.toml key it overrides", _code(option.toml)),
            ("value", kind),
            ("default", default),
        ]
        sections += [
            f"## `{name}` {{#{anchor}}}",
            "",
            option.help if option.in_pytest else (option.cli_help or option.help),
        ]
        if option.in_pytest and option.cli_help and option.cli_help != option.help:
            sections += ["", f"`warp-check`'s words: {option.cli_help}"]
        sections += ["", *(f"- **{label}**: {value}" for label, value in facts), ""]
    return "\n".join([_table(("option", "warp-check flag", "warp.toml key"), rows), "", *sections])


# -- commands ------------------------------------------------------------------------------------


def _option_anchors() -> dict[str, str]:
    """Each ``warp-check`` flag of a declared option, and the anchor of its section on the options page."""
    anchors = {}
    for option in all_options():
        name = option.flag if option.in_pytest else option.cli[0]
        anchors |= {flag: name.lstrip("-") for flag in option.cli}
    return anchors


def _argument_rows(parser: argparse.ArgumentParser) -> list[tuple[object, ...]]:
    rows = []
    for action in parser._actions:  # argparse keeps a parser's arguments here, in --help's order
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        documented = _option_anchors()
        name = ", ".join(
            f"[`{flag}`](options.md#{documented[flag]})" if flag in documented else f"`{flag}`"
            for flag in action.option_strings
        )
        name = name or f"`{action.metavar or action.dest}`"
        value = action.metavar or (", ".join(map(str, action.choices)) if action.choices else "")
        if action.nargs == 0:
            value = "flag"
        default = action.default
        shown_default = "—" if default in (None, False, argparse.SUPPRESS) else f"`{default}`"
        required = "required" if action.required and action.option_strings else ""
        rows.append((name, _code(value) if value != "flag" else "flag", shown_default, required, action.help or ""))
    return rows


def render_commands() -> str:
    from warp_check.cli import build_parser, commands

    parser = build_parser()
    out = [
        "Exit codes of every command: 0, everything holds; 1, a case or a certificate fails; 2, a usage "
        "or input error (pytest's exit 4 for the same refusals).",
        "",
    ]
    for command in commands():
        sub = parser.commands[command.name]
        out += [f"## `warp-check {command.name}`", "", _cell(command.help) + ".", ""]
        if getattr(command, "description", None):
            out += [_cell(command.description), ""]
        usage = " ".join(sub.format_usage().split())
        out += ["```text", usage.removeprefix("usage: "), "```", ""]
        out += [_table(("argument", "value", "default", "", "what it does"), _argument_rows(sub)), ""]
    return "\n".join(out)


# -- warp.toml -----------------------------------------------------------------------------------


def _type_name(annotation: object) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return text.replace("typing.", "")


def render_warp_toml() -> str:
    from warp_check.model.hub_cache import ModelSource
    from warp_check.suite import template
    from warp_check.suite.init import suite_toml

    out = []
    for table in template.tables():
        out += [f"### `[{table.name}]`", "", _cell(table.note), ""]
        fields = {one.name: one for one in dataclasses.fields(table.record)}
        rows = []
        for key in table.keys():
            one = fields[key]
            default = template._default(one)
            if key in table.spelt:
                default = table.spelt[key](default)
            try:
                shown = "unset" if default is None or default == () else f"`{template.toml_value(default)}`"
            except TypeError:
                shown = f"`{default}`"
            rows.append((f"`{key}`", _type_name(one.type), shown, table.notes.get(key, "")))
        out += [_table(("key", "type", "default", "what it sets"), rows), ""]
    example = suite_toml(Path("/work/reviews"), ModelSource(folder=Path("/work/models/sentiment")), WRITTEN_LABELS)
    out += [
        "## The file `init` writes",
        "",
        "`warp-check init reviews --model models/sentiment` on a two-label sentiment model writes this "
        "file: every table a suite reads with each key at its default and a note (a line starting with "
        "`#` is a setting left unset; `[traffic]` is commented out, as it needs a file of texts).",
        "",
        "<!-- block: output (rendered from warp_check.suite.init.suite_toml when the site is built) -->",
        "```toml",
        example.rstrip("\n"),
        "```",
    ]
    return "\n".join(out)


WRITTEN_LABELS = {0: "negative", 1: "positive"}


# -- the certificate -----------------------------------------------------------------------------


def _field_notes(record: type) -> dict[str, str]:
    """Each field's comment in the record's source: on its line, or the lines just above it."""
    try:
        source = inspect.getsource(record)
    except (OSError, TypeError):
        return {}
    notes: dict[str, str] = {}
    above: list[str] = []
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        found = re.match(r"^    ([a-z_][a-z0-9_]*): ([^=#]+?)(?:\s*=.*?)?(?:\s*#\s*(.*))?$", line)
        if found and not line.startswith("     "):
            notes[found[1]] = " ".join([*above, found[3] or ""]).strip()
        above = [] if not stripped.startswith("#") else above
    return notes


# How a field's serial.Form says it is written, in words.
_WRITTEN = {
    "since": "absent from older files",
    "omit_none": "left out when null",
    "omit_default": "left out at its default",
    "not_null": "never null on disk",
}


def _records() -> list[tuple[str, type]]:
    from warp_check.certify import certificate as module

    names = ["Certificate", "ModelRecord", "RepairRecord", "Lipschitz", "CaseRecord", "Summary"]
    names += ["ParentRecord", "BaselineRecord", "TrafficRecord", "TrafficChange", "GsnFtSummary", "FurtherClaim"]
    return [(name, getattr(module, name)) for name in names]


def render_certificate() -> str:
    from warp_check.certify import certificate as module

    out = [
        f"The file is `{module.CERTIFICATE_NAME}`, format `{module.FORMAT}`: a JSON object whose first key "
        "is `format`, then the fields of `Certificate` below, each record's fields in this order.",
        "",
    ]
    records = _records()
    named = {name for name, _ in records}

    def linked(kind: str) -> str:
        """The field's type, each record of this page a link to its table, the settings to warp.toml's."""
        kind = re.sub(r"\b(" + "|".join(named) + r")\b", lambda m: f"[{m[1]}](#{m[1].lower()})", kind)
        return kind.replace("RepairSettings", "[RepairSettings](warp-toml.md#repair)")

    for name, record in records:
        doc = inspect.getdoc(record) or ""
        out += [f"### `{name}`", "", _cell(doc.split("\n\n")[0]), ""]
        notes = _field_notes(record)
        rows = []
        for one in dataclasses.fields(record):
            form = next(iter(one.metadata.values()), None) if one.metadata else None  # serial.on_disk's Form
            when = [words for flag, words in _WRITTEN.items() if form is not None and getattr(form, flag, False)]
            rows.append((f"`{one.name}`", linked(_type_name(one.type)), notes.get(one.name, ""), "; ".join(when)))
        out += [_table(("field", "type", "what it holds", "written"), rows), ""]
    return "\n".join(out)


# -- the Python API ------------------------------------------------------------------------------


# The names a first script uses (the home page's examples), listed first on the API page.
START_HERE = (
    "load_suite", "load_adapter", "check", "repair_suite", "verify", "Certificate",
    "ClassifierAdapter", "Case", "repair_cases", "RepairSettings",
)  # fmt: skip


def render_api() -> str:
    import warp_check

    out = [
        "**Start here**: " + ", ".join(f"[`{name}`][{_where(name, warp_check._PUBLIC[name])}]" for name in START_HERE),
        "",
    ]
    by_module: dict[str, list[tuple[str, str]]] = {}
    for name, where in warp_check._PUBLIC.items():
        module, _, attribute = where.partition(":")
        by_module.setdefault(module, []).append((name, attribute or name))
    for module in sorted(by_module):
        out += [f"## `{module}`", ""]
        for public, attribute in sorted(by_module[module]):
            value = getattr(warp_check, public)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                out += [f"### `{public}`", "", f"A constant: `{_cell(repr(value))[:120]}`.", ""]
                continue
            alias = "" if public == attribute else f" (`warp_check.{public}`)"
            out += [f"::: {module}.{attribute}", "    options:", "      heading_level: 3", ""]
            if alias:
                out += [f"Public as{alias}.", ""]
    return "\n".join(out)


def render_readme_api() -> str:
    """The front page's "The Python API" section (tests/test_readme_api.py runs its examples), its
    links made the site's."""
    from warp_check.version import DOCS_URL

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The Python API") :]
    section = section[section.index("\n") : section.index("\n## ", 1)].strip("\n")
    return section.replace(f"]({DOCS_URL}reference/python-api/)", "](reference/python-api.md)")


def _where(name: str, table_entry: str) -> str:
    """Where public ``name`` is defined, as a dotted identifier (its table entry: ``module`` or
    ``module:attribute``)."""
    module, _, attribute = table_entry.partition(":")
    return f"{module}.{attribute or name}"


RENDERERS: dict[str, Callable[[], str]] = {
    "options": render_options,
    "commands": render_commands,
    "warp-toml": render_warp_toml,
    "certificate": render_certificate,
    "api": render_api,
    "readme-python-api": render_readme_api,
}


def render(markdown: str) -> str:
    """``markdown`` with each reference marker replaced by what the code says now."""

    def one(found: re.Match[str]) -> str:
        if found[1] not in RENDERERS:
            raise ValueError(f"unknown reference part {found[1]!r}: one of {', '.join(RENDERERS)}")
        return RENDERERS[found[1]]()

    return MARKER.sub(one, markdown)


# -- MkDocs' hooks -------------------------------------------------------------------------------


def on_config(config):
    from warp_check.version import DOCS_URL

    config["site_url"] = DOCS_URL
    return config


def on_page_markdown(markdown, page, config, files):
    markdown = render(markdown)
    if SCREENSHOT_MARKER in markdown:
        shot = os.environ.get("WARP_DOCS_SCREENSHOT")
        depth = "../" * page.file.src_uri.count("/")
        if shot:
            image = (
                f"![A report page (a repair of 12 must_fix and 30 must_keep cases, a check against a baseline), "
                f"taken by headless Chromium when this site was built]({depth}{SCREENSHOT_PATH})"
            )
        else:
            image = (
                '!!! note "Screenshot"\n    This build has no screenshot of the page: tests/docs/test_site.py takes '
                "it with headless Chromium (WARP_DOCS_SCREENSHOT) when CI builds the site."
            )
        markdown = markdown.replace(SCREENSHOT_MARKER, image)
    return markdown


def on_files(files, config):
    shot = os.environ.get("WARP_DOCS_SCREENSHOT")
    if shot:  # a file of the site, so pages link it by its path and MkDocs copies it
        from mkdocs.structure.files import File

        files.append(File.generated(config, SCREENSHOT_PATH, abs_src_path=shot))
    return files


__all__ = ["RENDERERS", "all_options", "render", "on_config", "on_page_markdown", "on_files"]
