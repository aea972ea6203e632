"""webcrawl benchmarks: side-by-side measurements written to docs/benchmarks.md (never tests)."""
