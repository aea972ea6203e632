"""Settings of the baseline: Scrapy's own defaults, except what a fair comparison needs.

- Concurrency: the same as webcrawl's defaults (32 requests, 8 per domain). The benchmarks pass
  webcrawl's current values on the command line as well, so the two never drift apart.
- No download delay: the benchmarks measure throughput (politeness runs pass their delay).
- robots.txt obeyed, as ``scrapy startproject`` sets it and as webcrawl does.
- Log level INFO, as webcrawl's: Scrapy's default DEBUG writes a line per request and per item,
  a cost that says nothing about crawling.

Nothing here comes from webcrawl: no middleware, pipeline, extension or scheduler of it.
"""

BOT_NAME = "vanillabench"

SPIDER_MODULES = ["vanillabench.spiders"]
NEWSPIDER_MODULE = "vanillabench.spiders"

ROBOTSTXT_OBEY = True

CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0

LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
