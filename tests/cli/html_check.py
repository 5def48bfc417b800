#!/usr/bin/env python3
"""Checks the structure of a `flare report --html` page (tests/cli/test_report_html.c).

Usage: html_check.py PAGE [--expect WHAT]... [--name TEXT]... [--note TEXT]...

Always checked: the page is one HTML document with the Content-Security-Policy
that forbids every fetch; nothing in it would make the browser fetch (src=,
href=, url(), @import, fetch, XMLHttpRequest, import(), <link>, ...); every
section is there with its JSON data block, each block parses, no block holds
"</" or "<!--" raw, and no section reports a read error.

--expect pm        a window's PM samples are drawn, with scopes in its lane
--expect replay    kernel replay with speed-of-light bars that have values
--expect spans     range replay with a span's kernels in a table
--expect noted     a span measured by PM sampling: its method line, values
                   with their error bound ("±..."), one flagged, and values the
                   method gave none with their status (e.g. below-minimum)
--expect triggered a replay a rule asked for, with speed-of-light bars that
                   have values and a PM window drawn in the pm section whose
                   time axis holds the firing; and one that was not replayed,
                   with its reason
--expect pc        a window's PC samples: stall reasons that add up to its
                   samples, its hottest instructions, most samples first, and
                   its hottest source lines, most samples first, on no more
                   samples than the window has, with some samples left
                   without a line
--expect sass      a window's SASS metrics: its smsp__sass_inst_executed total
                   the sum of its instructions', its hottest instructions and
                   lines most executed first, threads per warp instruction
                   within 0..32 and sectors per ideal of at least 1 where
                   shown, an instruction whose sectors were not counted shown
                   without (null), some instructions without a line; and a
                   window split by scope whose scopes add up to the metric's
                   total; a window that ran the engine and stored nothing, with its
                   engine's status
--expect storms    a launch storm on the timeline
--expect metrics   NVML metrics on the timeline
--expect kernels   top kernels and GPU time per scope
--name TEXT        TEXT is a string value somewhere in the data (round trip
                   of a hostile name)
--note TEXT        a data-quality note contains TEXT
Prints the failures and exits 1, or prints a summary and exits 0. Standard
library only.
"""
import json
import re
import sys

SECTIONS = ["session", "timeline", "kernels", "scopes", "pm", "pc", "sass", "triggered", "replay",
            "drops"]

# What would make a browser fetch something. The page's own script builds
# no URL, and uPlot (third_party/uplot) has none but the one in its banner
# comment, which is no fetch.
FETCHES = [
    (r"""\b(?:src|href|action|poster|srcset|background|formaction)\s*=\s*["']?\s*(?:https?:|//)""",
     "an attribute that loads a URL"),
    (r"""url\(\s*["']?\s*(?:https?:|//)""", "a CSS url()"),
    (r"@import", "a CSS @import"),
    (r"\bfetch\s*\(", "fetch()"),
    (r"XMLHttpRequest", "XMLHttpRequest"),
    (r"\bimport\s*\(", "a dynamic import()"),
    (r"^\s*import\s", "an import statement"),
    (r"<link\b", "a <link> element"),
    (r"sendBeacon", "navigator.sendBeacon"),
    (r"\bWebSocket\b", "a WebSocket"),
    (r"\bEventSource\b", "an EventSource"),
    (r"<(?:iframe|img|object|embed|video|audio|source)\b", "an element that loads a resource"),
]

BLOCK = re.compile(
    r'<script type="application/json" class="section-data" id="data-([a-z]+)">(.*?)</script>',
    re.S)


def strings(value):
    """Every string anywhere in a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)


def check_sass(windows, problems):
    """The SASS section's windows (--expect sass)."""
    def most_first(items):
        return [x["executed"] for x in items] == sorted((x["executed"] for x in items), reverse=True)

    def derived_ok(items):
        return all((x["threads"] is None or 0 < x["threads"] <= 32) and
                   (x["sectors"] is None or x["sectors"] >= 1) for x in items)

    counted = [w for w in windows if w["device"] is not None]
    good = [w for w in counted
            if w["top"] and most_first(w["top"]) and derived_ok(w["top"])
            and any(m["name"] == "smsp__sass_inst_executed" and m["total"] == w["whole"]["executed"]
                    for m in w["metrics"])
            and sum(x["executed"] for x in w["top"]) <= w["whole"]["executed"]
            and w["lines_readable"] and w["lines"] and most_first(w["lines"])
            and derived_ok(w["lines"]) and all(x["file"] and x["line"] > 0 for x in w["lines"])
            and 0 < w["no_line_instructions"] < w["instructions"]]
    if not good:
        problems.append("no window with SASS metrics whose instructions and lines come most "
                        "executed first, with derived columns in range and some instructions "
                        "without a line")
    if not any(x["sectors"] is None and x["threads"] is not None
               for w in good if w["whole"]["sectors"] is not None for x in w["top"]):
        problems.append("no SASS instruction shown without sectors in a window that has them")
    if not any(w["device"] is None and w["rows"] == 0 and w["engine_status"] for w in windows):
        problems.append("no SASS window that stored nothing, with its engine's status")
    split = [w for w in good if w["scopes"]]
    if not split or not all(w["scope_metric"] and w["scope_total"] > 0 and
                            abs(sum(x["value"] for x in w["scopes"]) - w["scope_total"]) <=
                            1e-6 * w["scope_total"] + (w["scope_total"] if w["scopes_left_out"] else 0)
                            for w in split):
        problems.append("no SASS window split by scope whose scopes add up to its metric's total")


def check_noted(spans, problems):
    """A span of range replay by PM sampling: the values' notes as the page
    data carries them."""
    noted = [s for s in spans if s.get("method")]
    if not noted:
        problems.append("no span with a method line (range replay by PM sampling)")
        return
    cells = [c for s in noted for r in s["rows"] for c in r["cells"] if c is not None]
    if not all("PM sampling" in s["method"] and "error bound" in s["method"] for s in noted):
        problems.append("a span's method line does not say PM sampling and error bound")
    if not all(c.get("method") for c in cells):
        problems.append("a value of a PM-sampled span has no method")
    if not any(c.get("bound", "").startswith("\u00b1") and c["text"] != "n/a" for c in cells):
        problems.append("no value with its error bound")
    if any("bound" in c and c["text"] == "n/a" for c in cells):
        problems.append("an error bound beside no value")
    if not any(c.get("status") == "flagged" and c["text"] != "n/a" for c in cells):
        problems.append("no flagged value")
    if not any(c.get("status") == "below-minimum" and c["text"] == "n/a" for c in cells):
        problems.append("no value left out below the minimum kernel length, with its status")
    plain = [c for s in spans if not s.get("method") for r in s["rows"] for c in r["cells"]
             if c is not None]
    if any("method" in c or "bound" in c for c in plain):
        problems.append("a span without notes has values with notes")


def check_expectations(data, expects, problems):
    pm = data.get("pm", {})
    if "pm" in expects:
        drawn = [w for w in pm.get("windows", []) if w.get("drawn")]
        if not drawn:
            problems.append("no window's PM samples are drawn")
        elif not any(m["samples"] > 0 and len(m["t"]) == len(m["v"]) > 0
                     for w in drawn for m in w["metrics"]):
            problems.append("no PM metric has samples to draw")
        elif not any(w["scopes"] for w in drawn):
            problems.append("no scope in any drawn window's lane")
    replay = data.get("replay", {})
    if "replay" in expects:
        bars = [b for k in replay.get("kernels", []) for r in k["runs"] for b in r["bars"]]
        if not any(b["pct"] is not None and b["text"] for b in bars):
            problems.append("no speed-of-light bar with a value in kernel replay")
        if not any(v["label"] and v["text"] for k in replay.get("kernels", [])
                   for r in k["runs"] for v in r["values"]):
            problems.append("no labelled metric value in kernel replay")
    if "pc" in expects:
        windows = data.get("pc", {}).get("windows", [])
        good = [w for w in windows
                if w["reasons"] and sum(r["samples"] for r in w["reasons"]) == w["samples"]
                and w["top"] and [x["samples"] for x in w["top"]]
                == sorted((x["samples"] for x in w["top"]), reverse=True)]
        if not good:
            problems.append("no window with PC samples whose reasons add up and whose top "
                            "instructions come most samples first")
        # Scopes: every sample credited somewhere (a scope, "(no range)" or
        # "(no kernel in the window)"), most samples first.
        scoped = [w for w in windows
                  if w.get("scopes") and w.get("scopes_left_out") == 0
                  and abs(sum(x["samples"] for x in w["scopes"]) - w["samples"]) < 1e-6 * w["samples"]
                  and [x["samples"] for x in w["scopes"]]
                  == sorted((x["samples"] for x in w["scopes"]), reverse=True)]
        if not scoped:
            problems.append("no window with PC samples whose scopes add up to its samples, "
                            "most first")
        # Source lines: most samples first, each line's top stall within
        # it, the lines within the window, and the share without a line
        # (the page says it) above zero.
        lined = [w for w in windows
                 if w.get("lines_recorded") and w.get("lines")
                 and [x["samples"] for x in w["lines"]]
                 == sorted((x["samples"] for x in w["lines"]), reverse=True)
                 and all(0 < x["stall_samples"] <= x["samples"] and x["file"] and x["line"] > 0
                         for x in w["lines"])
                 and sum(x["samples"] for x in w["lines"]) <= w["lines_samples"] < w["samples"]]
        if not lined:
            problems.append("no window with PC samples whose source lines come most samples "
                            "first, within its samples, with some samples without a line")
    if "sass" in expects:
        check_sass(data.get("sass", {}).get("windows", []), problems)
    if "triggered" in expects:
        replays = data.get("triggered", {}).get("replays", [])
        drawn = {(w["pid"], w["id"]): w for w in pm.get("windows", []) if w.get("drawn")}
        beside = [r for r in replays if r["bars"] and r["window"] is not None]
        if not any(b["pct"] is not None and b["text"] for r in beside for b in r["bars"]):
            problems.append("no triggered replay with speed-of-light bars and a PM window")
        elif not any((r["window"]["pid"], r["window"]["id"]) in drawn and
                     0 <= r["window"]["fired_ms"] <= r["window"]["length_ms"] for r in beside):
            problems.append("no triggered replay's window is drawn with its firing inside it")
        if not any(r["status"] != "replayed" and r["reason"] for r in replays):
            problems.append("no triggered replay that was not replayed, with its reason")
    if "spans" in expects:
        spans = replay.get("spans", [])
        if not spans or not any(s["rows"] and s["columns"] for s in spans):
            problems.append("no range replay span with a table of kernels")
    if "noted" in expects:
        check_noted(replay.get("spans", []), problems)
    timeline = data.get("timeline", {})
    if "storms" in expects and not timeline.get("storms"):
        problems.append("no launch storm on the timeline")
    if "metrics" in expects and not any(d["metrics"] for d in timeline.get("devices", [])):
        problems.append("no NVML metric on the timeline")
    if "kernels" in expects:
        if not data.get("kernels", {}).get("rows"):
            problems.append("no top kernels")
        if not data.get("scopes", {}).get("rows"):
            problems.append("no GPU time per scope")
        if not any(d.get("busy") for d in timeline.get("devices", [])):
            problems.append("no GPU busy series")
    for device in timeline.get("devices", []):
        for series in [device.get("busy")] + device.get("metrics", []):
            if series and len(series["t"]) > 2000:
                problems.append("a timeline track has %d points (more than 2,000)" % len(series["t"]))


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    path = argv[1]
    expects, names, notes = set(), [], []
    i = 2
    while i < len(argv):
        option, value = argv[i], argv[i + 1] if i + 1 < len(argv) else None
        if value is None:
            print("html_check.py: %s needs a value" % option)
            return 2
        {"--expect": lambda v: expects.add(v), "--name": names.append,
         "--note": notes.append}[option](value)
        i += 2
    with open(path, encoding="utf-8") as page:
        text = page.read()
    problems = []
    if not text.startswith("<!DOCTYPE html>"):
        problems.append("the page does not start with <!DOCTYPE html>")
    if not text.rstrip().endswith("</html>"):
        problems.append("the page does not end with </html>")
    if "default-src 'none'" not in text:
        problems.append("no Content-Security-Policy forbidding fetches")
    for pattern, what in FETCHES:
        match = re.search(pattern, text, re.M)
        if match:
            start = max(0, match.start() - 60)
            problems.append("%s: ...%s..." % (what, text[start:match.end() + 60]))
    data = {}
    for match in BLOCK.finditer(text):
        section, raw = match.group(1), match.group(2)
        if "</" in raw or "<!--" in raw:
            problems.append("section %s: its data holds '</' or '<!--' raw" % section)
        try:
            data[section] = json.loads(raw)
        except ValueError as error:
            problems.append("section %s: its data is not JSON: %s" % (section, error))
    for section in SECTIONS:
        if '<section id="%s"' % section not in text:
            problems.append("no <section id=\"%s\">" % section)
        elif section not in data:
            problems.append("section %s has no data block" % section)
        elif data[section].get("error") is not None:
            problems.append("section %s could not be read: %s" % (section, data[section]["error"]))
    check_expectations(data, expects, problems)
    values = set(strings(data))
    for name in names:
        if name not in values:
            problems.append("the name %r is not in the data" % name)
    for note in notes:
        if not any(note in n for n in data.get("drops", {}).get("notes", [])):
            problems.append("no note containing %r (notes: %r)" % (note, data.get("drops", {}).get("notes")))
    if problems:
        print("%s:" % path)
        for problem in problems:
            print("  " + problem)
        return 1
    print("%s: ok: %d bytes, sections %s" % (path, len(text), ", ".join(sorted(data))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
