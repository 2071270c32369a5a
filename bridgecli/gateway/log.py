"""One log line per gateway event, human-readable or JSON (``--log-format json``)."""

from __future__ import annotations

import json
import logging
import sys
import time


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"ts": round(record.created, 3), "level": record.levelname.lower(), "event": record.getMessage()}
        data.update(getattr(record, "fields", {}))
        return json.dumps(data, ensure_ascii=False, default=str)


class _HumanFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = getattr(record, "fields", {})
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{stamp} {record.levelname.lower():5} {record.getMessage()}" + (f" {extra}" if extra else "")


def setup(fmt: str = "human") -> logging.Logger:
    """Configure the ``bridgecli.gateway`` logger to write to stderr in ``fmt``."""
    logger = logging.getLogger("bridgecli.gateway")
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _HumanFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    return logger


def event(logger: logging.Logger, message: str, level: int = logging.INFO, **fields: object) -> None:
    """Log ``message`` with structured ``fields`` (shown as k=v, or as JSON keys)."""
    logger.log(level, message, extra={"fields": fields})
