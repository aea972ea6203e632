"""The naive baseline: a plain Scrapy spider (``roundrobin``) with its own settings module
(:mod:`bench.liveweb.roundrobin.settings`) that discovers the test web and then revisits every
known URL in round-robin order, paced to a credits-per-second budget, politely (robots.txt, a
per-host delay, Crawl-delay and Retry-After per host). Nothing here comes from webcrawl."""
