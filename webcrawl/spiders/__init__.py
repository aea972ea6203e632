"""webcrawl spiders."""
