"""Measurements over whole runs: ``python -m core bench`` (every drafter side by side), the app's
Compare rounds, and the batch-size study; all time with one interleaved timer (``timing``)."""
