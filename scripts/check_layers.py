#!/usr/bin/env python3
"""Fails when an #include or a call points up or sideways across flare's layers.

Layers, top to bottom: cli -> session (composition) -> features -> core ->
store, with the backends beside the features, reached through their
descriptor. The rules checked (docs/architecture.md):

  * store includes only store/ and flare/ headers;
  * core includes only core/, store/ and flare/ headers;
  * a feature includes no backend, session or cli header, and names no
    backend identifier (sim_*, cuda_*) outside comments and strings;
  * a backend includes no session or cli header, nor a feature's session
    wiring (*_session.h other than pm_session.h, whose types the CUDA
    backend implements for attribution), nor another backend;
  * session includes no cli header.

Usage: scripts/check_layers.py [ROOT]   (default: the repository root)
Prints one line per violation and exits 1 when there is any.
"""
import os
import re
import sys

FEATURES = ("counters", "rules", "deepwin", "storm", "pm", "replay", "attrib", "tracebuf",
            "recorder", "pcsamp", "disasm")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
BACKEND_NAME = re.compile(r"\b(sim|cuda)_[A-Za-z0-9_]+\b")
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"', re.S)


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "include":
        return "public"
    if parts[1] == "backend":
        return "backend:" + parts[2] if len(parts) > 3 else "backend"
    return parts[1]


def allowed(layer, header):
    top = header.split("/")[0]
    if layer == "store":
        return top in ("store", "flare")
    if layer == "core":
        return top in ("core", "store", "flare")
    if layer in FEATURES:
        return top not in ("backend", "session", "cli") or header == "backend/backend.h"
    if layer.startswith("backend"):
        own = layer.split(":")[1] if ":" in layer else None
        if top in ("session", "cli"):
            return False
        if top == "backend" and header != "backend/backend.h":
            return own is not None and header.startswith("backend/%s/" % own)
        if header.endswith("_session.h") and header != "pm/pm_session.h":
            return False
        return True
    if layer == "session":
        return top != "cli"
    return True


def check(root):
    problems = []
    for directory, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            full = os.path.join(directory, name)
            path = os.path.relpath(full, root)
            layer = layer_of(path)
            with open(full, encoding="utf-8") as source:
                text = source.read()
            for header in INCLUDE.findall(text):
                if "/" in header and not allowed(layer, header):
                    problems.append("%s: layer %s must not include %s" % (path, layer, header))
            if layer in FEATURES:
                code = COMMENT_OR_STRING.sub(" ", text)
                for match in sorted(set(m.group(0) for m in BACKEND_NAME.finditer(code))):
                    problems.append("%s: feature %s names backend symbol %s" % (path, layer, match))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for line in problems:
        print(line)
    if problems:
        print("check_layers: %d violation(s)" % len(problems))
        return 1
    print("check_layers: layers point down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
