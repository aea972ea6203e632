"""The benchmarks' own tests: their harnesses (test webs, servers, judges, baselines) do what
their figures rely on. Run them with ``./run tests bench/tests``; ``./run tests`` alone runs the
crawler's suite, which imports nothing of the benchmarks."""
