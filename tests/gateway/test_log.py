"""Gateway log lines: one per event, the same whether written by ``event`` or by logging."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest

from bridgecli.gateway import log as glog


@pytest.fixture
def gateway_logger():
    logger = logging.getLogger("bridgecli.gateway")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved


def _capture(logger: logging.Logger, fmt: str) -> io.StringIO:
    glog.setup(fmt)
    stream = io.StringIO()
    logger.handlers[0].setStream(stream)
    return stream


def test_human_lines(gateway_logger):
    stream = _capture(gateway_logger, "human")
    glog.event(gateway_logger, "delivered", entity="w", kind="SEND", msg="abc")
    glog.event(gateway_logger, "100% odd", logging.WARNING)
    glog.event(gateway_logger, "not shown", logging.DEBUG, x=1)
    gateway_logger.info("through logging %s", "too", extra={"fields": {"k": "v"}})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"\d\d:\d\d:\d\d info  delivered entity=w kind=SEND msg=abc", lines[0])
    assert re.fullmatch(r"\d\d:\d\d:\d\d warning 100% odd", lines[1])
    assert re.fullmatch(r"\d\d:\d\d:\d\d info  through logging too k=v", lines[2])


def test_json_lines(gateway_logger):
    stream = _capture(gateway_logger, "json")
    glog.event(gateway_logger, "sent", kind="ASK", delay_ms=0, path=glog)  # not JSON: str()
    gateway_logger.error("through logging", extra={"fields": {"n": 2}})
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert list(first) == ["ts", "level", "event", "kind", "delay_ms", "path"]
    assert first["level"] == "info" and first["event"] == "sent" and first["path"].startswith("<module")
    assert second == {"ts": second["ts"], "level": "error", "event": "through logging", "n": 2}


def test_event_goes_through_logging_when_someone_else_configured_the_logger(gateway_logger, caplog):
    gateway_logger.handlers.clear()
    gateway_logger.propagate = True
    with caplog.at_level(logging.INFO, logger="bridgecli.gateway"):
        glog.event(gateway_logger, "delivered", msg="m1")
    assert [(r.getMessage(), r.fields) for r in caplog.records] == [("delivered", {"msg": "m1"})]
