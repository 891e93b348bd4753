"""What a feasibility check found about a claim (Feasibility, made by feasibility.py) and its
words for people: one statement the form, the approval queue and the API all show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import ngettext


@dataclass(frozen=True)
class Feasibility:
    """What the cluster can give a claim. `summary` is its one statement for people, the same
    on the form, the approval queue and the API; `count_problem` what is wrong with the count
    alone, for the count field."""

    device_class: str
    matching: int  # devices of the class (and selector) in the cluster
    max_on_one_node: int
    best_node: str
    free_on_best_node: int  # the most free matching devices on one node now
    free_in_cluster: int
    selector: str
    # False: the selector fails to evaluate on `unevaluated` of the `of_class` devices (an
    # attribute they do not publish, a comparison CEL has no overload for). The scheduler
    # stops the allocation on such a device ("CEL runtime error"), so nothing is promised:
    # `matching` counts only the devices it holds for, and `possible` is None (not known).
    selector_evaluated: bool
    asked: int | None  # None for "all matching devices"
    selector_valid: bool = True  # False: it does not compile, the cluster would refuse it
    unevaluated: int = 0
    of_class: int = 0
    held_outside: int = 0  # matching devices held by claims made outside the portal
    tainted: int = 0  # matching devices tainted NoSchedule or NoExecute, held or not
    # The most matching devices on one node that no claim of the portal holds.
    free_on_best_node_but_outside: int = 0

    @property
    def possible(self) -> bool | None:
        if not self.selector_valid:
            return False
        if not self.selector_evaluated:
            return None
        if not self.matching:
            return False
        return self.asked is None or 1 <= self.asked <= self.max_on_one_node

    @property
    def fits_now(self) -> bool:
        wanted = self.asked if self.asked is not None else 1
        return wanted <= self.free_on_best_node

    @property
    def held_outside_blocks(self) -> bool:
        """It would fit now, but for the devices claims made outside the portal hold."""
        wanted = self.asked if self.asked is not None else 1
        return (
            self.possible is True
            and not self.fits_now
            and wanted <= self.free_on_best_node_but_outside
        )

    @property
    def what(self) -> str:
        if self.selector and self.selector_evaluated:
            return _("devices of class %(class)s matching the selector") % {
                "class": self.device_class
            }
        return _("devices of class %(class)s") % {"class": self.device_class}

    def refusal(self) -> str:
        return _(
            "At most %(max)d %(what)s sit on one node; this cluster cannot give %(asked)s to "
            "one claim."
        ) % {"max": self.max_on_one_node, "what": self.what, "asked": self.asked}

    def count_problem(self) -> str | None:
        """Why the count itself cannot be met; None when it can or the fault lies elsewhere
        (no device matches, the selector does not compile)."""
        if self.asked is None:
            return None
        if self.asked < 1:
            return _("Ask for at least 1 device.")
        if self.possible is not None and self.matching and self.asked > self.max_on_one_node:
            return self.refusal()
        return None

    def line(self) -> str:
        """The short line: "N devices match, M free now, at most K on one node"."""
        if not self.selector_evaluated:
            return capfirst(self._cannot_check())
        if not (self.selector_valid and self.matching):
            return capfirst(self._nothing_matches())
        return ngettext(
            "%(matching)d device matches, %(free)d free now, at most %(max)d on one node",
            "%(matching)d devices match, %(free)d free now, at most %(max)d on one node",
            self.matching,
        ) % {"matching": self.matching, "free": self.free_in_cluster, "max": self.max_on_one_node}

    def as_dict(self) -> dict[str, Any]:
        return {
            "possible": self.possible,
            "matching": self.matching,
            "max_on_one_node": self.max_on_one_node,
            "free_now_on_one_node": self.free_on_best_node,
            "free_now_in_cluster": self.free_in_cluster,
            "node": self.best_node,
            "held_outside_portal": self.held_outside,
            "tainted": self.tainted,
            "selector_evaluated": self.selector_evaluated,
            "summary": self.summary(),
        }

    def summary(self) -> str:
        """The one statement: can it ever be met, and what is free now. A count that cannot
        be met is named here, and explained by count_problem next to the count."""
        if self.selector_valid and not self.selector_evaluated:
            return _("Cannot be checked before the cluster tries it: %(reason)s.") % {
                "reason": self._cannot_check()
            }
        if not (self.selector_valid and self.matching):
            return _("Cannot be satisfied: %(reason)s.") % {"reason": self._nothing_matches()}
        numbers = {"max": self.max_on_one_node, "what": self.what}
        if self.possible:
            parts = [_("Can be satisfied: up to %(max)d %(what)s on one node.") % numbers]
        else:
            parts = [
                _("Cannot be satisfied with this count: up to %(max)d %(what)s on one node.")
                % numbers
            ]
        parts.append(self._free_now())
        return " ".join(parts)

    def _cannot_check(self) -> str:
        return ngettext(
            "the selector fails to evaluate on %(failed)d of %(total)d device of class "
            "%(class)s (an attribute it does not publish, or a comparison CEL cannot make); "
            "the scheduler stops the allocation on such a device with a CEL runtime error",
            "the selector fails to evaluate on %(failed)d of %(total)d devices of class "
            "%(class)s (an attribute they do not publish, or a comparison CEL cannot make); "
            "the scheduler stops the allocation on such a device with a CEL runtime error",
            self.of_class,
        ) % {"failed": self.unevaluated, "total": self.of_class, "class": self.device_class}

    def _nothing_matches(self) -> str:
        named = {"class": self.device_class}
        if not self.selector_valid:
            return _("the selector is not valid CEL, so no device can match it")
        if self.selector and self.selector_evaluated:
            return (
                _("no device of class %(class)s matches the model, memory, MIG profile or selector")
                % named
            )
        return _("this cluster has no device of class %(class)s") % named

    def _free_now(self) -> str:
        numbers = {
            "free": self.free_on_best_node,
            "node": self.best_node,
            "in_cluster": self.free_in_cluster,
        }
        if self.best_node:
            said = _("Free now: %(free)d on %(node)s, %(in_cluster)d in the cluster.") % numbers
        else:
            said = _("Free now: %(free)d, %(in_cluster)d in the cluster.") % numbers
        return " ".join([said, *self._outside()])

    def _outside(self) -> list[str]:
        """What claims made outside the portal hold of the matching devices, and whether they
        are why the claim cannot get its devices now; and how many are tainted."""
        said = self._tainted()
        if not self.held_outside:
            return said
        said += [
            ngettext(
                "%(n)d matching device is held outside the portal.",
                "%(n)d matching devices are held outside the portal.",
                self.held_outside,
            )
            % {"n": self.held_outside}
        ]
        if self.held_outside_blocks:
            said.append(
                _(
                    "It does not fit now: devices held outside the portal leave too few free "
                    "on any node; it waits until they are released."
                )
            )
        return said

    def _tainted(self) -> list[str]:
        if not self.tainted:
            return []
        return [
            ngettext(
                "%(n)d matching device is tainted and not given to new claims.",
                "%(n)d matching devices are tainted and not given to new claims.",
                self.tainted,
            )
            % {"n": self.tainted}
        ]
