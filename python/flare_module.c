/*
 * flare_module.c: the extension module `flare._flare` (CPython C API):
 * counters, scopes and scopes across threads, deep-profiling windows and
 * range-replay spans, for Python programs. The package `flare`
 * (python/flare/__init__.py) exports everything here as its own, beside the
 * session reader (python/flare/reader.py).
 *
 *     import flare
 *     tokens = flare.counter("tokens")    # once: registers, returns a handle
 *     tokens.add(batch_size)              # the hot path
 *     flare.tick("requests")              # name look-up per call
 *     with flare.scope("step"): ...       # nested, per thread
 *     @flare.scope("step")                # or: each call of a function
 *     with flare.replay_range("step"): ...  # a span for range replay
 *
 * The module never links libflare: a second registry in the process would
 * split the counters. At import it binds to the process's runtime through
 * the versioned ABI (counters_runtime_resolve: a copy already mapped, libflare.so
 * beside this module, beside $CUDA_INJECTION64_PATH, $FLARE_RUNTIME_PATH).
 * When none is found it falls back to a private registry compiled in, so
 * `import flare` always works; flare.runtime_shared() then says False and
 * flare.runtime_info() says why.
 *
 * Must never: raise anything but TypeError (wrong type) and ValueError (bad
 * value) for bad arguments, or RuntimeError when the registry is full or a
 * window or span call is refused (the `with` forms never raise); hold
 * a handle that could dangle (handles live for the process); call into the
 * runtime except through its table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <string.h>

#include "counters/counters.h"
#include "counters/runtime_resolve.h"
#include "flare_columns.h"

static const flare_runtime_abi *runtime;
static int runtime_is_shared;
static counters_runtime_resolution resolution;

/* ---- the private fallback ---- */

void counters_log_rejection(const char *message)
{
    (void)message; /* the caller raises ValueError with the reason instead */
}

static int no_session_scope_begin(const char *name)
{
    (void)name;
    return FLARE_ERR_NOT_ACTIVE;
}

static int no_session_scope_end(void)
{
    return FLARE_ERR_NOT_ACTIVE;
}

static int no_session_scope_open(const char *name, flare_scope_handle *handle)
{
    (void)name;
    *handle = 0;
    return FLARE_ERR_NOT_ACTIVE;
}

static int no_session_scope_close(flare_scope_handle handle)
{
    (void)handle;
    return FLARE_ERR_NOT_ACTIVE;
}

static int never_active(void)
{
    return 0;
}

static int no_session_window_open(uint32_t max_duration_ms, uint64_t max_launches,
                                  const char *label)
{
    (void)max_duration_ms;
    (void)max_launches;
    (void)label;
    return FLARE_ERR_NOT_ACTIVE;
}

static int no_session_window_close(void)
{
    return FLARE_ERR_NOT_ACTIVE;
}

/* No runtime, no device work flare could replay. */
static int no_runtime_replay_range_begin(const char *name)
{
    (void)name;
    return FLARE_ERR_NOT_ACTIVE;
}

static int no_runtime_replay_range_end(void)
{
    return FLARE_ERR_NOT_ACTIVE;
}

static const char *private_version(void)
{
    return FLARE_VERSION_STRING;
}

/* Counters that work, scopes that record nothing: without a runtime there
 * is no session to record into. */
static const flare_runtime_abi private_table = {
    .abi_version = FLARE_RUNTIME_ABI_VERSION,
    .struct_size = sizeof(flare_runtime_abi),
    .counter_get = counters_get,
    .counter_find = counters_find,
    .counter_add = counters_add_slow,
    .counter_tick = counters_tick,
    .counter_value = counters_value,
    .counter_name = counters_name,
    .counter_rejected = counters_rejected,
    .counter_count = counters_count,
    .counter_at = counters_at,
    .counter_registry_rejections = counters_registry_rejections,
    .scope_begin = no_session_scope_begin,
    .scope_end = no_session_scope_end,
    .scope_open = no_session_scope_open,
    .scope_close = no_session_scope_close,
    .is_active = never_active,
    .version = private_version,
    .window_open = no_session_window_open,
    .window_close = no_session_window_close,
    .replay_range_begin = no_runtime_replay_range_begin,
    .replay_range_end = no_runtime_replay_range_end,
};

/* ---- argument checks ---- */

/* The UTF-8 of a str argument, or NULL with TypeError/ValueError set. */
static const char *name_argument(PyObject *name, const char *what)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(name)->tp_name);
        return NULL;
    }
    Py_ssize_t size = 0;
    const char *text = PyUnicode_AsUTF8AndSize(name, &size);
    if (text == NULL)
        return NULL;
    if ((size_t)size != strlen(text)) {
        PyErr_Format(PyExc_ValueError, "%s must not contain a NUL character", what);
        return NULL;
    }
    return text;
}

static const char *counter_name_argument(PyObject *name)
{
    const char *text = name_argument(name, "counter name");
    if (text == NULL)
        return NULL;
    char reason[128];
    if (counters_name_check(text, reason, sizeof(reason)) != FLARE_OK) {
        PyErr_Format(PyExc_ValueError,
                     "invalid counter name %R: %s (names are 1-%d characters of A-Z a-z 0-9 . "
                     "_ -)",
                     name, reason, FLARE_COUNTER_NAME_MAX);
        return NULL;
    }
    return text;
}

/* n as int64, or -1 with TypeError set. A value outside int64 is clamped:
 * the runtime then refuses it (and counts it) like any value out of range. */
static int amount_argument(PyObject *value, int64_t *n)
{
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "n must be an int, not %.100s", Py_TYPE(value)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long result = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (result == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0)
        result = overflow > 0 ? INT64_MAX : INT64_MIN;
    *n = (int64_t)result;
    return 0;
}

static PyObject *raise_amount(int64_t n)
{
    return PyErr_Format(PyExc_ValueError, "n must be between 1 and %lld, got %lld",
                        (long long)FLARE_COUNTER_ADD_MAX, (long long)n);
}

static PyObject *raise_get_status(int status, PyObject *name)
{
    if (status == FLARE_ERR_FULL)
        return PyErr_Format(PyExc_RuntimeError,
                            "cannot register counter %R: the registry is full (%d counters)", name,
                            FLARE_COUNTER_CAPACITY);
    return PyErr_Format(PyExc_ValueError, "cannot register counter %R: status %d", name, status);
}

/* ---- flare.Counter ---- */

typedef struct counter_object {
    PyObject_HEAD flare_counter *handle;
    PyObject *name;
} counter_object;

static PyTypeObject counter_type;

static void counter_dealloc(counter_object *self)
{
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *counter_new(flare_counter *handle, PyObject *name)
{
    counter_object *self = PyObject_New(counter_object, &counter_type);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    Py_INCREF(name);
    self->name = name;
    return (PyObject *)self;
}

/* Counter.add(n=1): the hot path. Positional n is parsed by hand; the
 * generic parser would cost more than the add. */
static PyObject *counter_add(counter_object *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *keywords)
{
    int64_t n = 1;
    PyObject *value = NULL;
    Py_ssize_t keyword_count = keywords != NULL ? PyTuple_GET_SIZE(keywords) : 0;
    if (nargs + keyword_count > 1)
        return PyErr_Format(PyExc_TypeError, "add() takes at most 1 argument (%zd given)",
                            nargs + keyword_count);
    if (nargs == 1) {
        value = args[0];
    } else if (keyword_count == 1) {
        PyObject *keyword = PyTuple_GET_ITEM(keywords, 0);
        if (!PyUnicode_Check(keyword) || PyUnicode_CompareWithASCIIString(keyword, "n") != 0)
            return PyErr_Format(PyExc_TypeError, "add() got an unexpected keyword argument %R",
                                keyword);
        value = args[0];
    }
    if (value != NULL && amount_argument(value, &n) != 0)
        return NULL;
    if (runtime->counter_add(self->handle, n) != FLARE_OK)
        return raise_amount(n);
    Py_RETURN_NONE;
}

static PyObject *counter_get_value(counter_object *self, void *closure)
{
    (void)closure;
    uint64_t value = 0;
    runtime->counter_value(self->handle, &value);
    return PyLong_FromUnsignedLongLong(value);
}

static PyObject *counter_get_rejected(counter_object *self, void *closure)
{
    (void)closure;
    uint64_t count = 0;
    runtime->counter_rejected(self->handle, &count);
    return PyLong_FromUnsignedLongLong(count);
}

static PyObject *counter_get_name(counter_object *self, void *closure)
{
    (void)closure;
    Py_INCREF(self->name);
    return self->name;
}

static PyObject *counter_repr(counter_object *self)
{
    uint64_t value = 0;
    runtime->counter_value(self->handle, &value);
    return PyUnicode_FromFormat("<flare.Counter %R value=%llu>", self->name,
                                (unsigned long long)value);
}

static PyMethodDef counter_methods[] = {
    {"add", (PyCFunction)(void (*)(void))counter_add, METH_FASTCALL | METH_KEYWORDS,
     "add(n=1)\n--\n\nAdds n (an int, 1..flare.ADD_MAX). A few tens of nanoseconds; "
     "ValueError for n out of range (the runtime also counts it as a drop)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef counter_getset[] = {
    {"name", (getter)counter_get_name, NULL, "The counter's name.", NULL},
    {"value", (getter)counter_get_value, NULL,
     "Everything added since the process started, exact (sums every thread's cells).", NULL},
    {"rejected", (getter)counter_get_rejected, NULL, "Adds refused by validation.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject counter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flare.Counter",
    .tp_basicsize = sizeof(counter_object),
    .tp_dealloc = (destructor)counter_dealloc,
    .tp_repr = (reprfunc)counter_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A registered counter; get one with flare.counter(name).",
    .tp_methods = counter_methods,
    .tp_getset = counter_getset,
};

/* ---- flare.scope: nested, per thread ---- */

typedef struct scope_object {
    PyObject_HEAD PyObject *name;
    const char *text; /* UTF-8 of name, owned by name */
    int depth;        /* begins that succeeded and await their end */
} scope_object;

static PyTypeObject scope_type;

static void scope_dealloc(scope_object *self)
{
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *scope_enter(scope_object *self, PyObject *unused)
{
    (void)unused;
    /* Without a session (or past the depth limit) the scope records
     * nothing: profiling never breaks the program. */
    if (runtime->scope_begin(self->text) == FLARE_OK)
        self->depth++;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *scope_exit(scope_object *self, PyObject *args)
{
    (void)args;
    if (self->depth > 0) {
        self->depth--;
        runtime->scope_end();
    }
    Py_RETURN_FALSE; /* never swallows the exception */
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)scope_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* ---- flare.scope as a decorator ---- */

/* What `@flare.scope(name)` makes of a function: the function, each call of
 * it inside the scope. Like a functools.wraps wrapper it carries the
 * function's __name__, __qualname__, __doc__, __module__, __dict__ and
 * __wrapped__ (functools.update_wrapper fills its __dict__), and it binds as
 * a method. Nothing about a call is kept in the object: one wrapper may run
 * on several threads at once, and recursively. */
typedef struct scoped_function_object {
    PyObject_HEAD PyObject *name;
    const char *text; /* UTF-8 of name, owned by name */
    PyObject *function;
    PyObject *dict;
} scoped_function_object;

static PyTypeObject scoped_function_type;

static int scoped_function_traverse(scoped_function_object *self, visitproc visit, void *arg)
{
    Py_VISIT(self->function);
    Py_VISIT(self->dict);
    return 0;
}

static int scoped_function_clear(scoped_function_object *self)
{
    Py_CLEAR(self->function);
    Py_CLEAR(self->dict);
    return 0;
}

static void scoped_function_dealloc(scoped_function_object *self)
{
    PyObject_GC_UnTrack(self);
    scoped_function_clear(self);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A call: the scope begins, the function runs, the scope ends (also when
 * the function raises). Like the with form, a scope that cannot begin (no
 * session, too deep) records nothing and the function still runs. */
static PyObject *scoped_function_call(scoped_function_object *self, PyObject *args,
                                      PyObject *keywords)
{
    if (self->function == NULL) /* cleared by the garbage collector */
        return PyErr_Format(PyExc_RuntimeError, "flare.scope(%R): the function is gone",
                            self->name);
    int began = runtime->scope_begin(self->text) == FLARE_OK;
    PyObject *result = PyObject_Call(self->function, args, keywords);
    if (began)
        runtime->scope_end();
    return result;
}

/* As a function's __get__: bound to an instance, a method. */
static PyObject *scoped_function_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    (void)owner;
    if (instance == NULL || instance == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, instance);
}

static PyObject *scoped_function_repr(scoped_function_object *self)
{
    return PyUnicode_FromFormat("<flare.scope(%R) of %R>", self->name,
                                self->function != NULL ? self->function : Py_None);
}

/* Pickled by reference, like the function it replaces: its module and
 * qualified name (so multiprocessing can send it to a worker). */
static PyObject *scoped_function_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef scoped_function_methods[] = {
    {"__reduce__", scoped_function_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef scoped_function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject scoped_function_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flare.ScopedFunction",
    .tp_basicsize = sizeof(scoped_function_object),
    .tp_dealloc = (destructor)scoped_function_dealloc,
    .tp_repr = (reprfunc)scoped_function_repr,
    .tp_call = (ternaryfunc)scoped_function_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A function whose every call runs inside a scope; from @flare.scope(name).",
    .tp_traverse = (traverseproc)scoped_function_traverse,
    .tp_clear = (inquiry)scoped_function_clear,
    .tp_methods = scoped_function_methods,
    .tp_getset = scoped_function_getset,
    .tp_descr_get = scoped_function_get,
    .tp_dictoffset = offsetof(scoped_function_object, dict),
};

/* Scope(function): `@flare.scope(name)` above a def. Returns the function
 * wrapped (scoped_function_object), or NULL with TypeError for anything
 * but one callable, and for a generator or coroutine function: its body
 * runs after the call has returned, outside a scope around the call. */
static PyObject *scope_call(scope_object *self, PyObject *args, PyObject *keywords)
{
    if ((keywords != NULL && PyDict_GET_SIZE(keywords) != 0) || PyTuple_GET_SIZE(args) != 1)
        return PyErr_Format(PyExc_TypeError,
                            "flare.scope(%R) takes one function to decorate: write "
                            "@flare.scope(%R) above a def",
                            self->name, self->name);
    PyObject *function = PyTuple_GET_ITEM(args, 0);
    if (!PyCallable_Check(function))
        return PyErr_Format(PyExc_TypeError, "flare.scope(%R) decorates a function, not %.100s",
                            self->name, Py_TYPE(function)->tp_name);
    if (PyFunction_Check(function) &&
        (((PyCodeObject *)PyFunction_GET_CODE(function))->co_flags &
         (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)) != 0)
        return PyErr_Format(PyExc_TypeError,
                            "flare.scope(%R) cannot decorate %R: a generator or coroutine "
                            "function runs its body after the call returns; use `with "
                            "flare.scope(%R):` inside it",
                            self->name, function, self->name);
    scoped_function_object *wrapper =
        PyObject_GC_New(scoped_function_object, &scoped_function_type);
    if (wrapper == NULL)
        return NULL;
    Py_INCREF(self->name);
    wrapper->name = self->name;
    wrapper->text = self->text;
    Py_INCREF(function);
    wrapper->function = function;
    wrapper->dict = NULL;
    PyObject_GC_Track(wrapper);
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *updated = functools != NULL ? PyObject_CallMethod(functools, "update_wrapper", "OO",
                                                                wrapper, function)
                                          : NULL;
    Py_XDECREF(functools);
    if (updated == NULL) {
        Py_DECREF(wrapper);
        return NULL;
    }
    Py_DECREF(updated);
    return (PyObject *)wrapper;
}

static PyTypeObject scope_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flare.Scope",
    .tp_basicsize = sizeof(scope_object),
    .tp_dealloc = (destructor)scope_dealloc,
    .tp_call = (ternaryfunc)scope_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A nested scope of the calling thread: `with flare.scope(name):`, or "
              "`@flare.scope(name)` above a def (each call runs inside the scope).",
    .tp_methods = scope_methods,
};

/* ---- flare.open_scope: across threads ---- */

typedef struct open_scope_object {
    PyObject_HEAD flare_scope_handle handle; /* 0 once closed, or when nothing was opened */
} open_scope_object;

static PyTypeObject open_scope_type;

static PyObject *open_scope_close(open_scope_object *self, PyObject *unused)
{
    (void)unused;
    flare_scope_handle handle = self->handle;
    self->handle = 0;
    if (handle != 0)
        runtime->scope_close(handle);
    Py_RETURN_NONE;
}

static PyObject *open_scope_enter(open_scope_object *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *open_scope_exit(open_scope_object *self, PyObject *args)
{
    (void)args;
    PyObject *result = open_scope_close(self, NULL);
    if (result == NULL)
        return NULL;
    Py_DECREF(result);
    Py_RETURN_FALSE;
}

static PyObject *open_scope_get_open(open_scope_object *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->handle != 0);
}

static PyMethodDef open_scope_methods[] = {
    {"close", (PyCFunction)open_scope_close, METH_NOARGS,
     "close()\n--\n\nEnds the scope, from any thread; closing again does nothing."},
    {"__enter__", (PyCFunction)open_scope_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)open_scope_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef open_scope_getset[] = {
    {"open", (getter)open_scope_get_open, NULL, "True until closed (False if nothing opened).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject open_scope_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flare.OpenScope",
    .tp_basicsize = sizeof(open_scope_object),
    .tp_dealloc = (destructor)PyObject_Del,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A scope that may end on another thread; from flare.open_scope(name).",
    .tp_methods = open_scope_methods,
    .tp_getset = open_scope_getset,
};

/* ---- flare.replay_range: a span for range replay ---- */

typedef struct replay_range_object {
    PyObject_HEAD PyObject *name;
    const char *text; /* UTF-8 of name, owned by name */
    int began;        /* this object's begin succeeded and awaits its end */
} replay_range_object;

static PyTypeObject replay_range_type;

static void replay_range_dealloc(replay_range_object *self)
{
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *replay_range_enter(replay_range_object *self, PyObject *unused)
{
    (void)unused;
    /* Like flare.scope, the with form never breaks the program: when the
     * span cannot begin (no runtime, already inside a span, such as one
     * `flare replay --range` opened from a scope) the block just runs. */
    if (!self->began && runtime->replay_range_begin(self->text) == FLARE_OK)
        self->began = 1;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *replay_range_exit(replay_range_object *self, PyObject *args)
{
    (void)args;
    if (self->began) {
        self->began = 0;
        /* The end replays the whole span (every pass): other Python threads
         * keep running meanwhile. Only this object's own begin is ended, so
         * a span someone else began is never cut short. */
        Py_BEGIN_ALLOW_THREADS runtime->replay_range_end();
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_FALSE; /* never swallows the exception */
}

static PyMethodDef replay_range_methods[] = {
    {"__enter__", (PyCFunction)replay_range_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)replay_range_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject replay_range_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flare.ReplayRange",
    .tp_basicsize = sizeof(replay_range_object),
    .tp_dealloc = (destructor)replay_range_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A span of this thread's work for range replay; use as "
              "`with flare.replay_range(name):`.",
    .tp_methods = replay_range_methods,
};

/* ---- module functions ---- */

static PyObject *module_counter(PyObject *module, PyObject *name)
{
    (void)module;
    const char *text = counter_name_argument(name);
    if (text == NULL)
        return NULL;
    flare_counter *handle = NULL;
    int status = runtime->counter_get(text, &handle);
    if (status != FLARE_OK)
        return raise_get_status(status, name);
    return counter_new(handle, name);
}

static PyObject *module_find(PyObject *module, PyObject *name)
{
    (void)module;
    const char *text = counter_name_argument(name);
    if (text == NULL)
        return NULL;
    flare_counter *handle = NULL;
    if (runtime->counter_find(text, &handle) != FLARE_OK)
        Py_RETURN_NONE;
    return counter_new(handle, name);
}

static PyObject *module_tick(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *keywords)
{
    (void)module;
    static const char *const names[] = {"name", "n"};
    PyObject *values[2] = {NULL, NULL};
    Py_ssize_t keyword_count = keywords != NULL ? PyTuple_GET_SIZE(keywords) : 0;
    if (nargs > 2)
        return PyErr_Format(PyExc_TypeError, "tick() takes at most 2 arguments (%zd given)",
                            nargs + keyword_count);
    for (Py_ssize_t i = 0; i < nargs; i++)
        values[i] = args[i];
    for (Py_ssize_t k = 0; k < keyword_count; k++) {
        PyObject *keyword = PyTuple_GET_ITEM(keywords, k);
        int slot = -1;
        for (int i = 0; i < 2; i++)
            if (PyUnicode_CompareWithASCIIString(keyword, names[i]) == 0)
                slot = i;
        if (slot < 0)
            return PyErr_Format(PyExc_TypeError, "tick() got an unexpected keyword argument %R",
                                keyword);
        if (values[slot] != NULL)
            return PyErr_Format(PyExc_TypeError, "tick() got multiple values for argument '%s'",
                                names[slot]);
        values[slot] = args[nargs + k];
    }
    if (values[0] == NULL)
        return PyErr_Format(PyExc_TypeError, "tick() missing required argument 'name'");
    const char *text = counter_name_argument(values[0]);
    if (text == NULL)
        return NULL;
    int64_t n = 1;
    if (values[1] != NULL && amount_argument(values[1], &n) != 0)
        return NULL;
    flare_counter *handle = NULL;
    int status = runtime->counter_get(text, &handle);
    if (status != FLARE_OK)
        return raise_get_status(status, values[0]);
    if (runtime->counter_add(handle, n) != FLARE_OK)
        return raise_amount(n);
    Py_RETURN_NONE;
}

/* An int argument in [minimum, maximum], or -1 with TypeError/ValueError set. */
static int bounded_int_argument(PyObject *value, const char *what, unsigned long long minimum,
                                unsigned long long maximum, unsigned long long *out)
{
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0 || number < 0 || (unsigned long long)number < minimum ||
        (unsigned long long)number > maximum) {
        PyErr_Format(PyExc_ValueError, "%s must be in %llu..%llu", what, minimum, maximum);
        return -1;
    }
    *out = (unsigned long long)number;
    return 0;
}

/* The module links no libflare (it binds through the ABI), so it carries
 * its own copy of the status texts, generated from flare.h's one list. */
static const char *status_text(int status)
{
    switch (status) {
#define STATUS_TEXT_(name, value, text)                                                            \
    case value:                                                                                    \
        return text;
        FLARE_STATUS_MAP(STATUS_TEXT_)
#undef STATUS_TEXT_
    }
    return "unknown flare status";
}

/* Raises the exception that fits a window call's status; NULL, or None on OK. */
static PyObject *window_result(int status, const char *call)
{
    if (status == FLARE_OK)
        Py_RETURN_NONE;
    if (status == FLARE_ERR_INVALID_ARGUMENT)
        PyErr_Format(PyExc_ValueError, "flare.%s: %s", call, status_text(status));
    else if (status == FLARE_ERR_TIMEOUT)
        PyErr_Format(PyExc_TimeoutError, "flare.%s: %s", call, status_text(status));
    else if (status == FLARE_ERR_STATE)
        PyErr_Format(PyExc_RuntimeError,
                     "flare.%s: %s (a window is already queued or open, or none is: at most "
                     "one window at a time per process; see flare.log)",
                     call, status_text(status));
    else
        PyErr_Format(PyExc_RuntimeError, "flare.%s: %s", call, status_text(status));
    return NULL;
}

static PyObject *module_window_open(PyObject *module, PyObject *args, PyObject *keywords)
{
    (void)module;
    static char *names[] = {"max_duration_ms", "max_launches", "label", NULL};
    PyObject *duration = NULL, *launches = NULL, *label = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, keywords, "|OOO:window_open", names, &duration,
                                     &launches, &label))
        return NULL;
    unsigned long long duration_ms = 0, max_launches = 0;
    if (duration != NULL &&
        bounded_int_argument(duration, "max_duration_ms", 1, 600000, &duration_ms) != 0)
        return NULL;
    if (launches != NULL && bounded_int_argument(launches, "max_launches", 0,
                                                 (unsigned long long)INT64_MAX, &max_launches) != 0)
        return NULL;
    const char *label_text = NULL;
    if (label != Py_None && (label_text = name_argument(label, "label")) == NULL)
        return NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS status =
        runtime->window_open((uint32_t)duration_ms, (uint64_t)max_launches, label_text);
    Py_END_ALLOW_THREADS return window_result(status, "window_open");
}

static PyObject *module_window_close(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int status;
    Py_BEGIN_ALLOW_THREADS status = runtime->window_close();
    Py_END_ALLOW_THREADS return window_result(status, "window_close");
}

/* Raises the exception that fits a replay_range_begin/end status; NULL, or
 * None on OK. */
static PyObject *replay_range_result(int status, const char *call)
{
    if (status == FLARE_OK)
        Py_RETURN_NONE;
    if (status == FLARE_ERR_INVALID_ARGUMENT)
        PyErr_Format(PyExc_ValueError, "flare.%s: %s (the name must not be empty)", call,
                     status_text(status));
    else if (status == FLARE_ERR_STATE)
        PyErr_Format(PyExc_RuntimeError,
                     "flare.%s: %s (begin inside a span or a replay, or end without a begin on "
                     "this thread)",
                     call, status_text(status));
    else if (status == FLARE_ERR_NOT_ACTIVE)
        PyErr_Format(PyExc_RuntimeError,
                     "flare.%s: %s (no flare runtime in this process; see "
                     "flare.runtime_info())",
                     call, status_text(status));
    else
        PyErr_Format(PyExc_RuntimeError, "flare.%s: %s", call, status_text(status));
    return NULL;
}

static PyObject *module_replay_range_begin(PyObject *module, PyObject *name)
{
    (void)module;
    const char *text = name_argument(name, "range name");
    if (text == NULL)
        return NULL;
    /* Checked here too, so an empty name is a ValueError with or without a
     * runtime. */
    if (text[0] == '\0')
        return PyErr_Format(PyExc_ValueError, "range name must not be empty");
    return replay_range_result(runtime->replay_range_begin(text), "replay_range_begin");
}

static PyObject *module_replay_range_end(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int status;
    /* The end replays the span: every pass, with restores and drains. */
    Py_BEGIN_ALLOW_THREADS status = runtime->replay_range_end();
    Py_END_ALLOW_THREADS return replay_range_result(status, "replay_range_end");
}

static PyObject *module_replay_range(PyObject *module, PyObject *name)
{
    (void)module;
    const char *text = name_argument(name, "range name");
    if (text == NULL)
        return NULL;
    if (text[0] == '\0')
        return PyErr_Format(PyExc_ValueError, "range name must not be empty");
    replay_range_object *self = PyObject_New(replay_range_object, &replay_range_type);
    if (self == NULL)
        return NULL;
    Py_INCREF(name);
    self->name = name;
    self->text = text;
    self->began = 0;
    return (PyObject *)self;
}

static PyObject *module_scope(PyObject *module, PyObject *name)
{
    (void)module;
    if (!PyUnicode_Check(name) && PyCallable_Check(name))
        return PyErr_Format(PyExc_TypeError,
                            "scope name must be str, not %.100s (a decorator needs its name: "
                            "@flare.scope(\"name\"), not @flare.scope)",
                            Py_TYPE(name)->tp_name);
    const char *text = name_argument(name, "scope name");
    if (text == NULL)
        return NULL;
    scope_object *self = PyObject_New(scope_object, &scope_type);
    if (self == NULL)
        return NULL;
    Py_INCREF(name);
    self->name = name;
    self->text = text;
    self->depth = 0;
    return (PyObject *)self;
}

static PyObject *module_open_scope(PyObject *module, PyObject *name)
{
    (void)module;
    const char *text = name_argument(name, "scope name");
    if (text == NULL)
        return NULL;
    open_scope_object *self = PyObject_New(open_scope_object, &open_scope_type);
    if (self == NULL)
        return NULL;
    self->handle = 0;
    flare_scope_handle handle = 0;
    if (runtime->scope_open(text, &handle) == FLARE_OK)
        self->handle = handle;
    return (PyObject *)self;
}

static PyObject *module_runtime_shared(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(runtime_is_shared);
}

static PyObject *module_runtime_info(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    const char *source =
        runtime_is_shared ? counters_runtime_source_name(resolution.source) : "private";
    return Py_BuildValue("{s:O,s:s,s:s,s:s,s:s}", "shared", runtime_is_shared ? Py_True : Py_False,
                         "source", source, "path", runtime_is_shared ? resolution.path : "",
                         "reason", runtime_is_shared ? "" : resolution.reason, "version",
                         runtime->version());
}

static PyObject *module_is_active(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(runtime->is_active());
}

static PyMethodDef module_methods[] = {
    {"counter", (PyCFunction)module_counter, METH_O,
     "counter(name)\n--\n\nRegisters name once and returns its Counter (the same counter "
     "for the same name). ValueError for a bad name."},
    {"find", (PyCFunction)module_find, METH_O,
     "find(name)\n--\n\nThe Counter for name if it was ever registered, else None; never "
     "registers."},
    {"window_open", (PyCFunction)(void (*)(void))module_window_open, METH_VARARGS | METH_KEYWORDS,
     "window_open(max_duration_ms=2000, max_launches=0, label=None)\n--\n\nOpens a "
     "deep-profiling window and waits until it is open. RuntimeError without a session, when "
     "a window is already queued or open, or when the deep engine cannot be armed; "
     "TimeoutError when the collector did not act within 2 s; TypeError/ValueError for bad "
     "arguments."},
    {"window_close", (PyCFunction)module_window_close, METH_NOARGS,
     "window_close()\n--\n\nCloses the open or queued window (reason \"manual\")."},
    {"replay_range_begin", (PyCFunction)module_replay_range_begin, METH_O,
     "replay_range_begin(name)\n--\n\nBegins a span of this thread's work for range replay "
     "(flare_replay_range_begin): under `flare replay --range-api`, every kernel the thread "
     "launches until replay_range_end() gets the metric set, in one replay of the whole span. "
     "RuntimeError inside a span or a replay, or without a flare runtime; ValueError for an "
     "empty name."},
    {"replay_range_end", module_replay_range_end, METH_NOARGS,
     "replay_range_end()\n--\n\nEnds the thread's span and replays it before returning "
     "(flare_replay_range_end). RuntimeError without a span begun on this thread."},
    {"replay_range", (PyCFunction)module_replay_range, METH_O,
     "replay_range(name)\n--\n\nThe span as a with block: `with flare.replay_range(name):`. "
     "Never raises for the runtime's state: when a span cannot begin the block just runs."},
    {"tick", (PyCFunction)(void (*)(void))module_tick, METH_FASTCALL | METH_KEYWORDS,
     "tick(name, n=1)\n--\n\nflare.counter(name).add(n) with a look-up per call: for code "
     "outside hot loops."},
    {"scope", (PyCFunction)module_scope, METH_O,
     "scope(name)\n--\n\nA nested scope of the calling thread: `with flare.scope(name):`, "
     "or `@flare.scope(name)` above a def to run each call of the function inside it."},
    {"open_scope", (PyCFunction)module_open_scope, METH_O,
     "open_scope(name)\n--\n\nOpens a scope now and returns it; close() it from any "
     "thread (or use it in a with block)."},
    {"runtime_shared", module_runtime_shared, METH_NOARGS,
     "runtime_shared()\n--\n\nTrue when this module uses the process's one flare registry; "
     "False when it fell back to a private one (see runtime_info())."},
    {"runtime_info", module_runtime_info, METH_NOARGS,
     "runtime_info()\n--\n\nA dict: shared, source (mapped, beside-module, beside-injection, "
     "environment or private), path, reason (why it is private), version."},
    {"is_active", module_is_active, METH_NOARGS,
     "is_active()\n--\n\nTrue while a flare session records this process."},
    {"_read_columns", flare_columns_read, METH_VARARGS,
     "The session reader's fast path (flare_columns.c); private to flare.reader."},
    {"_columns_available", flare_columns_available, METH_NOARGS,
     "(available, reason) of the session reader's fast path; private to flare.reader."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef flare_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flare._flare",
    .m_doc = "flare: application counters, scopes, deep-profiling windows and range-replay "
             "spans for the flare GPU profiler.",
    .m_size = -1,
    .m_methods = module_methods,
};

/* Binds to the process's runtime, or falls back to the private registry. */
static void bind_runtime(void)
{
    if (counters_runtime_resolve((const void *)&bind_runtime, &resolution) == FLARE_OK) {
        runtime = resolution.table;
        runtime_is_shared = 1;
    } else {
        runtime = &private_table;
        runtime_is_shared = 0;
    }
}

/* The one symbol the module exports (declared for -Wmissing-prototypes). */
PyMODINIT_FUNC PyInit__flare(void);

PyMODINIT_FUNC PyInit__flare(void)
{
    if (runtime == NULL)
        bind_runtime();
    if (PyType_Ready(&counter_type) < 0 || PyType_Ready(&scope_type) < 0 ||
        PyType_Ready(&scoped_function_type) < 0 || PyType_Ready(&open_scope_type) < 0 ||
        PyType_Ready(&replay_range_type) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&flare_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddIntConstant(module, "NAME_MAX", FLARE_COUNTER_NAME_MAX) < 0 ||
        PyModule_AddObject(module, "ADD_MAX", PyLong_FromLongLong(FLARE_COUNTER_ADD_MAX)) < 0 ||
        PyModule_AddIntConstant(module, "CAPACITY", FLARE_COUNTER_CAPACITY) < 0 ||
        PyModule_AddIntConstant(module, "ABI_VERSION", FLARE_RUNTIME_ABI_VERSION) < 0 ||
        PyModule_AddStringConstant(module, "__version__", FLARE_VERSION_STRING) < 0 ||
        flare_columns_init(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&counter_type);
    if (PyModule_AddObject(module, "Counter", (PyObject *)&counter_type) < 0) {
        Py_DECREF(&counter_type);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
