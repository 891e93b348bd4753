"""Pages of a list ordered by (created, id), read by position rather than by number.

A page starts after (or ends before) a row's position, found through the ordering's index:
as fast at the end of a long list as at its start, with no count. One more row than the
page is read to know whether another page follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
# A position as a URL parameter: microseconds since the epoch, a dot, the row's id.
LARGEST_ID = 2**63 - 1


@dataclass(frozen=True)
class Position:
    """Where a row stands in the order (created, id)."""

    created: datetime
    pk: int

    @classmethod
    def of(cls, row: Any) -> Position:
        return cls(row.created, row.pk)

    @classmethod
    def parse(cls, text: str) -> Position | None:
        """The position a page link carries; None for anything it did not make."""
        micros, _, pk = text.partition(".")
        if not (_is_number(micros) and _is_number(pk) and int(pk) <= LARGEST_ID):
            return None
        try:
            return cls(EPOCH + int(micros) * MICROSECOND, int(pk))
        except OverflowError:
            return None

    def __str__(self) -> str:
        return f"{(self.created - EPOCH) // MICROSECOND}.{self.pk}"

    def after(self) -> Q:
        return Q(created__gt=self.created) | Q(created=self.created, pk__gt=self.pk)

    def before(self) -> Q:
        return Q(created__lt=self.created) | Q(created=self.created, pk__lt=self.pk)

    def just_after(self) -> Position:
        """A position between this row and the next: a page before it includes this row."""
        return Position(self.created, self.pk + 1)


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdecimal() and len(text) <= 19


@dataclass(frozen=True)
class Page:
    """A page of rows, oldest first, and where the pages around it are (None: no page)."""

    rows: list[Any]
    previous: Position | None  # the previous page ends before this
    next: Position | None  # the next page starts after this


@dataclass(frozen=True)
class NewestFirst:
    """A page of rows, newest first, and where the older rows go on (None: no older row)."""

    rows: list[Any]
    older: Position | None


def newest_first(rows: QuerySet, *, size: int, before: Position | None = None) -> NewestFirst:
    """The newest `size` of `rows` (ordered by created, id), or those just before `before`."""
    newest = (rows.filter(before.before()) if before else rows).order_by("-created", "-pk")
    found = list(newest[: size + 1])
    shown = found[:size]
    return NewestFirst(shown, Position.of(shown[-1]) if len(found) > size else None)


def page_of(
    rows: QuerySet, *, size: int, after: Position | None = None, before: Position | None = None
) -> Page:
    """The page of `rows` (ordered by created, id) after `after` or before `before`; the
    first page with neither. Fewer than a page before `before` is the first page."""
    if before is not None:
        found = list(rows.filter(before.before()).order_by("-created", "-pk")[: size + 1])
        if len(found) > size:
            shown = found[:size][::-1]
            return Page(shown, Position.of(shown[0]), Position.of(shown[-1]))
        after = None
    found = list((rows.filter(after.after()) if after else rows)[: size + 1])
    shown = found[:size]
    following = Position.of(shown[-1]) if len(found) > size else None
    if after is None:
        return Page(shown, None, following)
    # An emptied page (its rows decided since) still leads back to the rows before it.
    return Page(shown, Position.of(shown[0]) if shown else after.just_after(), following)
