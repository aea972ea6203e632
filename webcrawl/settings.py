"""Scrapy settings of the webcrawl project. Every webcrawl setting is listed in the README's
settings reference; the values here are the defaults a user can override per crawl (``-s``)."""

import os

from scrapy.settings import default_settings as _scrapy_defaults

from webcrawl import optional
from webcrawl.items import EXPORTED_FIELDS

BOT_NAME = "webcrawl"
SPIDER_MODULES = ["webcrawl.spiders"]
NEWSPIDER_MODULE = "webcrawl.spiders"
COMMANDS_MODULE = "webcrawl.commands"
# Site files (webcrawl/sites/*.toml and WEBCRAWL_SITES_DIR) are spiders too.
SPIDER_LOADER_CLASS = "webcrawl.spiderloader.SiteSpiderLoader"

# -- From the environment (scrapyd, containers); a -s setting wins over these ------------------
WEBCRAWL_REDIS_URL = os.environ.get("WEBCRAWL_REDIS_URL") or None
WEBCRAWL_DATA_DIR = os.environ.get("WEBCRAWL_DATA_DIR") or ".webcrawl"
WEBCRAWL_SITES_DIR = os.environ.get("WEBCRAWL_SITES_DIR") or None

# -- The Redis-backed scheduler -----------------------------------------------------------------
SCHEDULER = "webcrawl.scheduler.ReadyQueueScheduler"
# Its WEBCRAWL_* settings and their defaults: webcrawl/config.py (DEFAULTS) and the README.

# The ready queue enforces per-host delays across processes; Scrapy's own per-slot delay would
# add to it. Concurrency per host stays bounded by the delay. Many hosts at a delay each keep many
# requests in flight (each one waits its turn in the spacing middleware, then the network): 128
# lets one process reach the CPU it has on a politeness-bound crawl (docs/benchmarks.md).
DOWNLOAD_DELAY = 0
DOWNLOAD_DELAY_JITTER = 0
CONCURRENT_REQUESTS = 128
CONCURRENT_REQUESTS_PER_DOMAIN = 8
AUTOTHROTTLE_ENABLED = False

# -- Politeness and safety middlewares ----------------------------------------------------------
DOWNLOADER_MIDDLEWARES = {
    # Replaced: Scrapy's fails open on errors and never expires its cache (RFC 9309 asks both).
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    # Replaced by the SSRF guard, which judges scope on every request and hop (dont_filter too).
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    "webcrawl.middlewares.ssrf.SSRFGuardMiddleware": 45,
    "webcrawl.middlewares.robots.RobotsMiddleware": 100,
    # Above Retry (550): over-sized, cut-short and timed-out answers as one WARNING and a stat.
    "webcrawl.middlewares.hostile.HostileAnswerMiddleware": 560,
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "webcrawl.middlewares.hostile.DecodingMiddleware": 590,
    # Scrapy's, looking at the bytes before decoding a page to find a meta refresh in it.
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "webcrawl.middlewares.refresh.QuickMetaRefreshMiddleware": 580,
    # Above Redirect (600) and HttpCompression (590): sees final responses, adds validators last.
    "webcrawl.middlewares.conditional.ConditionalRequestMiddleware": 650,
    # Above Retry (550), Redirect (600) and conditional (650): sees every attempt's cost.
    "webcrawl.middlewares.cost.CostHealthMiddleware": 660,
    # Scrapy's stats, the request's size summed instead of its text built, at Scrapy's order.
    "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
    "webcrawl.middlewares.stats.DownloaderStats": 850,
    # Last before the downloader: each request to a host the host's delay after the previous one
    # (a stalled reactor cannot send two at once); a slow response cannot hold its host.
    "webcrawl.middlewares.spacing.HostSpacingMiddleware": 950,
}

# -- Cost-aware revisits (docs/revisit.md, docs/report.md) ---------------------------------------
SPIDER_MIDDLEWARES = {
    # At the engine: start requests go to the scheduler as they come, not one per loop turn.
    "webcrawl.middlewares.startfeed.StartFeedMiddleware": 10,
    # Closest to the engine: scores requests after depth, URL length and referer have had theirs.
    "webcrawl.middlewares.priority.PriorityMiddleware": 40,
}
EXTENSIONS = {
    # Cycles, the budget rate, and every known page's revisit interval (docs/allocator.md).
    "webcrawl.extensions.allocator.Allocator": 500,
    "webcrawl.extensions.progress.ProgressLog": 510,
    # At close, one WARNING saying why a crawl fetched nothing or had most requests refused.
    "webcrawl.extensions.closing.ClosingNote": 520,
    # A stop (CLOSESPIDER_TIMEOUT, SIGINT/SIGTERM) ends within WEBCRAWL_STOP_GRACE_SECONDS.
    "webcrawl.extensions.stop.BoundedStop": 530,
    # A consumer of the change events falling behind their retention: a stat and a warning.
    "webcrawl.extensions.eventwatch.EventLagWatch": 540,
    # The local copy in a database, written from the crawl state off the reactor thread.
    "webcrawl.extensions.database.DatabaseExtension": 550,
}
# Scrapy's remote control extension and cookies middleware are imported only when their settings
# turn them on (webcrawl.optional; off, their imports cost start-up 0.14 s). Scrapy imports every
# class a component setting names, even one set to None, so their stand-ins replace them in the
# base lists, at the same order.
EXTENSIONS_BASE = optional.replace_in(_scrapy_defaults.EXTENSIONS_BASE)
DOWNLOADER_MIDDLEWARES_BASE = optional.replace_in(_scrapy_defaults.DOWNLOADER_MIDDLEWARES_BASE)
# Host names are checked on the addresses they resolve to, at connection time (no DNS rebinding).
TWISTED_DNS_RESOLVER = "webcrawl.net.resolver.GuardedResolver"

# -- Change detection and storage (docs/change-detection.md, docs/store.md) ----------------------
ITEM_PIPELINES = {
    "webcrawl.pipelines.recordhash.RecordHashPipeline": 300,
    # Listing pages as change detectors: a changed summary schedules its item soon.
    "webcrawl.pipelines.listing.ListingPipeline": 350,
    # Change events only (the record-hash pipeline stores bodies and records the events).
    "webcrawl.pipelines.events.EventFeedPipeline": 900,
}
# Feeds carry change events (docs/events.md), never bodies or headers.
FEED_EXPORT_FIELDS = EXPORTED_FIELDS

# -- Safe defaults ------------------------------------------------------------------------------
TELNETCONSOLE_ENABLED = False
# Scrapy 2.19 starts a local HTTP server that runs Python code sent to it; never in a crawler.
REMOTE_CONTROL_ENABLED = False
COOKIES_ENABLED = False
ROBOTSTXT_OBEY = False  # webcrawl's own robots.txt middleware replaces Scrapy's
REDIRECT_MAX_TIMES = 10
DOWNLOAD_MAXSIZE = 32 * 1024 * 1024
DOWNLOAD_WARNSIZE = 8 * 1024 * 1024
DOWNLOAD_HANDLERS = {"file": None, "data": None, "ftp": None, "s3": None,
                     # aiohttp under the SSRF guard, proxies, verified TLS (docs/http.md).
                     "http": "webcrawl.net.handler.GuardedDownloadHandler",
                     "https": "webcrawl.net.handler.GuardedDownloadHandler"}
# A deadline on the whole answer (a body dripping a byte now and then is cut too): slow hosts
# cannot hold a crawl of many sites (a site file's limits.timeout_seconds sets it per site).
DOWNLOAD_TIMEOUT = 30

# Scrapy's in-memory stats, without the wrapping that made each of a page's three dozen counts
# cost 1.7 µs (webcrawl/stats.py).
STATS_CLASS = "webcrawl.stats.StatsCollector"

USER_AGENT = "webcrawl/0.1 (+https://example.invalid/webcrawl; set USER_AGENT to name your contact)"
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
