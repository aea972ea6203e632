"""webcrawl pipelines."""
