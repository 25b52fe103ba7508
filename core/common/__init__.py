"""The bottom layer: errors, files, limits, the one timer, venv builds and loopback ports; the standard
library only."""
