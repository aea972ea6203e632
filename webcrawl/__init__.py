"""webcrawl: a cost-aware, polite Scrapy crawler backed by Redis."""

__version__ = "0.1.0"
__all__ = ["__version__"]
