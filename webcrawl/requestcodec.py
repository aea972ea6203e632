"""Requests as JSON, never pickle: anyone who can write to Redis must not run code in a worker.

The dict is Scrapy's own (:meth:`scrapy.Request.to_dict`, read back with
:func:`scrapy.utils.request.request_from_dict`); bytes (headers, body) travel as latin-1 text,
which maps every byte to one code point and back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Spider


class UnserializableRequest(ValueError):
    """The request (its callback, or a meta or cb_kwargs value) cannot be written as JSON."""


def _method_name(spider: Spider | None, func: Any) -> str | None:
    if func is None or isinstance(func, str):
        return func
    # Fast path for the usual bound method of the spider; Request.to_dict scans every member.
    name = getattr(func, "__name__", None)
    if spider is not None and name and getattr(func, "__self__", None) is spider:
        return name
    raise UnserializableRequest(f"callback {func!r} is not a method of the spider")


def encode(request: Request, spider: Spider | None) -> str:
    """The request as a compact JSON string; raises UnserializableRequest."""
    d: dict[str, Any] = {
        "url": request.url,
        "callback": _method_name(spider, request.callback),
        "errback": _method_name(spider, request.errback),
    }
    for attr in request.attributes:
        d.setdefault(attr, getattr(request, attr))
    if type(request) is not Request:
        d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    d["headers"] = [
        [k.decode("latin-1"), [v.decode("latin-1") for v in vs]] for k, vs in request.headers.items()
    ]
    d["body"] = request.body.decode("latin-1")
    try:
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UnserializableRequest(str(exc)) from exc


def decode(payload: str | bytes, spider: Spider | None) -> Request:
    d = json.loads(payload)
    d["headers"] = {k.encode("latin-1"): [v.encode("latin-1") for v in vs] for k, vs in d["headers"]}
    d["body"] = d["body"].encode("latin-1")
    return request_from_dict(d, spider=spider)
