"""Crawl state in Redis: key names, Lua scripts, frontiers and the ready queue, the seen filter."""
