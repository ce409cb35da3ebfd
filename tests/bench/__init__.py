"""The benchmarks at their larger sizes: `make test-bench` (pytest -m bench) runs them, `make test` does not."""
