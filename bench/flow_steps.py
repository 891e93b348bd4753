"""What the kubectl and portal flows share: each step timed, and the CUDA samples' logs checked."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

# Seconds each step of each flow took, by "phase: step" (appended to from the flows' threads).
STEPS: defaultdict[str, list[float]] = defaultdict(list)


@contextmanager
def step(namespace: str, name: str) -> Iterator[None]:
    """Time one step of a flow, under its phase (the namespace without its number)."""
    started = time.perf_counter()
    yield
    STEPS[f"{namespace.rsplit('-', 1)[0]}: {name}"].append(time.perf_counter() - started)


def has_ending(container: str, text: str) -> bool:
    return ("Test PASSED" if container == "ctr0" else "Result = PASS") in text


def check_log(container: str, text: str) -> None:
    if not has_ending(container, text):
        raise RuntimeError(f"{container} log does not end as the CUDA sample does: {text[-200:]!r}")
