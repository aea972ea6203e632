"""Reading one HTTP/1.1 answer from the bytes of a connection: the head, then the body framed as
RFC 9112 section 6.3 says. Pure: no sockets, no Scrapy, no clock.

:class:`AnswerReader` is fed whatever arrives (:meth:`~AnswerReader.feed`) and tells its owner
what it found through three calls: ``head(status, version, headers)`` once the head is whole
(informational 1xx answers are skipped), ``data(chunk)`` for each piece of body, ``done()`` when
the body is complete (at the end of the :meth:`~AnswerReader.feed` that completed it, once
:attr:`~AnswerReader.rest` holds what came after). Bytes after the answer are kept (:attr:`~AnswerReader.rest`); a
well-behaved server sends none, since requests are not pipelined.

Framing, in the RFC's order: a HEAD request and the statuses 1xx, 204 and 304 have no body; a
``Transfer-Encoding`` ending in ``chunked`` is read chunk by chunk (trailers skipped); a
``Content-Length`` gives the length (differing values are an error); otherwise the body runs to
the end of the connection (:meth:`~AnswerReader.closed` then completes it). A connection that
closes before a framed body is complete is data loss: :meth:`~AnswerReader.closed` returns
``False``.

Broken answers raise :class:`BadAnswer`: a status line that is not HTTP, a head over
:data:`MAX_HEAD_BYTES`, a malformed chunk size or length.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["MAX_HEAD_BYTES", "AnswerReader", "BadAnswer", "Listener"]

#: The largest head read (status line and headers together); a longer one is a broken answer.
MAX_HEAD_BYTES = 65536
_MAX_CHUNK_LINE = 4096
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_NO_BODY_STATUSES = frozenset({204, 304})
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class BadAnswer(Exception):
    """The server's bytes are not an HTTP/1.x answer this reader can follow."""


class Listener(Protocol):
    def head(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None: ...

    def data(self, chunk: bytes) -> None: ...

    def done(self) -> None: ...


def parse_head(block: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Status, version (``b"HTTP/1.1"``) and headers of a head without its final blank line."""
    lines = block.split(b"\r\n")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise BadAnswer(f"not an HTTP status line: {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and headers:  # an obsolete folded continuation line
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip())
            continue
        name, colon, value = line.partition(b":")
        if colon and name and name == name.strip():
            headers.append((name, value.strip()))
    return int(parts[1]), parts[0], headers


class AnswerReader:
    """See the module docstring. ``head_request`` is whether the request was a HEAD."""

    __slots__ = ("listener", "head_request", "state", "buffer", "remaining", "keep_alive",
                 "status", "rest", "length", "_finished")

    def __init__(self, listener: Listener, *, head_request: bool = False) -> None:
        self.listener = listener
        self.head_request = head_request
        self.state = _HEAD
        self.buffer = b""
        self.remaining = 0
        self.keep_alive = False  # known once the head is read
        self.status = 0
        self.rest = b""
        self.length: int | None = None  # the body's length, when Content-Length frames it
        self._finished = False  # done() is owed once this feed's bytes are sorted

    @property
    def complete(self) -> bool:
        """Whether the whole answer has been read."""
        return self.state == _DONE

    @property
    def started(self) -> bool:
        """Whether any byte of the answer has arrived."""
        return bool(self.buffer) or self.state != _HEAD

    def feed(self, data: bytes) -> None:
        if self.state == _DONE:
            self.rest += data
            return
        if self.buffer:
            data = self.buffer + data
            self.buffer = b""
        while data and self.state != _DONE:
            data = self._step(data)
        if data:
            self.rest += data
        if self._finished:  # told after rest is known, so the owner can tell a clean end
            self._finished = False
            self.listener.done()

    def closed(self) -> bool:
        """The connection ended: complete a body that runs to the end of it; whether the answer
        was whole."""
        if self.state == _UNTIL_CLOSE:
            self.state = _DONE
            self.listener.done()
        return self.state == _DONE

    def _step(self, data: bytes) -> bytes:
        state = self.state
        if state == _LENGTH or state == _CHUNK_DATA:
            take = data[:self.remaining]
            self.remaining -= len(take)
            self.listener.data(take)
            if not self.remaining:
                if state == _LENGTH:
                    self._finish()
                else:
                    self.state = _CHUNK_END
            return data[len(take):]
        if state == _UNTIL_CLOSE:
            self.listener.data(data)
            return b""
        if state == _HEAD:
            return self._read_head(data)
        end = data.find(b"\r\n")
        if end < 0:
            if len(data) > (MAX_HEAD_BYTES if state == _TRAILERS else _MAX_CHUNK_LINE):
                raise BadAnswer("chunk framing line too long")
            self.buffer = data
            return b""
        line, data = data[:end], data[end + 2:]
        if state == _CHUNK_SIZE:
            self._chunk_size(line)
        elif state == _CHUNK_END:
            if line:
                raise BadAnswer("chunk data longer than its size")
            self.state = _CHUNK_SIZE
        elif not line:  # _TRAILERS: the blank line ends them
            self._finish()
        return data

    def _read_head(self, data: bytes) -> bytes:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if len(data) > MAX_HEAD_BYTES + 3:  # longer than the limit and a partial blank line
                raise BadAnswer(f"answer head over {MAX_HEAD_BYTES} bytes")
            self.buffer = data
            return b""
        if end > MAX_HEAD_BYTES:
            raise BadAnswer(f"answer head over {MAX_HEAD_BYTES} bytes")
        status, version, headers = parse_head(data[:end])
        data = data[end + 4:]
        if 100 <= status < 200:
            return data  # informational: the real answer follows
        self.status = status
        self._frame(status, version, headers)
        self.listener.head(status, version, headers)
        if self.state == _DONE:
            self._finished = True
        return data

    def _frame(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        options: set[bytes] = set()
        coding = b""
        lengths: set[bytes] = set()
        for name, value in headers:
            lower = name.lower()
            if lower == b"content-length":
                lengths.update(v.strip() for v in value.split(b","))
            elif lower == b"transfer-encoding":
                coding = value.lower()
            elif lower == b"connection":
                options.update(v.strip() for v in value.lower().split(b","))
        self.keep_alive = b"close" not in options and (
            version == b"HTTP/1.1" or b"keep-alive" in options)
        if self.head_request or status in _NO_BODY_STATUSES:
            self.state = _DONE
        elif coding:
            if coding.rsplit(b",", 1)[-1].strip() == b"chunked":
                self.state = _CHUNK_SIZE
            else:  # a body whose end only the connection's end can tell
                self.state, self.keep_alive = _UNTIL_CLOSE, False
        elif lengths:
            if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
                raise BadAnswer(f"bad Content-Length: {b','.join(sorted(lengths))[:80]!r}")
            self.remaining = self.length = int(lengths.pop())
            self.state = _LENGTH if self.remaining else _DONE
        else:
            self.state, self.keep_alive = _UNTIL_CLOSE, False

    def _chunk_size(self, line: bytes) -> None:
        size = line.split(b";", 1)[0].strip()
        if not size or size.strip(_HEX_DIGITS) or len(size) > 16:  # int() takes 0x, _, signs
            raise BadAnswer(f"bad chunk size: {line[:40]!r}")
        self.remaining = int(size, 16)
        self.state = _CHUNK_DATA if self.remaining else _TRAILERS

    def _finish(self) -> None:
        self.state = _DONE
        self._finished = True
