"""docs/operations.md stays complete: every environment variable the settings read is in its
configuration reference (and nothing there is read by nobody), every one it marks secret goes
in the Secret its install step makes, and its links to its own sections lead somewhere."""

from __future__ import annotations

import ast
import re

from tests.deploy.rendering import ROOT

DOC = (ROOT / "docs" / "operations.md").read_text()
# portal/settings.py and the modules it gathers settings from; env.py holds the helpers.
SETTINGS = [ROOT / "portal" / "env.py", *sorted((ROOT / "portal").glob("*settings.py"))]


def _env_helpers(tree: ast.Module) -> set[str]:
    """The settings' own functions that read the variable named by their first argument."""
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.args.args
        and ("os.getenv(" in ast.unparse(node) or "os.environ" in ast.unparse(node))
    }


def _read_name(node: ast.AST, helpers: set[str]) -> str | None:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
        return node.slice.value if isinstance(node.slice, ast.Constant) else None
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return None
    function = ast.unparse(node.func)
    if function in ("os.getenv", "os.environ.get") or function in helpers:
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def variables_read() -> set[str]:
    trees = [ast.parse(path.read_text()) for path in SETTINGS]
    helpers = set().union(*map(_env_helpers, trees))
    nodes = [node for tree in trees for node in ast.walk(tree)]
    return {name for node in nodes if (name := _read_name(node, helpers))}


def reference_section() -> str:
    start = DOC.index("## Configuration reference")
    return DOC[start : DOC.index("\n## ", start + 1)]


def documented() -> set[str]:
    rows = [line for line in reference_section().splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_it_finds_the_variables_the_settings_read() -> None:
    read = variables_read()
    assert {"SECRET_KEY", "DATABASE_URL", "READYZ_TIMEOUT_SECONDS", "API_THROTTLE_USER"} <= read


def test_it_documents_every_variable_the_settings_read() -> None:
    assert sorted(variables_read() - documented()) == []


def test_it_documents_no_variable_nobody_reads() -> None:
    assert sorted(documented() - variables_read()) == []


def test_its_links_to_its_own_sections_lead_somewhere() -> None:
    anchors = {slug(line.lstrip("#")) for line in DOC.splitlines() if line.startswith("#")}
    links = set(re.findall(r"\]\(#([^)]+)\)", DOC))
    assert links and links <= anchors, links - anchors
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert set(re.findall(r"\(operations\.md#([^)]+)\)", deploy)) <= anchors


def test_it_puts_every_secret_setting_in_the_secret_it_makes() -> None:
    rows = [line.split("|")[1] for line in reference_section().splitlines() if "**Secret**" in line]
    secret = {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}
    assert {"SECRET_KEY", "METRICS_TOKEN", "OIDC_RP_CLIENT_SECRET"} <= secret
    start = DOC.index("create secret generic gpu-portal-secrets")
    step = DOC[start : DOC.index("```", start)]
    assert sorted(secret - set(re.findall(r"--from-literal=([A-Z0-9_]+)=", step))) == []
