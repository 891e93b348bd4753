"""The CEL environment of DRA device selectors: kubesim uses the shared `dracel` package.

`dracel` (standalone, cel-python only) is also what the portal checks selectors with, so a
selector the portal accepts is one kubesim, like kube-apiserver 1.34, accepts.
"""

from dracel import (
    CelError,
    compile_error,
    device_activation,
    expand_bind,
    holds,
    matches,
    parse_quantity,
)

__all__ = [
    "CelError",
    "compile_error",
    "device_activation",
    "expand_bind",
    "holds",
    "matches",
    "parse_quantity",
]
