"""Every recorded request of a real kube-apiserver v1.34.9 (../shared/reference/apiserver-1.34)
against kubesim started in the recordings' shape: same status, Content-Type, Warning headers
and normalised body. A step that differs for a stated reason is listed in
replay_known_differences.yaml; it is an xfail that fails once it passes (strict), so the
list only shrinks."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from tests.kubesim.replay import load, replay, scenario_files

KNOWN = yaml.safe_load((Path(__file__).parent / "replay_known_differences.yaml").read_text())
FILES = scenario_files()

pytestmark = pytest.mark.skipif(not FILES, reason="the reference recordings are not checked out")


@functools.cache
def results(name: str) -> dict[str, str | None]:
    return replay(next(path for path in FILES if path.stem == name))


def _cases() -> list:
    cases = []
    for path in FILES:
        known = (KNOWN or {}).get(path.stem) or {}
        for step in load(path)["steps"]:
            reason = known.get(step["id"])
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            cases.append(
                pytest.param(path.stem, step["id"], marks=marks, id=f"{path.stem}:{step['id']}")
            )
    return cases


@pytest.mark.parametrize(("scenario", "step"), _cases())
def test_kubesim_answers_like_the_recording(scenario: str, step: str) -> None:
    problem = results(scenario)[step]
    assert problem is None, problem


def test_every_known_difference_names_a_recorded_step() -> None:
    steps = {path.stem: {s["id"] for s in load(path)["steps"]} for path in FILES}
    for scenario, entries in (KNOWN or {}).items():
        assert scenario in steps, scenario
        for step, reason in entries.items():
            assert step in steps[scenario], f"{scenario}:{step}"
            assert reason and len(reason) > 30, f"{scenario}:{step} needs a specific reason"
