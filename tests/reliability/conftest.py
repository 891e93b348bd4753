"""The fault suite: marked `reliability` (run it alone with `pytest -m reliability`); its
figures are printed at the end of the run (docs/reliability.md lists them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

FIGURES: list[tuple[str, str]] = []
HERE = Path(__file__).parent


def figure(fault: str, text: str) -> None:
    """Keep a measured figure for the summary (and print it, for -s runs)."""
    FIGURES.append((fault, text))
    print(f"reliability figure: {fault}: {text}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reliability: the fault suite (docs/reliability.md)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.reliability)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for fault, text in FIGURES:
            terminalreporter.write_line(f"{fault}: {text}")
