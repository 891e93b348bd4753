"""The web processes as shipped have a thread for each request they let wait and 16 more for
the requests that do not wait (a login beside someone's many open pages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("Dockerfile", "deploy/base/web.yaml", "docker-compose.yml", "bench/flow_product.py")
THREADS = re.compile(r"""["']?--threads["']?,?\s+["']?(\d+)""")


@pytest.mark.parametrize("where", SHIPPED)
def test_it_leaves_threads_free_beside_the_waiters(where: str) -> None:
    found = THREADS.findall((ROOT / where).read_text())
    assert found, f"no --threads in {where}"
    assert all(int(threads) >= settings.LIVE_WAITERS_MAX + 16 for threads in found)
