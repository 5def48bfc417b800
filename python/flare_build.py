"""PEP 517 build backend for the Python package `flare` (the distribution
flare-gpu-profiler: `flare` alone is other projects' name on PyPI).

Compiles python/flare_module.c and flare_columns.c (the session reader's fast
path, which finds SQLite at run time: no SQLite headers or library needed)
with the registry and the runtime resolver (src/counters) into the extension
module flare._flare, using the interpreter's own compiler settings
(sysconfig), and writes the wheel itself:
the extension and the package's pure-Python files (python/flare/). Only the
standard library: the setuptools shipped with some interpreters cannot build
wheels without the separate `wheel` package, which an offline machine may not
have.

The module does not bundle libflare: it binds at import to the runtime
already in the process, or one found beside it, beside $CUDA_INJECTION64_PATH
or at $FLARE_RUNTIME_PATH (see docs/api.md).
"""
import base64
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DISTRIBUTION = "flare-gpu-profiler"  # the name pip knows (pyproject.toml)
PACKAGE = "flare"                    # the name Python imports
# The distribution's name as wheel and sdist file names spell it (PEP 427, 625).
_FILE_NAME = re.sub(r"[-_.]+", "_", DISTRIBUTION).lower()
_PY_FILES = ["__init__.py", "reader.py", "fleet.py"]  # of python/flare/

# Sources in the repository, or (in an sdist) vendored beside this file.
_REPOSITORY = os.path.dirname(HERE)
_VENDORED = os.path.join(HERE, "_vendor")
_C_FILES = ["src/counters/registry.c", "src/counters/runtime_resolve.c"]
_MODULE_C_FILES = ["flare_module.c", "flare_columns.c"]  # beside this file
_HEADERS = ["include/flare/flare.h", "src/counters/counters.h", "src/counters/runtime_resolve.h"]


def _root():
    if os.path.exists(os.path.join(_REPOSITORY, "src", "counters", "registry.c")):
        return _REPOSITORY
    return _VENDORED


def _version():
    with open(os.path.join(_root(), "include", "flare", "flare.h")) as header:
        match = re.search(r'#define FLARE_VERSION_STRING "([^"]+)"', header.read())
    return match.group(1)


def _tag():
    python = "cp%d%d" % sys.version_info[:2]
    abi = python + getattr(sys, "abiflags", "")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (python, abi, platform)


def _dist_info():
    return "%s-%s.dist-info" % (_FILE_NAME, _version())


def _metadata_files():
    version = _version()
    return {
        "METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: Application counters, scopes and a session reader for the flare GPU "
        "profiler\nRequires-Python: >=3.8\nProvides-Extra: pandas\n"
        "Requires-Dist: pandas; extra == \"pandas\"\n" % (DISTRIBUTION, version),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: flare_build\nRoot-Is-Purelib: false\n"
        "Tag: %s\n" % _tag(),
        "top_level.txt": PACKAGE + "\n",
    }


def _config(name):
    return shlex.split(sysconfig.get_config_var(name) or "")


def _compile(build_dir):
    root = _root()
    sources = [os.path.join(HERE, f) for f in _MODULE_C_FILES] + [
        os.path.join(root, f) for f in _C_FILES]
    compiler = _config("CC") or ["cc"]
    flags = _config("CFLAGS") + _config("CCSHARED") + [
        "-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden",
        "-I" + sysconfig.get_paths()["include"],
        "-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "src"), "-I" + HERE,
    ]
    objects = []
    for index, source in enumerate(sources):
        target = os.path.join(build_dir, "%d.o" % index)
        subprocess.check_call(compiler + flags + ["-c", source, "-o", target])
        objects.append(target)
    module = "_flare" + sysconfig.get_config_var("EXT_SUFFIX")
    output = os.path.join(build_dir, module)
    linker = _config("LDSHARED") or compiler + ["-shared"]
    subprocess.check_call(linker + objects + ["-o", output, "-ldl", "-lpthread"])
    return module, output


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (path, digest, len(data))


# ---- PEP 517 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    directory = os.path.join(metadata_directory, _dist_info())
    os.makedirs(directory, exist_ok=True)
    for name, text in _metadata_files().items():
        with open(os.path.join(directory, name), "w") as out:
            out.write(text)
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory() as build_dir:
        module, path = _compile(build_dir)
        with open(path, "rb") as built:
            contents = {PACKAGE + "/" + module: built.read()}
    for file in _PY_FILES:
        with open(os.path.join(HERE, PACKAGE, file), "rb") as source:
            contents[PACKAGE + "/" + file] = source.read()
    for name, text in _metadata_files().items():
        contents[_dist_info() + "/" + name] = text.encode()
    record_path = _dist_info() + "/RECORD"
    record = "".join(_record_line(p, d) for p, d in contents.items()) + record_path + ",,\n"
    contents[record_path] = record.encode()
    wheel_name = "%s-%s-%s.whl" % (_FILE_NAME, _version(), _tag())
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for path, data in contents.items():
            wheel.writestr(path, data)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (_FILE_NAME, _version())
    name = base + ".tar.gz"
    root = _root()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as archive:
        for file in ["pyproject.toml", "flare_build.py", "flare_columns.h"] + _MODULE_C_FILES + [
                PACKAGE + "/" + f for f in _PY_FILES]:
            archive.add(os.path.join(HERE, file), arcname=base + "/" + file)
        for file in _C_FILES + _HEADERS:
            archive.add(os.path.join(root, file), arcname=base + "/_vendor/" + file)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata_files()["METADATA"].encode()
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return name
