"""Scrapy settings of the webcrawl project. Every webcrawl setting is listed in the README's
settings reference; the values here are the defaults a user can override per crawl (``-s``)."""

BOT_NAME = "webcrawl"
SPIDER_MODULES = ["webcrawl.spiders"]
NEWSPIDER_MODULE = "webcrawl.spiders"
COMMANDS_MODULE = "webcrawl.commands"

# -- The Redis-backed scheduler -----------------------------------------------------------------
SCHEDULER = "webcrawl.scheduler.ReadyQueueScheduler"
# Its WEBCRAWL_* settings and their defaults: webcrawl/config.py (DEFAULTS) and the README.

# The ready queue enforces per-host delays across processes; Scrapy's own per-slot delay would
# add to it. Concurrency per host stays bounded by the delay.
DOWNLOAD_DELAY = 0
RANDOMIZE_DOWNLOAD_DELAY = False
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 8
AUTOTHROTTLE_ENABLED = False

# -- Safe defaults ------------------------------------------------------------------------------
TELNETCONSOLE_ENABLED = False
# Scrapy 2.19 starts a local HTTP server that runs Python code sent to it; never in a crawler.
REMOTE_CONTROL_ENABLED = False
COOKIES_ENABLED = False
ROBOTSTXT_OBEY = False  # webcrawl's own robots.txt middleware replaces Scrapy's
REDIRECT_MAX_TIMES = 10
DOWNLOAD_MAXSIZE = 32 * 1024 * 1024
DOWNLOAD_WARNSIZE = 8 * 1024 * 1024
DOWNLOAD_HANDLERS = {"file": None, "data": None, "ftp": None, "s3": None}

USER_AGENT = "webcrawl/0.1 (+https://example.invalid/webcrawl; set USER_AGENT to name your contact)"
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
