"""How much a user may send: one set of numbers for the web forms and the API alike.

The services check what a value means (a DNS-1123 name, a CEL selector that parses); these
caps only stop a form or a body from carrying more than any legitimate request needs.
"""

from __future__ import annotations

# A name field accepts up to a DNS-1123 subdomain's length, so a name that is merely too
# long gets the service's explanation (at most 63 characters) rather than a bare cap.
NAME_MAX_CHARS = 253
DEVICE_CLASS_MAX_CHARS = 253
# The API server refuses a longer CEL selector (CELSelectorExpressionMaxLength, in bytes);
# a character cap this size never refuses a selector the cluster accepts.
SELECTOR_MAX_BYTES = 10 * 1024
PURPOSE_MAX_CHARS = 5000
REASON_MAX_CHARS = 1000

# Request bodies are flat objects; deeper nesting is refused before it is decoded.
JSON_MAX_DEPTH = 32

# The API's pages, and how many pending requests of each kind a page of approvals lists
# (each row carries its decision forms and feasibility: 25 keep a page near 60 KB).
API_PAGE_SIZE = 50
API_MAX_PAGE_SIZE = 1000
APPROVALS_PAGE_SIZE = 25
# The age filter of the queue goes back at most a year.
APPROVALS_MAX_AGE_HOURS = 24 * 366


def largest_legitimate_body() -> int:
    """Bytes of the largest request the portal expects: a claim with every text field at its
    cap, each character sent at its costliest (12 bytes: a surrogate pair of JSON escapes, or
    4 UTF-8 bytes as %XX in a form), plus room for the rest."""
    chars = NAME_MAX_CHARS + DEVICE_CLASS_MAX_CHARS + SELECTOR_MAX_BYTES + PURPOSE_MAX_CHARS
    return chars * 12 + 4096
