"""Training code for the embedded tiny model family and the learned drafters."""
