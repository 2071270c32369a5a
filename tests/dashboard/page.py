"""A dashboard tab in headless Chromium, driven over CDP as a person would drive it."""

from __future__ import annotations

import base64
import json
from pathlib import Path


class Page:
    """One tab driven over CDP as a person would: it opens the printed URL and clicks."""

    def __init__(self, browser, url: str) -> None:
        from bridgecli_cdp.cdp import Cdp, browser_ws_url

        self.cdp = Cdp(browser_ws_url(browser.endpoint))
        target = self.cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.cdp.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1500, "height": 1150, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )
        self.cdp.call("Page.navigate", {"url": url}, session=self.session)

    def js(self, expression: str):
        reply = self.cdp.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in reply:
            raise AssertionError(reply["exceptionDetails"])
        return reply["result"].get("value")

    def texts(self, selector: str) -> list[str]:
        return self.js(f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)") or []

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element (scrolled into view first)."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        assert box, f"nothing matches {selector}"
        for kind in ("mousePressed", "mouseReleased"):
            self.cdp.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=self.session,
            )

    def type(self, selector: str, text: str) -> None:
        """Focus the input and type ``text`` over what it held, as keystrokes would."""
        self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select(); }})()")
        if text:
            self.cdp.call("Input.insertText", {"text": text}, session=self.session)
        else:
            self.cdp.call(
                "Input.dispatchKeyEvent",
                {"type": "keyDown", "key": "Backspace", "code": "Backspace", "windowsVirtualKeyCode": 8},
                session=self.session,
            )

    def screenshot(self, path: Path) -> None:
        self.js("window.scrollTo(0, 0)")
        png = base64.b64decode(self.cdp.call("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"])
        path.write_bytes(png)

    def close(self) -> None:
        self.cdp.close()
