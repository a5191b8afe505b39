"""Shared test setup: the private API server for tests marked ``apiserver``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.logs import JSONFormatter, KlogFormatter
from tests.apiserver import apiserver, current  # noqa: F401 - registers the session fixture
from tests.plugins.dynamic.promapi import FakePrometheus


@pytest.fixture(autouse=True)
def _apiserver_for_marked_tests(request: pytest.FixtureRequest) -> None:
    """A test marked ``apiserver`` gets the API server (or fails with "run make tools first")
    even when it does not ask for the fixture by name."""
    if request.node.get_closest_marker("apiserver") is not None:
        request.getfixturevalue("apiserver")


@pytest.fixture(autouse=True)
def _no_cli_log_handler_left() -> Iterator[None]:
    """A command's main() sets up the root logger on the stderr of its test (capsys); once
    that test is over the stream is closed, and anything logged before the next main()
    would fail to write. Each test starts without a handler of a previous main(), and with
    the root logger's level as it was (``logs.setup`` sets it)."""
    root = logging.getLogger()
    level = root.level
    yield
    for h in list(root.handlers):
        if isinstance(h.formatter, KlogFormatter | JSONFormatter):
            root.removeHandler(h)
    root.setLevel(level)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    """When a test that used the API server fails, show the end of the etcd/kube-apiserver logs."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and "apiserver" in getattr(item, "fixturenames", ()):
        cp = current()
        if cp is not None:
            rep.sections.append(("API server logs", cp.log_tails()))


@pytest.fixture
def fake_prom() -> Iterator[FakePrometheus]:
    """A local server speaking Prometheus's query API (tests/plugins/dynamic/promapi.py)."""
    server = FakePrometheus()
    try:
        yield server
    finally:
        server.close()
