"""Comparisons over the history: a run against another, a node against its past, a GPU
against its fleet."""
