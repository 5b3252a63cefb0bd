#!/usr/bin/env python3
"""A Kareus HTML report in headless Chromium, through the DevTools protocol on a pipe (standard
library only: no WebSocket, no puppeteer).

  report_browser.py check REPORT.html [--width 1300] [--section TITLE]... [--text TEXT]...
      Loads the page and fails (exit 1, one line per fault on stderr) when: a section asked for (an
      h2 starting with TITLE) is missing or renders empty; a text asked for is not on the page; an
      inline SVG draws nothing; the page logs a console error, throws, or loads anything but itself
      (it must read offline); a text's box leaves the SVG that holds it or the box of an element
      that clips it; the page is wider than the window.
  report_browser.py screenshot REPORT.html OUT.png [--width 1300] [--max-height PX] [--scale S]
      A PNG of the page at that window width, from the top, at most --max-height CSS pixels tall.

Exit 77 (ctest's skip) when Chromium is not installed. Chromium comes from Debian's `chromium`
(scripts/install-deps.sh); CHROMIUM=/path/to/binary picks another.
"""

import argparse
import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Runs in the page; returns a list of faults, each one line.
CHECK_JS = r"""
(() => {
  const faults = [];
  const tol = 1;  // CSS pixels of rounding
  const where = (el) => {
    const text = (el.textContent || '').trim().replace(/\s+/g, ' ');
    return `<${el.tagName.toLowerCase()}> "${text.slice(0, 70)}"`;
  };
  const inside = (b, r) => b.left >= r.left - tol && b.right <= r.right + tol &&
                           b.top >= r.top - tol && b.bottom <= r.bottom + tol;
  const fmt = (b) => `[${b.left.toFixed(0)},${b.top.toFixed(0)} ${b.right.toFixed(0)},${b.bottom.toFixed(0)}]`;

  // Sections: each h2 and what follows it up to the next h2.
  const sections = {};
  for (const h of document.querySelectorAll('h2')) {
    let height = 0, svgs = 0;
    for (let el = h.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
      height += el.getBoundingClientRect().height;
      svgs += el.tagName.toLowerCase() === 'svg' ? 1 : el.querySelectorAll('svg').length;
    }
    sections[h.textContent.trim()] = {height, svgs};
  }

  // Every outermost SVG draws something and holds its own text.
  for (const svg of document.querySelectorAll('svg')) {
    if (svg.parentElement.closest('svg')) continue;
    const r = svg.getBoundingClientRect();
    if (r.width < 50 || r.height < 20) faults.push(`an SVG renders ${r.width.toFixed(0)}x${r.height.toFixed(0)} px`);
    if (!svg.querySelector('path, rect, line, polyline, polygon, circle, use'))
      faults.push('an SVG draws no shape');
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const b = t.getBoundingClientRect();
      if (b.width === 0 && b.height === 0) continue;  // not rendered (display:none)
      if (!inside(b, r)) faults.push(`text clipped by its SVG: ${where(t)} at ${fmt(b)}, the SVG at ${fmt(r)}`);
    }
  }

  // HTML text: inside the window's width and inside every ancestor that clips.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim() || node.parentElement.closest('svg')) continue;
    range.selectNodeContents(node);
    const b = range.getBoundingClientRect();
    if (b.width === 0 && b.height === 0) continue;
    if (b.left < -tol || b.right > window.innerWidth + tol)
      faults.push(`text outside the window's width (${window.innerWidth} px): ` +
                  `${where(node.parentElement)} at ${fmt(b)}`);
    for (let el = node.parentElement; el && el !== document.documentElement; el = el.parentElement) {
      const style = getComputedStyle(el);
      if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
      if (!inside(b, el.getBoundingClientRect()))
        faults.push(`text clipped by ${where(el).slice(0, 40)}: ${where(node.parentElement)}`);
    }
  }
  for (const el of document.body.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
    if (el.scrollWidth > el.clientWidth + tol || el.scrollHeight > el.clientHeight + tol)
      faults.push(`content overflows its box: ${where(el)}`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth + tol)
    faults.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  const text = document.body.textContent.replace(/\s+/g, ' ');
  return {faults, sections, text};
})()
"""


class Chromium:
    """One headless Chromium driven over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-framed)."""

    def __init__(self, binary, width, height):
        self.profile = tempfile.TemporaryDirectory(prefix="kareus-chromium-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # The child sees its ends as fds 3 and 4 (copied first, in case either already is 3 or 4).
        def child_fds():
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
        args = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--force-device-scale-factor=1", f"--window-size={width},{height}",
                f"--user-data-dir={self.profile.name}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses root with its sandbox
        # Its log goes to a file, read only when it dies: a pipe nobody reads would fill and block it.
        self.log = open(pathlib.Path(self.profile.name) / "stderr.log", "w+b")
        self.proc = subprocess.Popen(args, preexec_fn=child_fds, pass_fds=(3, 4, to_chrome_r, from_chrome_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"Chromium closed its pipe: {err}")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, timeout_s=60, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, url, width, height):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout_s=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        self.log.close()
        self.profile.cleanup()


def find_chromium():
    if os.environ.get("CHROMIUM"):  # the one asked for, or none
        return shutil.which(os.environ["CHROMIUM"])
    return shutil.which("chromium") or shutil.which("chromium-browser")


def page_faults(browser, url):
    """Console errors, exceptions and outside loads seen while the page loaded."""
    faults = []
    for event in browser.events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            faults.append(f"console error: {text}")
        elif method == "Runtime.exceptionThrown":
            faults.append(f"exception: {params['exceptionDetails'].get('text', '')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            faults.append(f"console error: {params['entry'].get('text', '')}")
        elif method == "Network.requestWillBeSent":
            requested = params["request"]["url"]
            if requested != url and not requested.startswith("data:"):
                faults.append(f"the page loads {requested}: it is not self-contained")
    return faults


def check(browser, url, width, sections, texts):
    browser.open(url, width, 900)
    result = browser.send("Runtime.evaluate", {"expression": CHECK_JS, "returnByValue": True})
    if "exceptionDetails" in result:
        raise RuntimeError(f"the check itself failed: {result['exceptionDetails']}")
    value = result["result"]["value"]
    faults = page_faults(browser, url) + value["faults"]
    found = value["sections"]
    for title in sections:
        match = [name for name in found if name.startswith(title)]
        if not match:
            faults.append(f"no section '{title}' (the page has: {', '.join(found) or 'none'})")
        elif found[match[0]]["height"] < 20:
            faults.append(f"section '{match[0]}' renders empty ({found[match[0]]['height']:.0f} px)")
    for text in texts:
        if " ".join(text.split()) not in value["text"]:
            faults.append(f"the page does not say '{text}'")
    return faults, found


def screenshot(browser, url, width, max_height, scale, out):
    browser.open(url, width, 900)
    content = browser.send("Page.getLayoutMetrics")["cssContentSize"]
    height = min(content["height"], max_height) if max_height else content["height"]
    shot = browser.send("Page.captureScreenshot",
                        {"format": "png", "captureBeyondViewport": True,
                         "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": scale}})
    data = base64.b64decode(shot["data"])
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return round(width * scale), round(height * scale), len(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check")
    c.add_argument("report", type=pathlib.Path)
    c.add_argument("--width", type=int, default=1300)
    c.add_argument("--section", action="append", default=[], help="a section title (h2) the page must render")
    c.add_argument("--text", action="append", default=[], help="a text the page must hold")
    s = sub.add_parser("screenshot")
    s.add_argument("report", type=pathlib.Path)
    s.add_argument("out", type=pathlib.Path)
    s.add_argument("--width", type=int, default=1300)
    s.add_argument("--max-height", type=int, default=0, help="CSS pixels from the top; 0: the whole page")
    s.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()

    binary = find_chromium()
    if not binary:
        print("report_browser: skipped: Chromium is not installed (scripts/install-deps.sh installs Debian's "
              "chromium)", file=sys.stderr)
        return SKIP
    if not args.report.is_file():
        print(f"report_browser: {args.report}: no such file", file=sys.stderr)
        return 2
    url = args.report.resolve().as_uri()
    browser = Chromium(binary, args.width, 900)
    try:
        if args.command == "check":
            faults, found = check(browser, url, args.width, args.section, args.text)
            for fault in faults:
                print(f"report_browser: {args.report.name} at {args.width} px: {fault}", file=sys.stderr)
            if faults:
                return 1
            print(f"{args.report.name} at {args.width} px: {len(found)} sections render "
                  f"({', '.join(found)}), no console error, no clipped text")
            return 0
        w, h, size = screenshot(browser, url, args.width, args.max_height, args.scale, args.out)
        print(f"{args.out}: {w}x{h} px, {size // 1024} KiB")
        return 0
    finally:
        browser.close()


if __name__ == "__main__":
    sys.exit(main())
