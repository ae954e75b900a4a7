"""A headless Chromium the tests can drive: open a page, run JavaScript in it, click, wait.

It speaks the Chrome DevTools Protocol over the websocket Chromium opens with --remote-debugging-port
(websocket-client comes with jupyter_server). Used where a check must be made by the real page, as a
user's browser runs it (nbgrader's formgrader buttons); test_book.py dumps static pages without it.
"""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    """One browser tab."""

    def __init__(self, ws):
        self.ws, self.calls, self.errors = ws, 0, []

    def call(self, method: str, **params) -> dict:
        self.calls += 1
        ident = self.calls
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == "Runtime.exceptionThrown":
                self.errors.append(message["params"]["exceptionDetails"].get("exception", {}).get("description", "?"))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, what: str = ""):
        """Poll a JavaScript expression until it gives a truthy value; that value."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                value = self.js(expression)
            except RuntimeError:  # the page is still loading
                value = None
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"waited {timeout:g} s for {what or expression}")

    def goto(self, url: str, timeout: float = 60.0) -> None:
        """Open a URL and wait until the new document has loaded (it may have redirected elsewhere)."""
        self.js("window.__previous_document = true")
        self.call("Page.navigate", url=url)
        self.wait_for("!window.__previous_document && document.readyState === 'complete'", timeout, f"{url} to load")


@contextmanager
def browser(chromium: str, profile: Path):
    """A fresh headless Chromium with one tab; the tab (a Page)."""
    port = free_port()
    proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end, targets = time.monotonic() + 60, []
        while not targets:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5) as reply:
                    targets = [t for t in json.load(reply) if t.get("type") == "page"]
            except OSError:
                if time.monotonic() > end or proc.poll() is not None:
                    raise AssertionError(f"chromium did not open its debugging port (exit status {proc.poll()})")
                time.sleep(0.25)
        ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=180, suppress_origin=True)
        try:
            page = Page(ws)
            page.call("Page.enable")
            page.call("Runtime.enable")
            yield page
        finally:
            ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
