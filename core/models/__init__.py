"""Presets and model loading (the embedded tiny family, Gemma 3 270M from PyPI, any local folder or
hub id), the held-out prompt files, and the fingerprint that ties cached results to a target."""
