"""The bottom layer: errors, files, limits and the one timer; the standard library only."""
