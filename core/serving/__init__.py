"""Toward production: the lab's runs as Prometheus metrics in vLLM's names, ``serve-metrics``, and
the monitor that reads a serving engine's ``/metrics``."""
