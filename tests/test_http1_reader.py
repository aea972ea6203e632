"""AnswerReader (webcrawl.net.http1_reader): one HTTP/1.x answer read from the bytes of a
connection, with a listener that records what the reader tells it. Every framing is read both
in one piece and a byte at a time: the outcome must not depend on how the bytes arrive."""

from __future__ import annotations

from typing import Any

import pytest

from webcrawl.net.http1_reader import MAX_HEAD_BYTES, AnswerReader, BadAnswer, parse_head


class Recorder:
    """A listener keeping every call, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def head(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.events.append(("head", status, version, headers))

    def data(self, chunk: bytes) -> None:
        self.events.append(("data", chunk))

    def done(self) -> None:
        self.events.append(("done",))

    @property
    def heads(self) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == "head"]

    @property
    def body(self) -> bytes:
        return b"".join(e[1] for e in self.events if e[0] == "data")

    @property
    def dones(self) -> int:
        return sum(1 for e in self.events if e[0] == "done")


def feed(raw: bytes, how: str, *, head_request: bool = False) -> tuple[AnswerReader, Recorder]:
    recorder = Recorder()
    reader = AnswerReader(recorder, head_request=head_request)
    if how == "whole":
        reader.feed(raw)
    else:
        for i in range(len(raw)):
            reader.feed(raw[i:i + 1])
    return reader, recorder


HOW = pytest.mark.parametrize("how", ["whole", "bytewise"])


def assert_well_formed(recorder: Recorder) -> None:
    """One head first, then only non-empty data, then one done, last."""
    kinds = [e[0] for e in recorder.events]
    assert kinds[0] == "head" and kinds.count("head") == 1
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert all(e[1] for e in recorder.events if e[0] == "data"), "an empty data() call"


@HOW
def test_a_content_length_body(how):
    raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
           b"X-Twice: a\r\nX-Twice: b\r\n\r\nhello world")
    reader, recorder = feed(raw, how)
    assert_well_formed(recorder)
    assert recorder.heads[0] == ("head", 200, b"HTTP/1.1", [
        (b"Content-Type", b"text/plain"), (b"Content-Length", b"11"),
        (b"X-Twice", b"a"), (b"X-Twice", b"b")])
    assert recorder.body == b"hello world"
    assert reader.complete and reader.status == 200 and reader.keep_alive
    assert reader.rest == b""
    assert reader.closed() is True and recorder.dones == 1  # done once, not again at the close


@HOW
def test_a_zero_content_length_is_done_with_the_head(how):
    reader, recorder = feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", how)
    assert [e[0] for e in recorder.events] == ["head", "done"]
    assert reader.complete and reader.keep_alive


@HOW
def test_a_chunked_body_with_extensions_and_trailers(how):
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;name=value\r\nhello\r\n"
           b"6 ; q=\"quoted;thing\"\r\n world\r\n"
           b"A\r\n0123456789\r\n"  # upper-case hex
           b"0;last=1\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n")
    reader, recorder = feed(raw, how)
    assert_well_formed(recorder)
    assert recorder.body == b"hello world0123456789"
    # Trailers are skipped: the head's headers are the head's only.
    assert recorder.heads[0][3] == [(b"Transfer-Encoding", b"chunked")]
    assert reader.complete and reader.keep_alive and reader.rest == b""


@pytest.mark.parametrize("headers", [
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: CHUNKED\r\n",
    # Transfer-Encoding wins over a Content-Length (RFC 9112 section 6.3).
    b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: 300\r\n",
])
@HOW
def test_chunked_as_last_coding_frames_the_body(headers, how):
    raw = b"HTTP/1.1 200 OK\r\n" + headers + b"\r\n4\r\nabcd\r\n0\r\n\r\n"
    reader, recorder = feed(raw, how)
    assert_well_formed(recorder)
    assert recorder.body == b"abcd" and reader.complete and reader.rest == b""


@HOW
def test_informational_answers_are_skipped(how):
    raw = (b"HTTP/1.1 100 Continue\r\n\r\n"
           b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
           b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    reader, recorder = feed(raw, how)
    assert_well_formed(recorder)
    assert recorder.heads == [("head", 200, b"HTTP/1.1", [(b"Content-Length", b"2")])]
    assert recorder.body == b"ok" and reader.status == 200 and reader.complete


@pytest.mark.parametrize(("head_request", "status"), [(True, 200), (False, 204), (False, 304),
                                                      (True, 404)])
@pytest.mark.parametrize("framing", [b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
                                     b""])
@HOW
def test_head_requests_204_and_304_have_no_body(head_request, status, framing, how):
    """Even announcing one: the bytes after the head are not the body (here: kept as rest)."""
    raw = b"HTTP/1.1 %d X\r\n%s\r\n" % (status, framing)
    reader, recorder = feed(raw + b"hello", how, head_request=head_request)
    assert [e[0] for e in recorder.events] == ["head", "done"]
    assert reader.complete and reader.status == status
    assert reader.keep_alive  # no body that runs to the end of the connection
    assert reader.rest == b"hello"


@pytest.mark.parametrize("headers", [b"", b"Transfer-Encoding: gzip\r\n",
                                     b"Transfer-Encoding: chunked, gzip\r\n"])
@HOW
def test_a_close_delimited_body_is_completed_by_closed(headers, how):
    reader, recorder = feed(b"HTTP/1.1 200 OK\r\n" + headers + b"\r\nabc", how)
    reader.feed(b"")
    reader.feed(b"def")
    assert recorder.dones == 0 and not reader.complete
    assert not reader.keep_alive
    assert reader.closed() is True
    assert_well_formed(recorder)
    assert recorder.body == b"abcdef" and reader.complete
    assert reader.closed() is True and recorder.dones == 1


@pytest.mark.parametrize("raw", [
    b"",
    b"HTTP/1.1 200 OK\r\nContent-Le",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\nX-T: 1\r\n",
], ids=["nothing", "mid-head", "short-length", "mid-chunk", "chunk-no-crlf", "no-last-chunk",
        "no-blank-line", "mid-trailers"])
@HOW
def test_a_close_before_a_framed_body_ends_is_data_loss(raw, how):
    reader, recorder = feed(raw, how)
    assert reader.closed() is False
    assert recorder.dones == 0 and not reader.complete


@pytest.mark.parametrize(("version", "headers", "expected"), [
    (b"HTTP/1.1", b"Content-Length: 0\r\n", True),
    (b"HTTP/1.1", b"Transfer-Encoding: chunked\r\n", True),
    (b"HTTP/1.1", b"Connection: close\r\nContent-Length: 0\r\n", False),
    (b"HTTP/1.1", b"Connection: Close\r\nContent-Length: 0\r\n", False),
    (b"HTTP/1.1", b"Connection: keep-alive, close\r\nContent-Length: 0\r\n", False),
    (b"HTTP/1.1", b"Connection: keep-alive\r\nConnection: close\r\nContent-Length: 0\r\n", False),
    (b"HTTP/1.1", b"Connection: upgrade\r\nContent-Length: 0\r\n", True),
    (b"HTTP/1.0", b"Content-Length: 0\r\n", False),
    (b"HTTP/1.0", b"Connection: keep-alive\r\nContent-Length: 0\r\n", True),
    (b"HTTP/1.0", b"Connection: Keep-Alive\r\nContent-Length: 0\r\n", True),
    (b"HTTP/1.1", b"", False),  # close-delimited: the connection's end is the body's
    (b"HTTP/1.0", b"Connection: keep-alive\r\n", False),
    (b"HTTP/1.1", b"Transfer-Encoding: gzip\r\n", False),
])
def test_keep_alive(version, headers, expected):
    reader, _ = feed(version + b" 200 OK\r\n" + headers + b"\r\n", "whole")
    assert reader.keep_alive is expected


@HOW
def test_obsolete_folded_header_lines_continue_the_previous_value(how):
    raw = (b"HTTP/1.1 200 OK\r\nX-Long: first\r\n  second\r\n\tthird\r\n"
           b"X-Next: n\r\nContent-Length: 0\r\n\r\n")
    _, recorder = feed(raw, how)
    assert recorder.heads[0][3] == [(b"X-Long", b"first second third"), (b"X-Next", b"n"),
                                    (b"Content-Length", b"0")]


def test_parse_head_reads_status_version_and_keeps_well_formed_headers():
    status, version, headers = parse_head(
        b"HTTP/1.0 404 Not Found Here\r\nA:  spaced  \r\nno colon line\r\nBad Name : x\r\n"
        b"B:\r\nA: again")
    assert (status, version) == (404, b"HTTP/1.0")
    assert headers == [(b"A", b"spaced"), (b"B", b""), (b"A", b"again")]
    assert parse_head(b"HTTP/1.1 200")[0:2] == (200, b"HTTP/1.1")  # no reason phrase


@pytest.mark.parametrize("raw", [
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"<html><body>hello</body></html>\r\n\r\n",
    b"HTTP/1.1 OK\r\n\r\n",
    b"HTTP/1.1\r\n\r\n",
    b"ICY 200 OK\r\n\r\n",
    b"\r\n\r\n",
])
@HOW
def test_a_status_line_that_is_not_http_is_a_bad_answer(raw, how):
    with pytest.raises(BadAnswer, match="not an HTTP status line"):
        feed(raw, how)


def test_a_head_over_the_limit_is_a_bad_answer_in_one_piece():
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * MAX_HEAD_BYTES
    with pytest.raises(BadAnswer, match="head over"):  # no end of head in sight
        feed(big, "whole")
    with pytest.raises(BadAnswer, match="head over"):  # an end, too far
        feed(big + b"\r\nContent-Length: 0\r\n\r\n", "whole")


def test_a_head_over_the_limit_is_refused_as_it_grows():
    """Fed in pieces, the reader gives up as soon as the head passes the limit: it does not
    keep buffering a head that never ends."""
    reader = AnswerReader(Recorder())
    reader.feed(b"HTTP/1.1 200 OK\r\n")
    fed = 17
    piece = b"X-Filler: " + b"f" * 1000 + b"\r\n"
    with pytest.raises(BadAnswer, match="head over"):
        while fed < 4 * MAX_HEAD_BYTES:
            fed += len(piece)
            reader.feed(piece)
    assert MAX_HEAD_BYTES < fed <= MAX_HEAD_BYTES + len(piece)


def head_of_length(length: int) -> bytes:
    """A head (without its final blank line) of exactly ``length`` bytes."""
    start = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: "
    return start + b"p" * (length - len(start))


@pytest.mark.parametrize("length", [MAX_HEAD_BYTES - 3, MAX_HEAD_BYTES - 1, MAX_HEAD_BYTES])
@HOW
def test_a_head_at_the_limit_is_read_however_it_arrives(length, how):
    """A head of at most MAX_HEAD_BYTES is not over the limit, whether the final CRLFCRLF
    arrives with it or a byte at a time."""
    raw = head_of_length(length) + b"\r\n\r\n"
    assert len(raw) == length + 4
    recorder = Recorder()
    reader = AnswerReader(recorder)
    if how == "whole":
        reader.feed(raw)
    else:  # the head in one piece, its final CRLFCRLF a byte at a time (quicker than 64 KiB)
        reader.feed(raw[:length])
        for i in range(length, len(raw)):
            reader.feed(raw[i:i + 1])
    assert reader.complete and recorder.dones == 1


def test_a_head_one_byte_over_the_limit_is_a_bad_answer():
    with pytest.raises(BadAnswer, match="head over"):
        feed(head_of_length(MAX_HEAD_BYTES + 1) + b"\r\n\r\n", "whole")


@pytest.mark.parametrize("lengths", [
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Content-Length: 5, 6\r\n",
    b"Content-Length: abc\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: +5\r\n",
    b"Content-Length: 0x5\r\n",
    b"Content-Length: \r\n",
    b"Content-Length: 5 5\r\n",
])
def test_conflicting_or_malformed_content_lengths_are_a_bad_answer(lengths):
    with pytest.raises(BadAnswer, match="Content-Length"):
        feed(b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\nhello", "whole")


@pytest.mark.parametrize("lengths", [b"Content-Length: 5\r\nContent-Length: 5\r\n",
                                     b"Content-Length: 5, 5\r\n", b"Content-Length:5\r\n"])
def test_repeated_equal_content_lengths_are_one_length(lengths):
    reader, recorder = feed(b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\nhelloX", "whole")
    assert recorder.body == b"hello" and reader.complete and reader.rest == b"X"


@pytest.mark.parametrize("size", [b"zz", b"5g", b"-5", b"-0", b"+5", b"0x5", b"0X5", b" 0x5",
                                  b"", b";ext", b"5 5", b"1_0", b"\xd9\xa5"])
@HOW
def test_a_bad_chunk_size_is_a_bad_answer(size, how):
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\n" + b"x" * 16
    with pytest.raises(BadAnswer, match="chunk size"):
        feed(raw + b"\r\n0\r\n\r\n", how)


@HOW
def test_chunk_data_longer_than_its_size_is_a_bad_answer(how):
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"
    with pytest.raises(BadAnswer, match="longer than its size"):
        feed(raw, how)


def test_a_chunk_size_line_that_never_ends_is_a_bad_answer():
    reader = AnswerReader(Recorder())
    reader.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    with pytest.raises(BadAnswer, match="too long"):
        for _ in range(100):
            reader.feed(b"5;" + b"e" * 1000)


@pytest.mark.parametrize(("raw", "body"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", b"ok"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nT: 1\r\n\r\n", b"ok"),
    (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n", b""),
])
@HOW
def test_bytes_after_a_complete_answer_are_kept_in_rest(raw, body, how):
    extra = b"HTTP/1.1 200 OK\r\n\r\nsurplus"
    reader, recorder = feed(raw + extra, how)
    assert_well_formed(recorder)
    assert recorder.body == body and reader.rest == extra
    reader.feed(b" and more")
    assert reader.rest == extra + b" and more"
    assert len(recorder.heads) == 1 and recorder.dones == 1  # the surplus is never read


def test_started_tells_whether_any_byte_arrived():
    reader = AnswerReader(Recorder())
    assert not reader.started
    reader.feed(b"H")
    assert reader.started and not reader.complete
