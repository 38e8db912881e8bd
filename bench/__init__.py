"""Benchmarks (not tests): `make bench` runs `python -m bench.run`. Nothing here is collected by pytest."""
