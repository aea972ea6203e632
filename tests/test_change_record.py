"""The record hash: canonical JSON of the hashed fields, whitespace and Unicode normalised."""

from __future__ import annotations

import pytest

from webcrawl.change import canonical_json, normalise, record_hash

FIELDS = ("name", "price", "stock", "served_at")


def test_hash_is_32_hex_digits_and_stable_across_versions():
    # Pinned: a page history keeps hashes forever, so the canonical form must never drift.
    assert canonical_json({"b": 1, "a": "x"}) == '{"a":"x","b":1}'
    assert record_hash({"b": 1, "a": "x"}) == "ef801795c4aac48b1738ef676ae7d53b"


@pytest.mark.parametrize(("a", "b"), [
    ({"name": "Lamp  100", "price": "9.99"}, {"name": " Lamp\n\t100 ", "price": "9.99"}),
    ({"name": "Caf\u00e9"}, {"name": "Cafe\u0301"}),  # NFC and NFD spell the same text
    ({"name": "Lamp", "price": "1", "served_at": "12:00"}, {"name": "Lamp", "price": "1", "served_at": "12:01"}),
    ({"price": "1", "name": "Lamp"}, {"name": "Lamp", "price": "1"}),
    ({"name": "Lamp", "extra": "ignored"}, {"name": "Lamp"}),  # only the page type's fields count
])
def test_equal_records_hash_alike(a, b):
    assert record_hash(a, FIELDS, {"served_at"}) == record_hash(b, FIELDS, {"served_at"})


@pytest.mark.parametrize(("a", "b"), [
    ({"name": "Lamp", "price": "9.99"}, {"name": "Lamp", "price": "9.98"}),
    ({"name": "Lamp", "stock": 3}, {"name": "Lamp", "stock": "3"}),  # a type change is a change
    ({"name": "Lamp", "price": "1"}, {"name": "Lamp"}),  # a field that vanished
    ({"name": ["a", "b"]}, {"name": ["b", "a"]}),  # list order is data
    ({"name": "a b"}, {"name": "ab"}),
])
def test_any_hashed_difference_changes_the_hash(a, b):
    assert record_hash(a, FIELDS, {"served_at"}) != record_hash(b, FIELDS, {"served_at"})


def test_without_fields_every_key_but_the_volatile_ones_counts():
    assert record_hash({"a": 1, "t": 2}, None, {"t"}) == record_hash({"a": 1, "t": 3}, None, {"t"})
    assert record_hash({"a": 1}) != record_hash({"a": 1, "b": None})


@pytest.mark.parametrize(("value", "expected"), [
    ("  a \u00a0 b\n", "a b"),
    (b"caf\xc3\xa9  x", "café x"),
    (b"\xff", "\ufffd"),
    (float("nan"), "nan"),
    ({"k": (" x ", 1)}, {"k": ["x", 1]}),
    (object.__new__(type("Odd", (), {"__str__": lambda self: " odd "})), "odd"),
])
def test_normalise(value, expected):
    assert normalise(value) == expected


def test_empty_and_missing_records_hash_alike():
    assert record_hash(None, FIELDS) == record_hash({}, FIELDS)
    assert record_hash(None) == record_hash({})
