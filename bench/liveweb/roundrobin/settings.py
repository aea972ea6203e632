"""Settings of the round-robin baseline: Scrapy's defaults plus politeness (robots.txt, a fixed
per-host delay without jitter, Crawl-delay and Retry-After per host). Nothing from webcrawl."""

BOT_NAME = "liveweb-roundrobin"
SPIDER_MODULES = ["bench.liveweb.roundrobin.spider"]
USER_AGENT = "liveweb-roundrobin/1.0 (+http://127.0.0.1/; bench@example.org)"
ROBOTSTXT_OBEY = True
DOWNLOAD_DELAY = 0.25  # the hosts' 0.2 s plus the margin below
DOWNLOAD_DELAY_JITTER = 0.0
LIVEWEB_DELAY_MARGIN_SECONDS = 0.05  # a first request waits for its connection: arrivals bunch up
DOWNLOADER_MIDDLEWARES = {"bench.liveweb.roundrobin.delays.HostDelays": 580}
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
