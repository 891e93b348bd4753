"""Decoding errors in the words of Go's encoding/json, encoding/base64 and strconv."""

from __future__ import annotations

import pytest

from kubesim.base import gojson


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a":1', "unexpected end of JSON input"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b"{a}", "invalid character 'a' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b"{}x", "invalid character 'x' after top-level value"),
        (b"\x81", "invalid character '\\u0081' looking for beginning of value"),
        (b"NaN", "invalid character 'N' looking for beginning of value"),
    ],
)
def test_it_words_syntax_errors_as_go(body: bytes, message: str) -> None:
    with pytest.raises(gojson.GoJsonError) as caught:
        gojson.loads(body)
    assert str(caught.value) == message


def test_it_keeps_the_last_of_two_equal_keys_and_names_the_duplicates() -> None:
    duplicates: list[str] = []
    body = b'{"metadata":{"name":"a","name":"b"},"items":[{"x":1,"x":2}]}'
    value = gojson.loads(body, duplicates=duplicates)
    assert value == {"metadata": {"name": "b"}, "items": [{"x": 2}]}
    assert duplicates == ["metadata.name", "items[0].x"]


def test_it_decodes_raw_url_base64_as_go() -> None:
    assert gojson.raw_url_b64decode(gojson.raw_url_b64encode(b"\xff\x00a")) == b"\xff\x00a"
    with pytest.raises(ValueError, match="illegal base64 data at input byte 2"):
        gojson.raw_url_b64decode("ab=c")


def test_it_parses_integers_as_strconv() -> None:
    assert gojson.parse_int("+12") == 12
    with pytest.raises(ValueError) as caught:
        gojson.parse_int("abc")
    assert str(caught.value) == 'strconv.ParseInt: parsing "abc": invalid syntax'
    with pytest.raises(ValueError, match="value out of range"):
        gojson.parse_int("9223372036854775808")
