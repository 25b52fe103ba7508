"""What a verify costs on this machine: the one verify probe (``probe``), the cached cost curve v(n)
the goodput controller and the views read (``curve``), and the expected-speedup model (``theory``)."""
