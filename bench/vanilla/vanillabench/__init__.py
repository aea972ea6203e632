"""The baseline of the benchmarks: a Scrapy project as ``scrapy startproject`` makes it."""
