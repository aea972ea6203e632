"""The baseline's spiders."""
