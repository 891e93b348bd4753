"""What a long-running process loaded at start is set aside from the garbage collector.

Django, DRF, Celery and the Kubernetes client (a class per API object) leave a few hundred
thousand objects behind at start that live as long as the process. CPython's full
collection walks every one of them: measured with the flow bench on 2 cores, each took 90-220
ms, several times a minute in each of the web, worker and cluster-loop processes, and a
request or a watch event that met one waited that long. gc.freeze() moves them to a
permanent generation no collection walks (CPython's advice for long-lived processes); what
requests and passes make afterwards is collected as before.

Called once each: portal/wsgi.py (a web process), portal/celery.py (a worker, once ready)
and the cluster loop's command (claims/management/commands/follow_clusters.py, which does
the same two lines: claims does not import portal).
"""

from __future__ import annotations

import gc


def set_aside() -> None:
    """Collect once, then move every object alive now out of the collector's way."""
    gc.collect()
    gc.freeze()
