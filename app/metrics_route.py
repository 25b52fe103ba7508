"""``GET /metrics``: the server's LabMetrics (``core.serving.prometheus``) in the Prometheus text format.

Like the own-models fields it is for this machine by default: a client on a loopback address
gets the metrics, any other gets 403 unless the server was started with ``--allow-remote-metrics``
(the counters name the models the page has run, and scraping is for your own Prometheus).
"""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from core.serving.monitor import is_loopback_address
from core.serving.prometheus import CONTENT_TYPE, lab_metrics

PATH = "/metrics"


def from_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return is_loopback_address(host)
    except ValueError:  # not an address (e.g. a test client's name)
        return False


def metrics_route(allow_remote: bool = False) -> Route:
    async def metrics(request: Request) -> Response:
        if not (allow_remote or from_loopback(request)):
            return PlainTextResponse("/metrics is served to this machine only (start the app with "
                                     "--allow-remote-metrics to let others scrape it)\n", status_code=403)
        return Response(lab_metrics().exposition(), media_type=CONTENT_TYPE)

    return Route(PATH, metrics, methods=["GET"])
