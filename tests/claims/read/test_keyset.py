"""Pages by position: a position survives its round trip through a URL, a forged one is
refused, and pages before and after a position meet without a gap or an overlap."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.db.models import QuerySet

from claims.models import Cluster, NamespaceRequest
from claims.read.keyset import Position, page_of


def test_it_writes_a_position_it_reads_back_to_the_microsecond() -> None:
    position = Position(datetime(2026, 12, 6, 8, 30, 1, 123456, tzinfo=UTC), 42)
    assert str(position) == "1796545801123456.42"
    assert Position.parse(str(position)) == position


@pytest.mark.parametrize(
    "text", ["", "1", "1.", ".1", "a.1", "1.a", "-1.1", "1.-1", "².1", "1.1.1", "9" * 20 + ".1"]
)
def test_it_refuses_a_position_it_did_not_write(text: str) -> None:
    assert Position.parse(text) is None


@pytest.fixture
def rows(db: None) -> list[NamespaceRequest]:
    """Seven requests, three of them made in the same instant (ordered by id among them)."""
    owner = User.objects.create(username="alice")
    cluster = Cluster.objects.create(name="c")
    times = [datetime(2026, 1, 1, 0, 0, s, tzinfo=UTC) for s in (1, 2, 2, 2, 3, 4, 5)]
    return [
        NamespaceRequest.objects.create(owner=owner, cluster=cluster, name=f"n{i}", created=at)
        for i, at in enumerate(times)
    ]


def ordered() -> QuerySet[NamespaceRequest]:
    return NamespaceRequest.objects.order_by("created", "id")


def names(found: list[NamespaceRequest]) -> list[str]:
    return [row.name for row in found]


def test_it_pages_forward_and_back(rows: list[NamespaceRequest]) -> None:
    first = page_of(ordered(), size=3)
    assert (names(first.rows), first.previous) == (["n0", "n1", "n2"], None)
    second = page_of(ordered(), size=3, after=first.next)
    assert names(second.rows) == ["n3", "n4", "n5"]
    third = page_of(ordered(), size=3, after=second.next)
    assert (names(third.rows), third.next) == (["n6"], None)
    back = page_of(ordered(), size=3, before=third.previous)
    assert names(back.rows) == ["n3", "n4", "n5"]
    assert back.next == second.next and back.previous == second.previous


def test_it_shows_the_first_page_when_fewer_than_a_page_come_before(
    rows: list[NamespaceRequest],
) -> None:
    found = page_of(ordered(), size=3, before=Position.of(rows[2]))
    assert (names(found.rows), found.previous) == (["n0", "n1", "n2"], None)


def test_it_leads_back_from_a_page_whose_rows_are_gone(rows: list[NamespaceRequest]) -> None:
    empty = page_of(ordered(), size=3, after=Position.of(rows[6]))
    assert empty.rows == [] and empty.next is None
    assert empty.previous is not None
    back = page_of(ordered(), size=3, before=empty.previous)
    assert names(back.rows) == ["n4", "n5", "n6"]
