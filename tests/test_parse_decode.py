"""Bodies that are not clean UTF-8 HTML: truncated, binary, PDF, broken or foreign encodings,
empty, huge. None may raise; each outcome is counted."""

from __future__ import annotations

import random

import pytest

from webcrawl.parse import PageParser, ParseRules, prepare_body

URL = "http://example.com/p"
PARSER = PageParser(ParseRules(max_body_bytes=64 * 1024))


def test_truncation_cuts_before_parsing() -> None:
    head = b'<html><body><a href="/early">e</a>'
    body = head + b"<p>" + b"x" * 100_000 + b'</p><a href="/late">l</a></body></html>'
    result = PARSER.parse(body, URL)
    assert result.kind == "html" and result.truncated
    assert result.links == ("http://example.com/early",)
    assert result.counts["truncated"] == 1


def test_truncation_inside_a_utf8_character_is_not_an_encoding_error() -> None:
    body = b"<p>" + "\u00e9".encode() * 40_000  # two bytes each: the cut can land mid-character
    for limit in (1024, 1025, 4097):
        prepared = prepare_body(body, limit)
        assert prepared.truncated and prepared.replaced == 0 and prepared.encoding == "utf-8"
        text = prepared.data.decode() if isinstance(prepared.data, bytes) else prepared.data
        assert set(text[3:]) == {"\u00e9"}


def test_truncation_in_a_multibyte_legacy_encoding() -> None:
    body = "<p>".encode("shift_jis") + "\u65e5\u672c".encode("shift_jis") * 1000
    prepared = prepare_body(body, 1025, "shift_jis")
    assert prepared.encoding == "cp932" and prepared.replaced == 0  # WHATWG maps Shift_JIS to cp932
    assert isinstance(prepared.data, str) and prepared.data.endswith("\u65e5")


def test_binary_sent_as_html() -> None:
    rng = random.Random(3)
    body = bytes(rng.randrange(256) for _ in range(5000))
    result = PARSER.parse(body, URL)
    assert result.kind == "binary" and result.links == () and result.record is None
    assert result.counts["pages/binary"] == 1


@pytest.mark.parametrize(
    "body",
    [b"\x89PNG\r\n\x1a\n" + b"a" * 100, b"GIF89a" + b"a" * 100, b"PK\x03\x04" + b"a" * 100, b"\x1f\x8b\x08" + b"a" * 100,
     b"<html>" + b"\x01\x02\x03\x04" * 50 + b"</html>", b"<html>\x00<a href=/x>x</a>"],
)
def test_binary_formats_and_control_characters(body: bytes) -> None:
    assert PARSER.parse(body, URL).kind == "binary"


@pytest.mark.parametrize("body", [b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n", b"\r\n  %PDF-1.4\n..."])
def test_pdf_body(body: bytes) -> None:
    result = PARSER.parse(body, URL)
    assert result.kind == "pdf" and result.counts["pages/pdf"] == 1 and result.links == ()


def test_invalid_utf8_is_replaced_and_counted() -> None:
    body = b'<p>caf\xe9 \xff\xfe ok</p><a href="/x">x</a>'
    result = PARSER.parse(body, URL, encoding="utf-8")
    assert result.kind == "html" and result.links == ("http://example.com/x",)
    assert result.counts["encoding/broken"] == 1
    assert result.counts["encoding/replaced"] == 3  # "\xe9", "\xff" and "\xfe": one each


def test_literal_replacement_characters_are_not_counted() -> None:
    body = "<p>\ufffd already here</p>".encode() + b"\xff"
    prepared = prepare_body(body, 1 << 20, "utf-8")
    assert prepared.replaced == 1


def test_undeclared_legacy_encoding_is_guessed_as_windows_1252() -> None:
    body = b"<html><body><h1>caf\xe9 \x93quoted\x94</h1></body></html>"
    prepared = prepare_body(body, 1 << 20)
    assert prepared.guessed and prepared.encoding == "cp1252" and prepared.replaced == 0
    assert "caf\u00e9 \u201cquoted\u201d" in prepared.data


def test_meta_charset_and_header_precedence() -> None:
    body = '<html><head><meta charset="iso-8859-1"></head><body>caf\u00e9</body></html>'.encode("latin-1")
    prepared = prepare_body(body, 1 << 20)
    assert prepared.encoding == "cp1252" and "caf\u00e9" in prepared.data and not prepared.guessed
    # The Content-Type header wins over <meta>; a wrong header gives replacements, counted.
    wrong = prepare_body(body, 1 << 20, "utf-8")
    assert wrong.encoding == "utf-8" and wrong.replaced == 1
    unknown = prepare_body(body, 1 << 20, "x-no-such-charset")
    assert unknown.encoding == "cp1252"


def test_utf16_with_bom_is_text() -> None:
    body = "\ufeff<html><body><a href='/u16'>x</a></body></html>".encode("utf-16-le")
    result = PARSER.parse(body, URL)
    assert result.kind == "html" and result.links == ("http://example.com/u16",)
    assert result.encoding == "utf-16-le"


def test_utf8_bom_is_dropped() -> None:
    prepared = prepare_body(b"\xef\xbb\xbf<p>\xc3\xa9</p>", 1 << 20)
    assert prepared.data == "<p>\u00e9</p>".encode() and prepared.encoding == "utf-8"


@pytest.mark.parametrize("body", [b"", b"   \n\t  "])
def test_empty_body(body: bytes) -> None:
    result = PARSER.parse(body, URL)
    assert result.kind == "empty" and result.links == () and result.counts["pages/empty"] == 1


def test_huge_body_is_cut_fast() -> None:
    body = b'<html><body><a href="/first">f</a>' + b"<div>" + b"y" * (20 * 1024 * 1024) + b"</div></body></html>"
    result = PageParser(ParseRules(max_body_bytes=256 * 1024)).parse(body, URL)
    assert result.truncated and result.links == ("http://example.com/first",)


def test_markup_soup_never_raises() -> None:
    rng = random.Random(11)
    pieces = [b"<a href=", b'"', b"'", b">", b"</a>", b"<base href=", b"<!--", b"-->", b"<script>", b"&#x", b"\xc3", b"\xa9", b"<area href=//", b"?", b"#", b" "]
    for _ in range(300):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
        result = PARSER.parse(body, URL)
        assert result.kind in ("html", "empty", "binary", "pdf")


def test_bad_page_url_is_a_result_not_an_exception() -> None:
    result = PARSER.parse(b"<a href=x>x</a>", "mailto:someone@example.com")
    assert result.kind == "badurl" and result.counts["pages/badurl"] == 1
