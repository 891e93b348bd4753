"""Accessibility checks for the browser tests: axe-core (axe-playwright-python) in the page.

    from tests.e2e.a11y import assert_accessible
    assert_accessible(page)                     # the whole page, serious and critical fail
    assert_accessible(page, within="#gpu-map")  # one region only

A failure lists each violation with its rule, help text, and the first offending elements.
"""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

FAILING_IMPACTS = ("serious", "critical")
_AXE = Axe()


def violations(page: Page, *, within: str | None = None) -> list[dict[str, Any]]:
    """Axe's violations on the page as it is now (rules of WCAG 2.1 A and AA, and best
    practices), of any impact."""
    options = {"resultTypes": ["violations"]}
    results = _AXE.run(page, context=within, options=options)
    return list(results.response["violations"])


def assert_accessible(
    page: Page, *, within: str | None = None, impacts: tuple[str, ...] = FAILING_IMPACTS
) -> None:
    """No violation of the given impacts (serious or critical by default)."""
    found = [item for item in violations(page, within=within) if item["impact"] in impacts]
    assert not found, f"accessibility violations on {page.url}:\n" + describe(found)


def describe(found: list[dict[str, Any]]) -> str:
    lines = []
    for item in found:
        lines.append(f"- {item['id']} ({item['impact']}): {item['help']}")
        for node in item["nodes"][:3]:
            summary = node.get("failureSummary", "").splitlines()[-1:]
            lines.append(f"    {node['target']}: {' '.join(summary)}")
    return "\n".join(lines)
