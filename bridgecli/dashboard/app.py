"""The Starlette application: the static page, one server-sent event stream, and the few
JSON endpoints behind it (state, a message, the history search, dead-letter actions). Every
route sits behind :class:`~bridgecli.dashboard.guard.Guard`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bridgecli.dashboard import history_view, receipt_view
from bridgecli.dashboard.collector import Collector, DeadLetterView
from bridgecli.dashboard.guard import Guard
from bridgecli.dashboard.metrics import PARTS, DashboardMetrics
from bridgecli.dashboard.traffic import Traffic
from bridgecli.errors import BridgeError, ExitCode

STATIC = Path(__file__).with_name("static")
#: how often the event stream sends a batch: the page lags the broker by at most this plus
#: the collector's period, and at 1,000 msg/s one batch carries hundreds of rows, not one each
TICK = 0.25
#: most traffic rows in one batch (the page keeps fewer; the rest are counted as skipped)
BATCH_LIMIT = 250
_HTTP_STATUS = {ExitCode.NOT_FOUND: 404, ExitCode.BROKER_UNAVAILABLE: 503, ExitCode.TIMEOUT: 504}


def _dumps(obj: Any) -> str:
    # ASCII-only JSON: nothing in a message can end the event's line or the data
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=str)


def create_app(
    token: str,
    port: int,
    collector: Collector,
    traffic: Traffic,
    dead_letters: DeadLetterView,
    metrics: DashboardMetrics | None = None,
) -> Guard:
    """The ASGI app for one dashboard; ``token`` and ``port`` are what :class:`Guard` checks.
    ``metrics`` counts the event stream and is served at ``/metrics`` (default: a fresh one)."""
    counted = metrics or DashboardMetrics()

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def state(request: Request) -> Response:
        return JSONResponse(
            {"now": time.time(), "version": collector.version, **collector.snapshot, "receipts": collector.receipts}
        )

    async def events(request: Request) -> Response:
        return StreamingResponse(_stream(request), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def _stream(request: Request) -> AsyncIterator[str]:
        sent_version, seq = -1, max(0, traffic.last_seq - BATCH_LIMIT)
        sent_receipts: dict[str, Any] = {}
        rates_at = 0.0
        yield "retry: 1000\n\n"
        counted.stream_opened()
        try:
            while True:
                update: dict[str, Any] = {"now": time.time()}
                if collector.version != sent_version:
                    sent_version = collector.version
                    update["state"] = collector.snapshot
                tracked = collector.receipts  # replaced whole by the collector's thread, read once
                if tracked is not sent_receipts:
                    fresh, sent_receipts = receipt_view.changed(sent_receipts, tracked), tracked
                    if fresh:
                        update["receipts"] = fresh
                rows, seq, skipped = traffic.since(seq, BATCH_LIMIT)
                if rows or skipped:
                    update["traffic"], update["skipped"] = rows, skipped
                if time.monotonic() - rates_at >= 1.0:
                    rates_at = time.monotonic()
                    update["rates"] = traffic.rates.series()
                counted.update_sent([part for part in PARTS if part in update])
                yield f"data: {_dumps(update)}\n\n"
                await asyncio.sleep(TICK)
        finally:  # the client went away: the stream's task is cancelled at its sleep
            counted.stream_closed()

    async def message(request: Request) -> Response:
        msg_id = request.path_params["msg_id"]
        row = traffic.get(msg_id)
        if row is None:
            return JSONResponse({"error": f"message {msg_id} is no longer in the dashboard's history"}, 404)
        return JSONResponse({"message": row, "thread": traffic.thread(msg_id)})

    async def history(request: Request) -> Response:
        try:
            fields = history_view.request_fields(request.query_params)
        except history_view.Refused as exc:
            return JSONResponse({"error": str(exc)}, 400)
        status, body = await run_in_threadpool(history_view.search, fields)
        return JSONResponse(body, status)

    async def dlq_retry(request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        ids = None if body.get("all") is True else body.get("ids")
        if ids is not None and not (isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids)):
            return JSONResponse({"error": 'send {"ids": [ID, ...]} or {"all": true}'}, 400)
        return await _operation(lambda: {"retried": dead_letters.retry(ids)})

    async def dlq_purge(request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        return await _operation(lambda: {"purged": dead_letters.purge()})

    async def _operation(run: Any) -> Response:
        try:
            result = await run_in_threadpool(run)
        except BridgeError as exc:
            return JSONResponse({"error": str(exc)}, _HTTP_STATUS.get(exc.exit_code, 409))
        collector.poke()
        return JSONResponse(result)

    async def metrics_text(request: Request) -> Response:
        return Response(counted.exposition(), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/", index),
        Route("/metrics", metrics_text),
        Route("/api/state", state),
        Route("/api/events", events),
        Route("/api/message/{msg_id}", message),
        Route("/api/history", history),
        Route("/api/dlq/retry", dlq_retry, methods=["POST"]),
        Route("/api/dlq/purge", dlq_purge, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    return Guard(Starlette(routes=routes), token, port)


async def _json_body(request: Request) -> dict[str, Any] | Response:
    """The JSON object a state-changing request must carry (``application/json``: a type no
    cross-site form can send without a preflight this server never grants)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return JSONResponse({"error": "send Content-Type: application/json"}, 415)
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return JSONResponse({"error": "the body is not JSON"}, 400)
    return body if isinstance(body, dict) else JSONResponse({"error": "send a JSON object"}, 400)
