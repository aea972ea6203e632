"""Scrapy extensions of webcrawl: the cycle planner and the crawl's progress."""
