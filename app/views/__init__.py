"""One module per tab of the app; each builds its layout and wires its own handlers."""
