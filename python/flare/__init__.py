"""flare: application counters, scopes, deep-profiling windows and range-replay
spans for the flare GPU profiler, and a reader for its saved sessions.

    import flare
    tokens = flare.counter("tokens")     # counters, scopes, windows, spans:
    with flare.scope("step"): ...        # the extension module flare._flare
    @flare.scope("step")                 # (python/flare_module.c)
    def step(batch): ...

    session = flare.open("flare-out")    # a saved session (flare/reader.py)
    session.kernels()                    # a pandas DataFrame, or a list of dicts

Everything the extension module defines is this package's own: flare.counter
is flare._flare.counter. docs/api.md, "Python", has the whole story.
"""
from flare import _flare
from flare._flare import *  # noqa: F401,F403 (the extension's public names)
from flare._flare import __version__  # noqa: F401
from flare.reader import QueryError, Session, SessionError, open  # noqa: F401

# `from flare import *` takes everything but open, which would hide the
# built-in open() of the importing module.
__all__ = sorted([name for name in dir(_flare) if not name.startswith("_")] +
                 ["QueryError", "Session", "SessionError"])
