#!/usr/bin/env python3
"""Opens `flare report --html` pages in a headless Chromium and checks they drew.

Usage: html_browser_check.py PAGES_DIR

For every *.html in PAGES_DIR (test_report_html keeps its pages there), runs
Debian's chromium (`--headless --no-sandbox --disable-gpu --dump-dom` with a
virtual-time budget) and checks, in the DOM after the page's script ran:

  * <body data-rendered="ok">, and data-charts-drawn equal to
    data-charts-expected (the page's script counts what it drew);
  * one uPlot chart, with its canvas, for every time series the page's data
    asks for (counted here from the JSON blocks, independently of the
    script): GPU busy and each NVML metric per device, each PM metric of each
    drawn window, and its first two again beside each triggered replay in it;
  * the PC section shows a table of hottest source lines for every window
    whose data has lines, with a row for each line (counted from the JSON);
  * the SASS section shows, for every window with SASS metrics, a table of
    hottest instructions and one of hottest source lines (where it has
    lines), a row for each, and a "threads" and "sectors" column exactly
    where the window counted their metrics;
  * the replay section shows each value's error bound and status where the
    data has a note on it (range replay by PM sampling): a bound beside each
    value that has one, a status marker for each value not "measured", the
    span's method line, and a legend under each such span's table;
  * the page opened with ?section=timeline draws too;
  * a copy of the page with one data block broken says so: data-rendered is
    "error" and the reason is shown on the page.

Chromium missing is a failure (exit 1), so that CI cannot pass without
having drawn anything, unless FLARE_SKIP_BROWSER=1 is set: then the test is
reported as skipped (exit 77, CTest's SKIP_RETURN_CODE). $FLARE_CHROMIUM
names another browser binary. Standard library only.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
BLOCK = re.compile(
    r'<script type="application/json" class="section-data" id="data-([a-z]+)">(.*?)</script>',
    re.S)


def find_chromium():
    named = os.environ.get("FLARE_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.access(named, os.X_OK) else None)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dump_dom(chromium, url, profile):
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
               "--user-data-dir=" + profile, "--window-size=1280,1000",
               "--virtual-time-budget=20000", "--dump-dom", url]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    if done.returncode != 0:
        raise RuntimeError("chromium exited %d: %s" % (done.returncode,
                                                       done.stderr.decode(errors="replace")[-2000:]))
    return done.stdout.decode("utf-8", errors="replace")


def body_attributes(dom):
    match = re.search(r"<body([^>]*)>", dom)
    if not match:
        return {}
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', match.group(1)))


def expected_time_charts(page_text, only=None):
    """The uPlot charts the page's data asks for."""
    data = {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(page_text)}
    count = 0
    if only in (None, "timeline"):
        for device in data["timeline"]["devices"]:
            count += 1 if device["busy"] else 0
            # A metric sampled once is said in words, not drawn (report.js).
            count += sum(1 for m in device["metrics"] if m["t"] and m["samples"] >= 2)
    if only in (None, "pm"):
        for window in data["pm"]["windows"]:
            if window["drawn"]:
                count += sum(1 for m in window["metrics"] if m["t"])
    if only in (None, "triggered"):
        # A triggered replay draws its PM window's first two metrics again.
        drawn = {(w["pid"], w["id"]): w for w in data["pm"]["windows"] if w["drawn"]}
        for replay in data["triggered"]["replays"]:
            window = replay["window"] and drawn.get((replay["window"]["pid"],
                                                     replay["window"]["id"]))
            if window:
                count += min(2, sum(1 for m in window["metrics"] if m["t"]))
    return count


def check_drawn(dom, what, expected_charts, problems):
    attributes = body_attributes(dom)
    if attributes.get("data-rendered") != "ok":
        status = re.search(r'id="page-status"[^>]*>(.*?)<', dom, re.S)
        problems.append("%s: data-rendered=%r (%s)" % (what, attributes.get("data-rendered"),
                                                      status.group(1) if status else "no message"))
        return
    drawn, wanted = attributes.get("data-charts-drawn"), attributes.get("data-charts-expected")
    if drawn != wanted:
        problems.append("%s: %s of %s charts drew" % (what, drawn, wanted))
    plots = len(re.findall(r'<div class="uplot', dom))
    canvases = len(re.findall(r"<canvas", dom))
    if plots != expected_charts or canvases != expected_charts:
        problems.append("%s: %d uPlot charts and %d canvases, the data asks for %d" %
                        (what, plots, canvases, expected_charts))


def check_pc_lines(dom, page_text, what, problems):
    """One table of source lines per PC window that has lines, a row a line."""
    data = {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(page_text)}
    wanted = [len(w["lines"]) for w in data["pc"]["windows"] if w.get("lines")]
    tables = re.findall(r'<table class="data pc-lines">(.*?)</table>', dom, re.S)
    drawn = [len(re.findall(r"<tr\b", t)) - 1 for t in tables]  # less the heading row
    if drawn != wanted:
        problems.append("%s: source line tables with %s rows, the data asks for %s" %
                        (what, drawn, wanted))


def check_sass_tables(dom, page_text, what, problems):
    """The SASS section's tables of instructions and lines, a row an item,
    with the derived columns the data says the window has."""
    data = {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(page_text)}
    windows = [w for w in data.get("sass", {}).get("windows", []) if w["device"] is not None]
    for kind, key in (("sass-top", "top"), ("sass-lines", "lines")):
        wanted = [len(w[key]) for w in windows if w[key]]
        tables = re.findall(r'<table class="data %s">(.*?)</table>' % kind, dom, re.S)
        drawn = [len(re.findall(r"<tr\b", t)) - 1 for t in tables]
        if drawn != wanted:
            problems.append("%s: %s tables with %s rows, the data asks for %s" %
                            (what, kind, drawn, wanted))
        headings = [re.findall(r"<th[^>]*>([^<]*)</th>", t) for t in tables]
        columns = [[c for c in ("threads", "sectors") if w["whole"][c] is not None]
                   for w in windows if w[key]]
        shown = [[c for c in h if c in ("threads", "sectors")] for h in headings]
        if shown != columns:
            problems.append("%s: %s tables with derived columns %s, the data asks for %s" %
                            (what, kind, shown, columns))


def check_replay_notes(dom, page_text, what, problems):
    """Range replay by PM sampling: bounds, status markers, the method line
    and a legend, as many as the data asks for."""
    data = {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(page_text)}
    spans = data.get("replay", {}).get("spans", [])
    cells = [c for s in spans for r in s["rows"] for c in r["cells"] if c is not None]
    wanted = {
        "bounds": sum(1 for c in cells if c.get("bound")),
        "status markers": sum(1 for c in cells if c.get("status") not in (None, "", "measured")),
        "method lines": sum(1 for s in spans if s.get("method")),
        "legends": sum(1 for s in spans if any(c is not None and "method" in c
                                               for r in s["rows"] for c in r["cells"])),
    }
    numbers = re.findall(r'<td class="num">(.*?)</td>', dom, re.S)
    drawn = {
        "bounds": sum(1 for td in numbers if '<span class="value-bound">\u00b1' in td),
        "status markers": sum(1 for td in numbers if '<span class="value-status ' in td),
        "method lines": len(re.findall(r'class="run-head replay-method">Measured by PM sampling',
                                       dom)),
        "legends": len(re.findall(r'class="legend-row replay-legend"', dom)),
    }
    for key in wanted:
        if drawn[key] != wanted[key]:
            problems.append("%s: %d replay %s drawn, the data asks for %d" %
                            (what, drawn[key], key, wanted[key]))


def check_page(chromium, path, profile, problems):
    with open(path, encoding="utf-8") as page:
        text = page.read()
    url = "file://" + os.path.abspath(path)
    whole = expected_time_charts(text)
    dom = dump_dom(chromium, url, profile)
    check_drawn(dom, path, whole, problems)
    check_pc_lines(dom, text, path, problems)
    check_sass_tables(dom, text, path, problems)
    check_replay_notes(dom, text, path, problems)
    check_drawn(dump_dom(chromium, url + "?section=timeline", profile), path + "?section=timeline",
                expected_time_charts(text, "timeline"), problems)
    return whole


def check_broken_page(chromium, path, profile, problems):
    with open(path, encoding="utf-8") as page:
        text = page.read()
    broken = re.sub(r'(id="data-kernels">)\{', r"\1{broken", text, count=1)
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False, encoding="utf-8") as copy:
        copy.write(broken)
    try:
        dom = dump_dom(chromium, "file://" + copy.name, profile)
    finally:
        os.unlink(copy.name)
    if body_attributes(dom).get("data-rendered") != "error":
        problems.append("a page with broken data did not say data-rendered=\"error\"")
    elif "This page did not draw completely" not in dom or "could not be drawn" not in dom:
        problems.append("a page with broken data shows no message")


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    pages = sorted(glob.glob(os.path.join(argv[1], "*.html")))
    chromium = find_chromium()
    if chromium is None:
        if os.environ.get("FLARE_SKIP_BROWSER") == "1":
            print("html_browser_check: SKIPPED: no chromium (FLARE_SKIP_BROWSER=1)")
            return SKIP
        print("html_browser_check: FAILED: no chromium to open the pages in. Install Debian's "
              "chromium (scripts/install-deps.sh does), set FLARE_CHROMIUM, or set "
              "FLARE_SKIP_BROWSER=1 to skip this test on purpose.")
        return 1
    if not pages:
        print("html_browser_check: FAILED: no pages in %s (test_report_html makes them)" % argv[1])
        return 1
    problems = []
    profile = tempfile.mkdtemp(prefix="flare-chromium-")
    try:
        for path in pages:
            charts = check_page(chromium, path, profile, problems)
            print("%s: %d time series charts" % (os.path.basename(path), charts))
        check_broken_page(chromium, pages[0], profile, problems)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as error:
        problems.append("%s: %s" % (type(error).__name__, error))
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if problems:
        print("html_browser_check: FAILED")
        for problem in problems:
            print("  " + problem)
        return 1
    print("html_browser_check: %d pages drew every chart in %s" % (len(pages), chromium))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
