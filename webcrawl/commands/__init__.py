"""webcrawl commands."""
