"""One HTTP POST and what its outcome means for at-least-once delivery.

Kept apart from the backend so ``bridge webhook-test`` judges an endpoint by exactly the
gateway's rules:

* **2xx**: delivered; the gateway acks the broker.
* **5xx, 408, 429, timeouts, refused or reset connections**: retryable (the gateway retries
  with backoff, then dead-letters after ``messaging.max_attempts``).
* **any other 4xx, and 3xx**: not retryable (straight to ``bridge.dlq``). Redirects are not
  followed: urllib would turn a redirected POST into a bodyless GET and report success.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass

RETRYABLE_4XX = frozenset({408, 429})


@dataclass(frozen=True)
class Outcome:
    """What happened to one POST."""

    delivered: bool
    retryable: bool
    detail: str  # e.g. "HTTP 503: busy" or "timed out after 10s"
    status: int | None = None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx status


_OPENER = urllib.request.build_opener(_NoRedirects)


def signature(secret: str, body: bytes) -> str:
    """The ``X-Bridge-Signature`` header value: ``sha256=`` + HMAC-SHA256 of the body, so a
    receiver can check that the POST came from a gateway that knows the shared secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(url: str, body: bytes, *, headers: dict[str, str], timeout: float) -> Outcome:
    """POST ``body`` (JSON) to ``url`` and classify the answer; never raises for HTTP or
    network failures."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", **headers}
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)  # drain, so keep-alive servers see a complete exchange
            return Outcome(True, False, f"HTTP {response.status}", response.status)
    except urllib.error.HTTPError as exc:
        code = exc.code
        # the start of the answer, on one line: enough to recognise it in `bridge dlq show`
        text = " ".join(exc.read(200).decode("utf-8", errors="replace").split())[:80]
        detail = f"HTTP {code}" + (f": {text!r}" if text else "")
        if 300 <= code < 400:
            detail += f" (redirect to {exc.headers.get('Location')!r} not followed)"
        return Outcome(False, code >= 500 or code in RETRYABLE_4XX, detail, code)
    except TimeoutError:
        return Outcome(False, True, f"timed out after {timeout:g}s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return Outcome(False, True, f"timed out after {timeout:g}s")
        return Outcome(False, True, f"cannot connect: {reason}")
    except (ConnectionError, OSError) as exc:  # reset mid-response, etc.
        return Outcome(False, True, f"connection failed: {exc}")
