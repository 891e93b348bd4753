"""What a verification run says about its GPU, in one word and why: `passed` alone is null both
while the samples run and when their verdict will never come (a log the cluster would not give
until the portal gave up, a run ended before the samples did); the two must not look alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

PASSED, FAILED, UNKNOWN, PENDING = "passed", "failed", "unknown", "pending"
VERDICTS = (PASSED, FAILED, UNKNOWN, PENDING)


@dataclass(frozen=True)
class Verdict:
    code: str  # one of VERDICTS
    reason: str = ""  # why the verdict is unknown or still to come; "" otherwise


def run_verdict(run: Any) -> Verdict:
    """The verdict of a VerificationRun (its passed, state and log reading fields)."""
    if run.passed is True:
        return Verdict(PASSED)
    if run.passed is False:
        return Verdict(FAILED)
    if not run.is_final:
        return Verdict(PENDING)
    if run.log_error and run.log_retry_until:
        reason = _("the log could not be read yet: %(error)s; the portal is trying again")
        return Verdict(PENDING, reason % {"error": run.log_error})
    if run.log_error:
        return Verdict(
            UNKNOWN, _("the log could not be read: %(error)s") % {"error": run.log_error}
        )
    return Verdict(UNKNOWN, _("the run ended before the samples gave a verdict"))
