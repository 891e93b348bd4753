"""A short memory of GPU metrics: the claim page and the GPU map read them on every live
refresh (every few seconds, per viewer). Kept in Django's cache for UTILISATION_CACHE_SECONDS
under a key made of everything the answer depends on (the source's URL, the query's
selector, the span's start); a miss still asks within UTILISATION_TIMEOUT as before, and a
"no data" answer is kept too, so a Prometheus that is down is not asked by every refresh."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

T = TypeVar("T")
PREFIX = "gpu-metrics:"


def remembered(parts: tuple[object, ...], compute: Callable[[], T]) -> T:
    seconds = float(settings.UTILISATION_CACHE_SECONDS)
    if seconds <= 0:
        return compute()
    key = PREFIX + hashlib.sha256(repr(parts).encode()).hexdigest()
    found = cache.get(key)
    if found is not None:
        return found
    value = compute()
    cache.set(key, value, seconds)
    return value
