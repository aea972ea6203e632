"""webcrawl middlewares."""
