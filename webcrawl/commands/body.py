"""``scrapy body``: read a site's body store.

    scrapy body <site> <url> [--as-of TIME] [--meta]   the stored body (latest, or as of TIME)
    scrapy body <site> --pointer P [--meta]             the body a change event or a version points at
    scrapy body <site> --verify                         check every record and index; status 1 if damaged
    scrapy body <site> --warc FILE [--as-of TIME]       export each URL's latest body to WARC

The store is ``<WEBCRAWL_DATA_DIR>/<site>/bodies/``, every writer folder in it (each crawl process
on this machine writes its own). A URL is looked up in its canonical form (the form the pipeline
stores), then as given. The body goes to stdout as bytes; ``--meta`` prints the record's header
lines (url, fetch time, status, hash, headers, pointer) instead. A pointer of another machine's
store (``WEBCRAWL_MACHINE_NAME`` names this one) is an error saying which machine holds the body.
TIME is seconds since the epoch or an ISO 8601 date-time (UTC unless it names a zone).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from webcrawl.commands._errors import fail
from webcrawl.commands._times import parse_time
from webcrawl.parse import Canonicalizer
from webcrawl.store import BodyReader, Pointer, StoreError, bodies_folder, export_warc, machine_name, verify

if TYPE_CHECKING:
    import argparse

    from webcrawl.store import StoredBody


def _stores_hint(data_dir: Path) -> str:
    """Which sites do have a body store under ``data_dir``, or where to look instead."""
    try:
        sites = sorted(p.parent.name for p in data_dir.glob("*/bodies") if p.is_dir())
    except OSError:
        sites = []
    if sites:
        return f"sites with a body store there: {', '.join(sites)}"
    return (f"{data_dir} holds no body store; set WEBCRAWL_DATA_DIR to the crawl's data folder "
            "(bodies are stored by 'scrapy crawl <site>')")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return ("<site> [<url> [--as-of TIME] [--meta] | --pointer P [--meta] | --verify "
                "| --warc FILE [--as-of TIME]]")

    def short_desc(self) -> str:
        return "Print a stored body, verify a site's body store or export it to WARC"

    def long_desc(self) -> str:
        return (
            "Print the body stored for a URL (the newest, or the newest fetched at or before "
            "--as-of TIME; --meta prints its header instead) or at a pointer from a change event or a version "
            "(--pointer P), check every record and index of the site's store (--verify; exit "
            "status 1 if anything is damaged), or export each URL's latest body to a WARC file "
            "(--warc FILE, gzipped when it ends in .gz). The store is "
            "<WEBCRAWL_DATA_DIR>/<site>/bodies/ with every writer folder in it; a URL is looked up "
            "in canonical form, then as given. A pointer naming another machine (this one is "
            "WEBCRAWL_MACHINE_NAME, the host name by default) is read on that machine. TIME is "
            "seconds since the epoch or ISO 8601 (UTC unless it names a zone)."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--as-of", dest="as_of", metavar="TIME",
                            help="the newest body fetched at or before TIME")
        parser.add_argument("--pointer", metavar="P", help="the body stored at pointer P (from a change event or a version)")
        parser.add_argument("--meta", action="store_true", help="print the record's header, not the body")
        parser.add_argument("--verify", action="store_true", help="check the whole store")
        parser.add_argument("--warc", metavar="FILE", help="export each URL's latest body to FILE")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if not args or len(args) > 2:
            raise UsageError("expected a site name and a URL, or a site name with --pointer, --verify or --warc")
        site, url = args[0], (args[1] if len(args) == 2 else None)
        if sum((url is not None, bool(opts.pointer), bool(opts.verify), bool(opts.warc))) != 1:
            raise UsageError("give exactly one of a URL, --pointer, --verify or --warc")
        if opts.pointer and opts.as_of:
            raise UsageError("--as-of does not apply to --pointer: a pointer names one stored version",
                             print_help=False)
        pointer = self._pointer(opts.pointer) if opts.pointer else None
        try:
            machine = machine_name(self.settings.get("WEBCRAWL_MACHINE_NAME") or None)
        except ValueError as exc:
            fail(f"WEBCRAWL_MACHINE_NAME: {exc}")
        data_dir = self.settings.get("WEBCRAWL_DATA_DIR") or ".webcrawl"
        try:
            folder = bodies_folder(data_dir, site)
        except ValueError as exc:  # a malformed argument: the usage helps
            raise UsageError(str(exc), print_help=False) from None
        if not folder.is_dir():
            fail(f"no body store for site {site!r} at {folder}", _stores_hint(Path(data_dir)))
        as_of = parse_time(opts.as_of) if opts.as_of else None
        if opts.verify:
            self._verify(folder)
        elif opts.warc:
            report = export_warc(folder, opts.warc, as_of=as_of, gzip=opts.warc.endswith(".gz"))
            print(f"{report.records} records, {report.body_bytes} body bytes written to {opts.warc}"
                  + (f"; {len(report.skipped)} corrupt records left out" if report.skipped else ""),
                  file=sys.stderr)
            self.exitcode = 1 if report.skipped else 0
        else:
            self._show(folder, machine, url, pointer, as_of, opts.meta)

    @staticmethod
    def _pointer(text: str) -> Pointer:
        try:
            return Pointer.parse(text)
        except ValueError as exc:
            raise UsageError(f"--pointer: {exc}", print_help=False) from None

    def _show(self, folder: Path, machine: str, url: str | None, pointer: Pointer | None,
              as_of: float | None, meta: bool) -> None:
        """The body at ``pointer``, or the newest of ``url`` (canonical form first) as of ``as_of``."""
        stored: StoredBody | None = None
        try:
            with BodyReader(folder, machine=machine) as reader:
                if pointer is not None:
                    stored = reader.read(pointer)
                else:
                    assert url is not None
                    canonical = Canonicalizer().canonical(url)
                    for candidate in dict.fromkeys(c for c in (canonical, url) if c):
                        stored = reader.lookup(candidate, as_of)
                        if stored is not None:
                            break
        except StoreError as exc:  # corrupt, another machine's, or not in this store
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if stored is None:
            when = f" fetched at or before {_iso(as_of)}" if as_of is not None else ""
            print(f"no stored body of {url}{when}", file=sys.stderr)
            self.exitcode = 1
            return
        if meta:
            lines = [f"url: {stored.url}", f"fetch_time: {stored.fetch_time} ({_iso(stored.fetch_time)})",
                     f"status: {stored.status}", f"content_hash: {stored.content_hash}",
                     f"content_type: {stored.content_type}", f"body_length: {stored.body_length}",
                     f"pointer: {stored.pointer}"]
            lines += [f"header: {k}: {v}" for k, v in stored.headers]
            sys.stdout.write("\n".join(lines) + "\n")
        else:
            sys.stdout.buffer.write(stored.body)
        sys.stdout.flush()

    def _verify(self, folder: Path) -> None:
        report = verify(folder)
        print(f"{folder}: {report.segments} segments, {report.records_ok} records ok, "
              f"{report.bytes_scanned} bytes scanned, {report.torn_bytes} torn tail bytes, "
              f"{len(report.corrupt)} corrupt ranges, {len(report.index_errors)} index errors")
        for damage in report.corrupt:
            print(f"corrupt: {damage}")
        for problem in report.index_errors:
            print(f"index: {problem}")
        self.exitcode = 0 if report.ok else 1
