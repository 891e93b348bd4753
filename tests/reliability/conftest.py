"""The fault suite's figures, printed at the end of the run (docs/reliability.md lists them)."""

from __future__ import annotations

from typing import Any

FIGURES: list[tuple[str, str]] = []


def figure(fault: str, text: str) -> None:
    """Keep a measured figure for the summary (and print it, for -s runs)."""
    FIGURES.append((fault, text))
    print(f"reliability figure: {fault}: {text}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for fault, text in FIGURES:
            terminalreporter.write_line(f"{fault}: {text}")
