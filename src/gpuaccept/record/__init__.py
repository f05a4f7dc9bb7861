"""Record: what ran where (environment capture), the run history, and comparisons over it."""
