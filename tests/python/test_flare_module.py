"""Tests of the Python module `flare`, run by CTest (python/CMakeLists.txt).

Environment (set by CTest): PYTHONPATH holds the built package flare, with a
link to libflare.so beside its extension module; FLARE_TEST_LIBRARY is
libflare.so, FLARE_TEST_MODULE the extension module's file (flare/_flare...),
FLARE_TEST_BIN_DIR the flare command's directory, FLARE_TEST_PYTHON_SOURCE the
python/ folder (for the pip install test).
"""
import copy
import ctypes
import inspect
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import unittest

import flare

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.environ["FLARE_TEST_LIBRARY"]
MODULE = os.environ["FLARE_TEST_MODULE"]


def run_python(code, env_extra=None, pythonpath=None, args=()):
    env = dict(os.environ)
    for key in ("FLARE_RUNTIME_PATH", "FLARE_RUNTIME_DISABLE_SHARING", "FLARE_SESSION_DIR"):
        env.pop(key, None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.update(env_extra or {})
    # A neutral working directory: `python -c` puts it first on sys.path,
    # and CTest runs in the build's python/ folder, which holds the module.
    return subprocess.run([sys.executable, "-c", code] + list(args), env=env,
                          capture_output=True, text=True, timeout=120,
                          cwd=tempfile.gettempdir())


def isolated_module():
    """A directory holding only a copy of the package flare (its extension
    module and Python files): no libflare.so beside the module."""
    directory = tempfile.mkdtemp(prefix="flare-test-pymodule-")
    shutil.copytree(os.path.dirname(MODULE), os.path.join(directory, "flare"),
                    ignore=shutil.ignore_patterns("libflare.so*", "__pycache__"))
    return directory


INFO = "import flare, json; c = flare.counter('probe.x'); c.add(2); " \
       "print(json.dumps(dict(flare.runtime_info(), value=c.value)))"


class Arguments(unittest.TestCase):
    def test_wrong_types_raise_type_error(self):
        counter = flare.counter("args.types")
        cases = [
            lambda: flare.counter(1), lambda: flare.counter(None), lambda: flare.counter(b"x"),
            lambda: flare.tick(b"x"), lambda: flare.tick("args.types", 1.5),
            lambda: flare.tick("args.types", "1"), lambda: flare.tick(),
            lambda: flare.tick("args.types", n=True), lambda: flare.tick("a", 1, 2),
            lambda: flare.tick(name="args.types", m=1),
            lambda: counter.add(1.0), lambda: counter.add("1"), lambda: counter.add(True),
            lambda: counter.add(None), lambda: counter.add(1, 2), lambda: counter.add(x=1),
            lambda: flare.scope(3), lambda: flare.open_scope(None), lambda: flare.find(7),
        ]
        for case in cases:
            with self.assertRaises(TypeError):
                case()
        with self.assertRaisesRegex(TypeError, "n must be an int, not float"):
            counter.add(2.5)
        with self.assertRaisesRegex(TypeError, "counter name must be str, not int"):
            flare.counter(5)
        self.assertEqual(counter.value, 0)

    def test_bad_values_raise_value_error(self):
        for name in ["", "a" * 97, "has space", "slash/name", "colon:", "caf\u00e9", "nul\0x",
                     "tab\t", "plus+"]:
            with self.assertRaises(ValueError, msg=repr(name)):
                flare.counter(name)
            with self.assertRaises(ValueError, msg=repr(name)):
                flare.tick(name)
        with self.assertRaisesRegex(ValueError, r"1-96 characters of A-Z a-z 0-9 \. _ -"):
            flare.counter("bad name")
        with self.assertRaisesRegex(ValueError, "longer than 96"):
            flare.counter("a" * 97)
        counter = flare.counter("args.values")
        for n in [0, -1, -2**63, flare.ADD_MAX + 1, 2**63 - 1, 2**70, -2**70]:
            with self.assertRaisesRegex(ValueError, "n must be between 1 and 1099511627776"):
                counter.add(n)
        with self.assertRaises(ValueError):
            flare.tick("args.values", 0)
        self.assertEqual(counter.value, 0)
        self.assertEqual(counter.rejected, 8)  # counted by the runtime, like a C caller's

    def test_bounds_are_accepted(self):
        counter = flare.counter("a" * 96)
        counter.add(flare.ADD_MAX)
        counter.add(1)
        counter.add(n=2)
        self.assertEqual(counter.value, flare.ADD_MAX + 3)
        self.assertEqual(flare.NAME_MAX, 96)
        self.assertEqual(flare.ADD_MAX, 2**40)


class Counters(unittest.TestCase):
    def test_counter_tick_find(self):
        self.assertIsNone(flare.find("basics.never"))
        self.assertIsNone(flare.find("basics.never"))  # find never registers
        first = flare.counter("basics.one")
        first.add()
        flare.counter("basics.one").add(4)
        flare.tick("basics.one")
        flare.tick("basics.one", 2)
        flare.tick(name="basics.one", n=3)
        self.assertEqual(first.value, 11)
        self.assertEqual(flare.find("basics.one").value, 11)
        self.assertEqual(first.name, "basics.one")
        self.assertIn("basics.one", repr(first))

    def test_threads_sum_exactly(self):
        counter = flare.counter("basics.threads")
        def work():
            for _ in range(20000):
                counter.add(2)
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(counter.value, 8 * 20000 * 2)

    def test_scopes_without_a_session_do_nothing(self):
        self.assertFalse(flare.is_active())
        with flare.scope("idle.outer"):
            with flare.scope("idle.inner"):
                pass
        handle = flare.open_scope("idle.handle")
        self.assertFalse(handle.open)
        handle.close()
        with self.assertRaises(KeyError):
            with flare.scope("idle.raises"):
                raise KeyError("not swallowed")


@flare.scope("deco.module_level")
def module_level(x):
    return x * 2


class Decorator(unittest.TestCase):
    """flare.scope(name) above a def: each call runs inside the scope."""

    def test_pickled_by_reference(self):
        self.assertIs(pickle.loads(pickle.dumps(module_level)), module_level)
        self.assertIs(copy.deepcopy(module_level), module_level)
        self.assertEqual(pickle.loads(pickle.dumps(module_level))(4), 8)

    def test_wraps_like_functools(self):
        @flare.scope("deco.plain")
        def add(a, b=2, *rest, key=None):
            """Adds."""
            return a + b + sum(rest)
        add.marker = "kept"
        self.assertEqual(add(1), 3)
        self.assertEqual(add(1, 2, 3, 4, key="k"), 10)
        self.assertEqual(add.__name__, "add")
        self.assertEqual(add.__doc__, "Adds.")
        self.assertEqual(add.__module__, __name__)
        self.assertTrue(add.__qualname__.endswith("test_wraps_like_functools.<locals>.add"))
        self.assertEqual(add.__wrapped__(1, 1), 2)
        self.assertEqual(str(inspect.signature(add)), "(a, b=2, *rest, key=None)")
        self.assertEqual(add.marker, "kept")
        self.assertIn("flare.scope('deco.plain')", repr(add))

        class Model:
            factor = 3

            @flare.scope("deco.method")
            def scale(self, x):
                return self.factor * x

            @staticmethod
            @flare.scope("deco.static")
            def twice(x):
                return 2 * x

            @classmethod
            @flare.scope("deco.class")
            def name(cls):
                return cls.__name__
        self.assertEqual(Model().scale(2), 6)
        self.assertEqual(Model.scale(Model(), 3), 9)
        self.assertEqual(Model.twice(4), 8)
        self.assertEqual(Model.name(), "Model")

        @flare.scope("deco.recursive")
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        self.assertEqual(depth(100), 100)  # past the 64 levels of a thread's scopes: still runs
        with self.assertRaises(KeyError):
            flare.scope("deco.raises")(lambda: {}["missing"])()
        with flare.scope("deco.with"):  # still a context manager
            pass

    def test_misuse_is_a_type_error(self):
        with self.assertRaisesRegex(TypeError, r'@flare.scope\("name"\), not @flare.scope'):
            @flare.scope
            def bare():
                pass
        with self.assertRaisesRegex(TypeError, "decorates a function, not int"):
            flare.scope("deco.x")(1)
        with self.assertRaisesRegex(TypeError, "takes one function"):
            flare.scope("deco.x")(len, len)
        with self.assertRaisesRegex(TypeError, "takes one function"):
            flare.scope("deco.x")(function=len)
        with self.assertRaisesRegex(TypeError, "generator or coroutine"):
            @flare.scope("deco.generator")
            def numbers():
                yield 1
        with self.assertRaisesRegex(TypeError, "generator or coroutine"):
            @flare.scope("deco.coroutine")
            async def later():
                pass

    def test_calls_recorded_as_scopes(self):
        library = ctypes.CDLL(LIBRARY)
        directory = tempfile.mkdtemp(prefix="flare-test-pydecorator-")

        class Options(ctypes.Structure):
            _fields_ = [("struct_size", ctypes.c_size_t), ("session_dir", ctypes.c_char_p),
                        ("flush_interval_ms", ctypes.c_uint32),
                        ("ring_capacity", ctypes.c_uint32)]

        @flare.scope("deco.inner")
        def inner(n):
            if n < 0:
                raise ValueError("negative")
            return n

        @flare.scope("deco.outer")
        def outer():
            return inner(1) + inner(2)
        options = Options(ctypes.sizeof(Options), directory.encode(), 10, 0)
        self.assertEqual(library.flare_init(ctypes.byref(options)), 0)
        self.assertEqual(outer(), 3)
        with self.assertRaises(ValueError):
            inner(-1)  # the scope ends on the way out
        threads = [threading.Thread(target=inner, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(library.flare_shutdown(), 0)
        with flare.open(directory, pandas=False) as session:
            scopes = session.scopes()
        found = sorted((s["name"], s["depth"], s["still_open"]) for s in scopes)
        self.assertEqual(found, [("deco.inner", 0, 0)] * 5 + [("deco.inner", 1, 0)] * 2 +
                         [("deco.outer", 0, 0)])
        self.assertEqual(len({s["thread_id"] for s in scopes}), 5)
        shutil.rmtree(directory)


class Runtime(unittest.TestCase):
    def test_beside_the_module(self):
        self.assertTrue(flare.runtime_shared())
        info = flare.runtime_info()
        self.assertEqual(info["source"], "beside-module")
        self.assertTrue(info["path"].endswith("libflare.so"))

    def test_no_runtime_falls_back_to_private(self):
        directory = isolated_module()
        result = run_python(INFO, pythonpath=directory)
        self.assertEqual(result.returncode, 0, result.stderr)
        info = eval(result.stdout.replace("true", "True").replace("false", "False"))
        self.assertFalse(info["shared"])
        self.assertEqual(info["source"], "private")
        self.assertIn("FLARE_RUNTIME_PATH is not set", info["reason"])
        self.assertEqual(info["value"], 2)  # counters still work, privately
        shutil.rmtree(directory)

    def test_explicit_path(self):
        directory = isolated_module()
        for path in (LIBRARY, os.path.dirname(LIBRARY)):
            result = run_python(INFO, {"FLARE_RUNTIME_PATH": path}, pythonpath=directory)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn('"source": "environment"', result.stdout)
            self.assertIn('"shared": true', result.stdout)
        shutil.rmtree(directory)

    def test_mapped_copy_wins_over_paths(self):
        code = "import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_LOCAL); " + INFO
        result = run_python(code, {"FLARE_RUNTIME_PATH": "/nonexistent"}, args=[LIBRARY])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('"source": "mapped"', result.stdout)

    def test_sharing_disabled(self):
        result = run_python(INFO, {"FLARE_RUNTIME_DISABLE_SHARING": "1"})
        self.assertIn('"shared": false', result.stdout)
        self.assertIn("FLARE_RUNTIME_DISABLE_SHARING", result.stdout)


class CrossModule(unittest.TestCase):
    """A Python process ticking while the profiler (libflare's C API and its
    session) reads must see the same values; and the check must fail when
    the registry is not shared."""

    def check(self, env_extra, *flags):
        return run_python("import runpy, sys; sys.argv = sys.argv[1:]; "
                          "runpy.run_path(sys.argv[0], run_name='__main__')", env_extra,
                          args=[os.path.join(HERE, "cross_module_check.py"), LIBRARY] + list(flags))

    def test_one_registry(self):
        result = self.check({})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("ok: one registry", result.stdout)

    def test_check_fails_when_not_shared(self):
        result = self.check({"FLARE_RUNTIME_DISABLE_SHARING": "1"})
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("do not share one registry", result.stdout)
        result = self.check({"FLARE_RUNTIME_DISABLE_SHARING": "1"}, "--expect-split")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


class Session(unittest.TestCase):
    def test_scopes_and_counters_recorded(self):
        library = ctypes.CDLL(LIBRARY)  # the copy the module bound to (same file)
        directory = tempfile.mkdtemp(prefix="flare-test-pysession-")

        class Options(ctypes.Structure):
            _fields_ = [("struct_size", ctypes.c_size_t), ("session_dir", ctypes.c_char_p),
                        ("flush_interval_ms", ctypes.c_uint32),
                        ("ring_capacity", ctypes.c_uint32)]
        options = Options(ctypes.sizeof(Options), directory.encode(), 10, 0)
        flare.counter("session.before").add(5)  # before the session: not counted
        self.assertEqual(library.flare_init(ctypes.byref(options)), 0)
        self.assertTrue(flare.is_active())
        with flare.scope("py.outer"):
            with flare.scope("py.inner"):
                flare.tick("session.before", 2)
        handle = flare.open_scope("py.handoff")
        self.assertTrue(handle.open)
        closer = threading.Thread(target=handle.close)
        closer.start()
        closer.join()
        self.assertFalse(handle.open)
        with flare.open_scope("py.with"):
            pass
        self.assertEqual(library.flare_shutdown(), 0)
        with sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True) as db:
            depths = dict(db.execute("SELECT name, depth FROM scopes JOIN names "
                                     "ON names.id = name_id").fetchall())
            value = db.execute("SELECT s.value FROM counter_samples s JOIN counters c USING "
                               "(pid, counter) WHERE c.name = 'session.before' "
                               "ORDER BY time_ns DESC LIMIT 1").fetchone()[0]
        self.assertEqual(depths, {"py.outer": 0, "py.inner": 1, "py.handoff": 0, "py.with": 0})
        self.assertEqual(value, 2)
        shutil.rmtree(directory)

    def test_windows_from_python(self):
        # Without a session: a clear RuntimeError, and argument errors first.
        with self.assertRaises(RuntimeError):
            flare.window_open()
        with self.assertRaises(RuntimeError):
            flare.window_close()
        with self.assertRaises(TypeError):
            flare.window_open(max_duration_ms="2s")
        with self.assertRaises(TypeError):
            flare.window_open(max_duration_ms=True)
        with self.assertRaises(ValueError):
            flare.window_open(max_duration_ms=0)
        with self.assertRaises(ValueError):
            flare.window_open(max_duration_ms=600001)
        with self.assertRaises(ValueError):
            flare.window_open(max_launches=-1)
        with self.assertRaises(TypeError):
            flare.window_open(label=5)
        library = ctypes.CDLL(LIBRARY)
        directory = tempfile.mkdtemp(prefix="flare-test-pywindow-")

        class Options(ctypes.Structure):
            _fields_ = [("struct_size", ctypes.c_size_t), ("session_dir", ctypes.c_char_p),
                        ("flush_interval_ms", ctypes.c_uint32),
                        ("ring_capacity", ctypes.c_uint32)]
        options = Options(ctypes.sizeof(Options), directory.encode(), 10, 0)
        self.assertEqual(library.flare_init(ctypes.byref(options)), 0)
        flare.window_open(max_duration_ms=60000, label="from python")
        with self.assertRaises(RuntimeError):  # one window at a time
            flare.window_open(max_duration_ms=1000)
        flare.window_close()
        with self.assertRaises(RuntimeError):  # nothing left to close
            flare.window_close()
        self.assertEqual(library.flare_shutdown(), 0)
        with sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True) as db:
            rows = db.execute("SELECT token_kind, label, close_reason FROM windows").fetchall()
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual(rows[0][1:], ("from python", "manual"))
        shutil.rmtree(directory)

    def test_flare_trace_records_python_counters(self):
        flare_command = os.path.join(os.environ["FLARE_TEST_BIN_DIR"], "flare")
        directory = tempfile.mkdtemp(prefix="flare-test-pytrace-")
        script = ("import flare; t = flare.counter('trace.tokens')\n"
                  "for i in range(1000): t.add(7)\n")
        env = dict(os.environ)
        trace = subprocess.run([flare_command, "trace", "-o", directory, "--", sys.executable,
                                "-c", script], env=env, capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(trace.returncode, 0, trace.stdout + trace.stderr)
        report = subprocess.run([flare_command, "report", directory], capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(report.returncode, 0, report.stderr)
        section = report.stdout.split("Counters", 1)[1]
        line = [l for l in section.splitlines() if "trace.tokens" in l]
        self.assertEqual(len(line), 1, report.stdout)
        self.assertEqual(line[0].split()[1], "7000")
        shutil.rmtree(directory)


# A program for `flare replay --range-api`: a kernel written in Python
# (data = data * 2 + 1, so running it twice over the same memory shows) in
# two spans, one per form; prints the values and how often the kernel ran.
RANGE_PROGRAM = r"""
import ctypes, sys
import flare

lib = ctypes.CDLL(sys.argv[1])

class Launch(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("grid", ctypes.c_uint32 * 3),
                ("block", ctypes.c_uint32 * 3), ("args", ctypes.c_void_p),
                ("args_size", ctypes.c_size_t)]

runs = []

@ctypes.CFUNCTYPE(None, ctypes.POINTER(Launch))
def double_plus_one(launch):
    address = ctypes.cast(launch.contents.args, ctypes.POINTER(ctypes.c_void_p))[0]
    values = (ctypes.c_float * 4).from_address(address)
    for i in range(4):
        values[i] = values[i] * 2 + 1
    runs.append(1)

lib.flare_sim_launch_kernel.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_uint32),
                                        ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p,
                                        ctypes.c_size_t]
lib.flare_sim_stream_synchronize.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
assert lib.flare_sim_configure(1) == 0
kernel = ctypes.c_int()
assert lib.flare_sim_kernel_register(b"py_double", double_plus_one, ctypes.byref(kernel)) == 0
stream = ctypes.c_void_p()
assert lib.flare_sim_stream_create(0, ctypes.byref(stream)) == 0
memory = ctypes.c_void_p()
assert lib.flare_sim_malloc(0, 16, ctypes.byref(memory)) == 0
one = (ctypes.c_uint32 * 3)(1, 1, 1)
args = ctypes.c_void_p(memory.value)

def launch():
    assert lib.flare_sim_launch_kernel(stream, kernel.value, one, one, ctypes.byref(args),
                                       ctypes.sizeof(args)) == 0

with flare.replay_range("py.with"):
    launch()
flare.replay_range_begin("py.explicit")
launch()
flare.replay_range_end()
assert lib.flare_sim_stream_synchronize(stream, 30000) == 0
values = (ctypes.c_float * 4).from_address(memory.value)
print("values", list(values), "runs", len(runs))
"""


class ReplayRange(unittest.TestCase):
    def test_arguments_and_state(self):
        with self.assertRaises(TypeError):
            flare.replay_range_begin(3)
        with self.assertRaises(TypeError):
            flare.replay_range(None)
        with self.assertRaisesRegex(ValueError, "must not be empty"):
            flare.replay_range_begin("")
        with self.assertRaisesRegex(ValueError, "must not be empty"):
            flare.replay_range("")
        # The explicit calls say when they are misused: end without begin,
        # begin inside a span.
        with self.assertRaisesRegex(RuntimeError, "end without a begin"):
            flare.replay_range_end()
        self.assertIsNone(flare.replay_range_begin("py.state"))
        with self.assertRaisesRegex(RuntimeError, "begin inside a span"):
            flare.replay_range_begin("py.nested")
        self.assertIsNone(flare.replay_range_end())
        with self.assertRaises(RuntimeError):
            flare.replay_range_end()
        # The with form never raises for state: nested, the inner block just
        # runs, and only the outer one's span is ended (by the outer block).
        with flare.replay_range("py.outer"):
            with flare.replay_range("py.inner"):
                pass
            with self.assertRaisesRegex(RuntimeError, "begin inside a span"):
                flare.replay_range_begin("py.still-inside")
        with self.assertRaises(RuntimeError):
            flare.replay_range_end()  # the outer block ended its span
        with self.assertRaises(KeyError):
            with flare.replay_range("py.raises"):
                raise KeyError("not swallowed")
        with self.assertRaises(RuntimeError):
            flare.replay_range_end()  # ended on the way out of the failed block

    def test_without_a_runtime(self):
        directory = isolated_module()
        code = ("import flare\n"
                "try:\n    flare.replay_range_begin('x')\nexcept RuntimeError as e:\n"
                "    print('refused:', e)\n"
                "with flare.replay_range('x'):\n    print('block ran')\n")
        result = run_python(code, pythonpath=directory)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("refused: flare.replay_range_begin:", result.stdout)
        self.assertIn("no flare runtime in this process", result.stdout)
        self.assertIn("block ran", result.stdout)
        shutil.rmtree(directory)

    def test_spans_replayed_under_flare_replay(self):
        flare_command = os.path.join(os.environ["FLARE_TEST_BIN_DIR"], "flare")
        directory = tempfile.mkdtemp(prefix="flare-test-pyrange-")
        run = subprocess.run(
            [flare_command, "replay", "-o", directory, "--range-api", "--metrics",
             "launch__grid_size,launch__thread_count,gpu__time_duration.sum", "--",
             sys.executable, "-c", RANGE_PROGRAM, LIBRARY],
            capture_output=True, text=True, timeout=120, env=dict(os.environ))
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        # Two spans, each the program's own run plus two counting passes: the
        # kernel ran six times, and memory was restored before each re-run:
        # 0 -> 1 -> 3, as without flare.
        self.assertIn("values [3.0, 3.0, 3.0, 3.0] runs 6", run.stdout)
        self.assertIn("flare: replay: 2 span(s) replayed, 0 declined; 2 kernel(s) in them",
                      run.stderr)
        with sqlite3.connect("file:%s/session.db?mode=ro" % directory, uri=True) as db:
            spans = db.execute("SELECT name, occurrence, kernels, passes_run, declined "
                               "FROM replay_spans ORDER BY begin_ns").fetchall()
            kernels = db.execute("SELECT l.kernel, m.value FROM replay_launches l JOIN "
                                 "replay_spans s ON s.pid = l.pid AND s.span_id = l.span_id "
                                 "JOIN replay_metrics m ON m.pid = l.pid AND "
                                 "m.launch_id = l.launch_id WHERE m.metric = "
                                 "'launch__grid_size' ORDER BY l.launch_id").fetchall()
        self.assertEqual(spans, [("py.with", 0, 1, 3, 0), ("py.explicit", 0, 1, 3, 0)])
        self.assertEqual(kernels, [("py_double", 1.0), ("py_double", 1.0)])
        shutil.rmtree(directory)


class PipInstall(unittest.TestCase):
    def test_pip_install_from_the_repository(self):
        source = os.environ.get("FLARE_TEST_PYTHON_SOURCE")
        if source is None or run_python("import pip").returncode != 0:
            self.skipTest("pip is not available")
        target = tempfile.mkdtemp(prefix="flare-test-pip-")
        install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                                  "--no-build-isolation", "--quiet", "--target", target, source],
                                 capture_output=True, text=True, timeout=240)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        result = run_python(INFO, {"FLARE_RUNTIME_PATH": LIBRARY}, pythonpath=target)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('"shared": true', result.stdout)
        self.assertIn('"value": 2', result.stdout)
        # The package with its reader, under the distribution's own name.
        result = run_python("import flare; print(flare.open, flare.reader.__file__)",
                            pythonpath=target)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(os.path.join(target, "flare", "reader.py"), result.stdout)
        metadata = os.path.join(target, "flare_gpu_profiler-%s.dist-info" % flare.__version__,
                                "METADATA")
        with open(metadata) as file:
            self.assertIn("Name: flare-gpu-profiler\n", file.read())
        shutil.rmtree(target)


if __name__ == "__main__":
    unittest.main()
