"""pytest plugin entry point (registered as ``pytest11: warp``).

Collects every ``warp.toml`` under the paths pytest is given; each must_fix / must_keep case
is a test item named by its id. ``--warp-repair`` repairs and asserts the certificates,
``--warp-certificate`` audits a certified model. Hooks stay a few lines: the work is in
``warp_check`` (the core) and in this package's state, items and summary modules.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from warp_check import WarpError, write_report
from warp_check.frontend import SUITE_FILE, check_report_destination, ctrl_c_never_lost

from . import record, shutdown
from .items import REFUSED, RESULT, ROW_VERDICTS, TRAFFIC_VERDICT, VERDICT, CaseItem, SuiteFile, SuiteItem, TrafficItem
from .options import add_options, read_options
from .state import CTRL_C, STATE, WarpSession
from .summary import add_to_junit, lines


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    shutdown.session_opened()
    state = WarpSession(config, read_options(config))
    if state.options["report"] is not None:
        try:
            check_report_destination(state.options["report"])
        except WarpError as exc:
            raise pytest.UsageError(f"--warp-report: {exc}") from None
    config.stash[STATE] = state
    config.pluginmanager.register(state, "warp-session")  # for pytest_runtest_logreport
    record.register(config, state.options["record"])
    config.addinivalue_line("markers", "must_fix: a warp-check case the model must be fixed on")
    config.addinivalue_line("markers", "must_keep: a warp-check case the model must keep getting right")
    config.addinivalue_line("markers", "deferred: a must_fix case a traffic budget could not buy (a known failure)")


# Last: around pytest's own unraisable hook, which would keep a dropped Ctrl-C as a warning and run on
# (pytest reads hooks only from names that start with pytest_).
@pytest.hookimpl(trylast=True, specname="pytest_configure")
def pytest_configure_ctrl_c(config: pytest.Config) -> None:
    config.stash[CTRL_C] = stack = contextlib.ExitStack()
    stack.enter_context(ctrl_c_never_lost())


def pytest_unconfigure(config: pytest.Config) -> None:
    if CTRL_C in config.stash:
        config.stash[CTRL_C].close()
    record.unregister(config)
    state = config.stash.get(STATE, None)
    if state is not None and config.pluginmanager.is_registered(state):
        config.pluginmanager.unregister(state)
    shutdown.session_closed()


def pytest_report_header(config: pytest.Config) -> str | None:
    options = config.stash[STATE].options
    return f"warp-check: {options.mode} mode" if options.given else None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return True if is_symlink_loop(collection_path) else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    if file_path.name == SUITE_FILE and parent.config.stash[STATE].first_visit(file_path):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def is_symlink_loop(path: Path) -> bool:
    """A symlink to a folder that holds it (``loop -> .``, ``up -> ..``, or through other links):
    pytest follows it, and would walk the same tree again until the system refuses the path."""
    if not path.is_symlink():
        return False
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # the system's own "too many levels of symbolic links"
        return True
    return target.is_dir() and any(folder.resolve() == target for folder in path.parents)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    options = config.stash[STATE].options
    suites = {item.parent.path for item in items if isinstance(item, CaseItem)}
    if options["repair"] and options["out"] is not None and len(suites) > 1:
        raise pytest.UsageError(
            f"--warp-out names one folder but {len(suites)} suites would be repaired into it; "
            "run them one at a time, or leave out --warp-out (each suite then writes <suite>/.warp/repaired)"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "setup" and isinstance(item, SuiteItem) and REFUSED in item.stash:
        report.warp_refused = item.stash[REFUSED]  # to the xdist controller, for the session's exit code
    if call.when == "call" and isinstance(item, CaseItem) and VERDICT in item.stash:
        verdict = item.stash[VERDICT]
        report.warp_case = verdict.to_dict()  # plain data: it travels with the report to the xdist controller
        if ROW_VERDICTS in item.stash:  # a sentence: every word's verdict, for the summary and the report
            report.warp_cases = [v.to_dict() for v in item.stash[ROW_VERDICTS]]
        report.warp_run = item.config.stash[STATE].run_summary(verdict.suite)
    if call.when == "call" and isinstance(item, TrafficItem) and TRAFFIC_VERDICT in item.stash:
        suite = item.stash[RESULT].suite
        report.warp_traffic = {"suite": suite, "verdict": item.stash[TRAFFIC_VERDICT].to_dict()}
        report.warp_run = item.config.stash[STATE].run_summary(suite)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session):
    done = yield
    shutdown.tests_done()  # not after an interrupt: a second Ctrl-C may still end a slow shutdown
    add_to_junit(session.config, session.config.stash[STATE])  # before --junitxml writes its file
    return done


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash[STATE]
    if state.is_worker:
        return
    if state.refused:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR  # an input the core refused: the command's exit 2
    if state.options["report"] is None:
        return
    if not state.runs:
        state.report_error = "no warp-check case ran"
        return
    try:
        state.report_path = write_report(state.options["report"], state.report_runs())
    except (OSError, WarpError) as exc:
        state.report_error = str(exc)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR  # asked for and not written: the run did not do its job


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    text = lines(config.stash[STATE])
    if text:
        terminalreporter.write_sep("=", "warp-check")
        for line in text:
            terminalreporter.write_line(line)
