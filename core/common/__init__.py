"""The bottom layer: errors, files, limits, the one timer and loopback ports; the standard library only."""
