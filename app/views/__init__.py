"""One folder per tab of the page (its view, state and figures), and the parts several tabs share:
``page`` (what a view is built with), ``panels`` (a step's panels), ``own_models``, ``upload``, and
``glossary`` (the symbols under the page)."""
