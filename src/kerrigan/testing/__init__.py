"""Fakes and builders shipped with Kerrigan for its own tests, benchmarks and demos."""
