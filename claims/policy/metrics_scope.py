"""What an admin may give as a cluster's Prometheus (Cluster.prometheus_url,
prometheus_selector): the one check the registration form, the API and Django's admin use.

The selector is PromQL label matchers, as inside `{...}`: `cluster="lab"` or
`cluster="lab",region=~"eu-.*"` (a label name, `=`, `!=`, `=~` or `!~`, a double-quoted
string), added to every query the portal makes of that cluster's metrics.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

_STRING = r'"(?:[^"\\\n]|\\.)*"'
_MATCHER = rf"\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*{_STRING}\s*"
SELECTOR = re.compile(rf"{_MATCHER}(?:,{_MATCHER})*,?\s*")


def url_problem(text: str) -> str:
    """Why `text` is not a Prometheus base URL ("" when it is, or is empty)."""
    if not text:
        return ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _("Give an http:// or https:// URL, e.g. http://prometheus.monitoring:9090.")
    if parts.query or parts.fragment:
        return _("Give the server's base URL, without a query or fragment.")
    return ""


def selector_problem(text: str) -> str:
    """Why `text` is not PromQL label matchers ("" when it is, or is empty)."""
    if not text or SELECTOR.fullmatch(text):
        return ""
    return _('Give PromQL label matchers, e.g. cluster="lab" (name, =, !=, =~ or !~, "value").')
