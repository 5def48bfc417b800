/*
 * flare_columns.c: the session reader's fast path (python/flare/reader.py).
 * Runs one of the reader's queries and returns the result by column:
 * numbers as packed int64 or float64 bytes that numpy takes whole, text as
 * lists of str. The sqlite3 module makes a Python object of every value and
 * a tuple of every row, which for a million kernels costs several seconds
 * (bench/bench_python_reader.py); this path costs about what SQLite's own
 * scan does.
 *
 * The SQLite it calls is the one the interpreter's sqlite3 module uses,
 * found at run time in the module _sqlite3's own file (dlopen with
 * RTLD_NOLOAD): the extension neither links nor bundles SQLite, so it builds
 * without SQLite's headers, and the process never holds two copies of
 * SQLite, which would drop each other's POSIX locks
 * (sqlite.org/howtocorrupt.html, 2.2.1). Where SQLite's functions cannot be
 * found, _columns_available() says why and the reader takes the sqlite3
 * module's path.
 *
 * Must never: open the database other than read-only, with the URI the
 * reader opened it with; hold the GIL while SQLite may wait for a lock, or
 * for more than a few milliseconds at a time; keep a connection past the
 * call; raise anything but _SQLiteError (SQLite's code and message, or -1
 * and the reader's own refusal, worded as the sqlite3 module's),
 * UnicodeDecodeError, MemoryError, KeyboardInterrupt (from a signal
 * handler, checked between rows) or OverflowError (an int parameter beyond
 * int64).
 */
#include "flare_columns.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- SQLite, resolved at run time ---- */

/* SQLite's C ABI: opaque handles and the stable constants of sqlite3.h. */
typedef struct sq_db sq_db;
typedef struct sq_stmt sq_stmt;
typedef struct sq_value sq_value;
enum {
    SQ_OK = 0,
    SQ_ROW = 100,
    SQ_DONE = 101,
    SQ_INTEGER = 1,
    SQ_FLOAT = 2,
    SQ_TEXT = 3,
    SQ_BLOB = 4,
    SQ_NULL = 5,
    SQ_OPEN_READONLY = 0x1,
    SQ_OPEN_URI = 0x40,
    SQ_OPEN_NOMUTEX = 0x8000,
};
#define SQ_TRANSIENT ((void (*)(void *)) - 1)

/* Every function this file calls, as sqlite3_<name>. */
#define SQ_FUNCTIONS(X)                                                                            \
    X(int, open_v2, (const char *, sq_db **, int, const char *))                                   \
    X(int, close_v2, (sq_db *))                                                                    \
    X(int, busy_timeout, (sq_db *, int))                                                           \
    X(int, exec, (sq_db *, const char *, void *, void *, char **))                                 \
    X(int, prepare_v2, (sq_db *, const char *, int, sq_stmt **, const char **))                    \
    X(int, bind_parameter_count, (sq_stmt *))                                                      \
    X(int, bind_int64, (sq_stmt *, int, long long))                                                \
    X(int, bind_double, (sq_stmt *, int, double))                                                  \
    X(int, bind_text, (sq_stmt *, int, const char *, int, void (*)(void *)))                       \
    X(int, bind_null, (sq_stmt *, int))                                                            \
    X(int, step, (sq_stmt *))                                                                      \
    X(int, column_count, (sq_stmt *))                                                              \
    X(const char *, column_name, (sq_stmt *, int))                                                 \
    X(sq_value *, column_value, (sq_stmt *, int))                                                  \
    X(int, value_type, (sq_value *))                                                               \
    X(long long, value_int64, (sq_value *))                                                        \
    X(double, value_double, (sq_value *))                                                          \
    X(const unsigned char *, value_text, (sq_value *))                                             \
    X(const void *, value_blob, (sq_value *))                                                      \
    X(int, value_bytes, (sq_value *))                                                              \
    X(int, finalize, (sq_stmt *))                                                                  \
    X(int, set_authorizer,                                                                         \
      (sq_db *, int (*)(void *, int, const char *, const char *, const char *, const char *),      \
       void *))                                                                                    \
    X(const char *, errmsg, (sq_db *))                                                             \
    X(int, extended_errcode, (sq_db *))

typedef struct sq_api {
#define SQ_FIELD_(type, name, arguments) type(*name) arguments;
    SQ_FUNCTIONS(SQ_FIELD_)
#undef SQ_FIELD_
} sq_api;

static sq_api sq;
static int sq_state; /* 0 not tried, 1 resolved, -1 unavailable (sq_reason says why) */
static char sq_reason[512];
static PyObject *sqlite_error; /* _SQLiteError(code, message) */

/* The file of the interpreter's _sqlite3 module (a new reference), or NULL
 * with the reason recorded and no exception set. */
static PyObject *sqlite_module_file(void)
{
    PyObject *module = PyImport_ImportModule("_sqlite3");
    PyObject *file = module != NULL ? PyModule_GetFilenameObject(module) : NULL;
    Py_XDECREF(module);
    if (file == NULL) {
        PyErr_Clear();
        snprintf(sq_reason, sizeof(sq_reason),
                 "the interpreter's _sqlite3 module is not a shared library beside it");
    }
    return file;
}

/* Finds SQLite's functions once; 0, or -1 with sq_reason set. */
static int sq_resolve(void)
{
    if (sq_state != 0)
        return sq_state > 0 ? 0 : -1;
    sq_state = -1;
    PyObject *file = sqlite_module_file();
    if (file == NULL)
        return -1;
    PyObject *encoded = PyUnicode_EncodeFSDefault(file);
    Py_DECREF(file);
    if (encoded == NULL) {
        PyErr_Clear();
        snprintf(sq_reason, sizeof(sq_reason), "the _sqlite3 module's path cannot be encoded");
        return -1;
    }
    /* Already loaded by the import: this only takes a handle on it (and
     * keeps it, like the interpreter does). */
    void *library = dlopen(PyBytes_AS_STRING(encoded), RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) {
        snprintf(sq_reason, sizeof(sq_reason), "%s: %s", PyBytes_AS_STRING(encoded), dlerror());
        Py_DECREF(encoded);
        return -1;
    }
#define SQ_RESOLVE_(type, name, arguments)                                                         \
    *(void **)&sq.name = dlsym(library, "sqlite3_" #name);                                         \
    if (sq.name == NULL) {                                                                         \
        snprintf(sq_reason, sizeof(sq_reason), "%s does not export sqlite3_" #name,                \
                 PyBytes_AS_STRING(encoded));                                                      \
        Py_DECREF(encoded);                                                                        \
        return -1;                                                                                 \
    }
    SQ_FUNCTIONS(SQ_RESOLVE_)
#undef SQ_RESOLVE_
    Py_DECREF(encoded);
    sq_state = 1;
    return 0;
}

/* Raises _SQLiteError(code, message) for db's last error; returns NULL. */
static PyObject *raise_sqlite(sq_db *db, const char *what)
{
    int code = db != NULL ? sq.extended_errcode(db) : 7; /* SQLITE_NOMEM */
    const char *message = db != NULL ? sq.errmsg(db) : "out of memory";
    PyObject *value = Py_BuildValue("(is)", code, message != NULL ? message : what);
    if (value != NULL) {
        PyErr_SetObject(sqlite_error, value);
        Py_DECREF(value);
    }
    return NULL;
}

/* ---- one column of the result ---- */

/* A column keeps its values packed while they are numbers: int64 until a
 * real arrives (then every value becomes a double), with a mask of NULLs
 * once one comes; at the first text or blob it becomes a list of Python
 * objects. The result is what pandas makes of the same values one by one:
 * int64; float64 with NaN for NULL (ints with NULLs included); object for
 * text, blobs, mixed kinds and all-NULL columns. */
enum { KIND_NULL, KIND_INT, KIND_FLOAT, KIND_OBJECT };

typedef union slot {
    int64_t i;
    double d;
} slot;

/* The str objects of a column's recent texts, by a hash of their bytes:
 * the same kernel name a million times is one object, not a million. */
#define TEXT_CACHE_SIZE 256 /* a power of 2 */
#define TEXT_CACHE_MAX  256 /* bytes: longer texts are not kept */

typedef struct text_entry {
    PyObject *text;   /* a str, or NULL */
    const char *utf8; /* its UTF-8, owned by text */
    Py_ssize_t size;
} text_entry;

typedef struct column {
    int kind;
    Py_ssize_t rows;
    Py_ssize_t capacity;  /* of slots, and of nulls once there is one */
    slot *slots;          /* KIND_INT, KIND_FLOAT: one per row */
    unsigned char *nulls; /* KIND_INT, KIND_FLOAT: 1 for a NULL row; NULL when none */
    PyObject *objects;    /* KIND_OBJECT: a list */
    text_entry *texts;    /* TEXT_CACHE_SIZE entries once a text came */
} column;

static void column_free(column *c)
{
    free(c->slots);
    free(c->nulls);
    Py_XDECREF(c->objects);
    if (c->texts != NULL)
        for (int i = 0; i < TEXT_CACHE_SIZE; i++)
            Py_XDECREF(c->texts[i].text);
    free(c->texts);
    memset(c, 0, sizeof(*c));
}

/* The str of size bytes of UTF-8 at text (a new reference), from the cache
 * when the same bytes came recently; NULL with an exception. */
static PyObject *column_text(column *c, const char *text, Py_ssize_t size)
{
    if (size > TEXT_CACHE_MAX)
        return PyUnicode_DecodeUTF8(text, size, NULL);
    if (c->texts == NULL && (c->texts = calloc(TEXT_CACHE_SIZE, sizeof(text_entry))) == NULL)
        return PyErr_NoMemory();
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < size; i++)
        hash = (hash ^ (unsigned char)text[i]) * 16777619u;
    text_entry *entry = &c->texts[hash & (TEXT_CACHE_SIZE - 1)];
    if (entry->text != NULL && entry->size == size &&
        memcmp(entry->utf8, text, (size_t)size) == 0) {
        Py_INCREF(entry->text);
        return entry->text;
    }
    PyObject *decoded = PyUnicode_DecodeUTF8(text, size, NULL);
    if (decoded == NULL)
        return NULL;
    Py_ssize_t utf8_size = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(decoded, &utf8_size);
    if (utf8 == NULL) {
        Py_DECREF(decoded);
        return NULL;
    }
    Py_XDECREF(entry->text);
    Py_INCREF(decoded);
    entry->text = decoded;
    entry->utf8 = utf8;
    entry->size = utf8_size;
    return decoded;
}

/* Room for one more number; 0, or -1 with MemoryError. */
static int column_reserve(column *c)
{
    if (c->rows < c->capacity)
        return 0;
    Py_ssize_t capacity = c->capacity > 0 ? c->capacity * 2 : 4096;
    slot *slots = realloc(c->slots, (size_t)capacity * sizeof(slot));
    if (slots == NULL)
        goto no_memory;
    c->slots = slots;
    if (c->nulls != NULL) {
        unsigned char *nulls = realloc(c->nulls, (size_t)capacity);
        if (nulls == NULL)
            goto no_memory;
        memset(nulls + c->capacity, 0, (size_t)(capacity - c->capacity));
        c->nulls = nulls;
    }
    c->capacity = capacity;
    return 0;
no_memory:
    PyErr_NoMemory();
    return -1;
}

/* The mask of NULLs, made when the first one comes; 0 or -1. */
static int column_mask(column *c)
{
    if (c->nulls != NULL)
        return 0;
    c->nulls = calloc((size_t)(c->capacity > 0 ? c->capacity : 1), 1);
    if (c->nulls == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* From KIND_NULL to a number column: the rows so far are NULLs. */
static int column_start_numbers(column *c, int kind)
{
    Py_ssize_t rows = c->rows;
    c->rows = 0;
    c->kind = kind;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (column_reserve(c) != 0 || column_mask(c) != 0)
            return -1;
        c->slots[c->rows].i = 0;
        c->nulls[c->rows++] = 1;
    }
    return 0;
}

/* To KIND_OBJECT: the values so far become Python objects. */
static int column_start_objects(column *c)
{
    PyObject *list = PyList_New(c->rows);
    if (list == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < c->rows; i++) {
        PyObject *value;
        if (c->kind == KIND_NULL || (c->nulls != NULL && c->nulls[i])) {
            Py_INCREF(Py_None);
            value = Py_None;
        } else if (c->kind == KIND_INT) {
            value = PyLong_FromLongLong(c->slots[i].i);
        } else {
            value = PyFloat_FromDouble(c->slots[i].d);
        }
        if (value == NULL) {
            Py_DECREF(list);
            return -1;
        }
        PyList_SET_ITEM(list, i, value);
    }
    free(c->slots);
    free(c->nulls);
    c->slots = NULL;
    c->nulls = NULL;
    c->capacity = 0;
    c->objects = list;
    c->kind = KIND_OBJECT;
    return 0;
}

/* Appends an object (stolen; NULL means the caller's error is set). */
static int column_add_object(column *c, PyObject *value)
{
    if (value == NULL || (c->kind != KIND_OBJECT && column_start_objects(c) != 0)) {
        Py_XDECREF(value);
        return -1;
    }
    int status = PyList_Append(c->objects, value);
    Py_DECREF(value);
    if (status == 0)
        c->rows++;
    return status;
}

/* Appends the value of the statement's column i; 0, or -1 with an exception. */
static int column_add(column *c, sq_stmt *statement, int i)
{
    /* One column_value, then the value's own accessors: each column_* call
     * would check the statement and the allocator again (per value, in the
     * hot loop). The value is read at once, as column_value allows. */
    sq_value *field = sq.column_value(statement, i);
    switch (sq.value_type(field)) {
    case SQ_INTEGER: {
        int64_t value = (int64_t)sq.value_int64(field);
        if (c->kind == KIND_OBJECT)
            return column_add_object(c, PyLong_FromLongLong(value));
        if ((c->kind == KIND_NULL && column_start_numbers(c, KIND_INT) != 0) ||
            column_reserve(c) != 0)
            return -1;
        if (c->kind == KIND_INT)
            c->slots[c->rows].i = value;
        else
            c->slots[c->rows].d = (double)value;
        break;
    }
    case SQ_FLOAT: {
        double value = sq.value_double(field);
        if (c->kind == KIND_OBJECT)
            return column_add_object(c, PyFloat_FromDouble(value));
        if ((c->kind == KIND_NULL && column_start_numbers(c, KIND_FLOAT) != 0) ||
            column_reserve(c) != 0)
            return -1;
        if (c->kind == KIND_INT) { /* every value so far becomes a double */
            for (Py_ssize_t row = 0; row < c->rows; row++)
                c->slots[row].d = (double)c->slots[row].i;
            c->kind = KIND_FLOAT;
        }
        c->slots[c->rows].d = value;
        break;
    }
    case SQ_TEXT: {
        const char *text = (const char *)sq.value_text(field);
        int size = sq.value_bytes(field);
        if (text == NULL)
            return column_add_object(c, PyErr_NoMemory());
        return column_add_object(c, column_text(c, text, size));
    }
    case SQ_BLOB: {
        const void *blob = sq.value_blob(field);
        int size = sq.value_bytes(field);
        return column_add_object(c, PyBytes_FromStringAndSize(size > 0 ? blob : "", size));
    }
    default: /* SQ_NULL */
        if (c->kind == KIND_NULL) {
            c->rows++;
            return 0;
        }
        if (c->kind == KIND_OBJECT) {
            Py_INCREF(Py_None);
            return column_add_object(c, Py_None);
        }
        if (column_reserve(c) != 0 || column_mask(c) != 0)
            return -1;
        c->slots[c->rows].i = 0;
        c->nulls[c->rows] = 1;
        break;
    }
    c->rows++;
    return 0;
}

/* The column as ("i8", bytes), ("f8", bytes) or ("O", list); a new
 * reference, or NULL with an exception. */
static PyObject *column_result(column *c)
{
    if (c->kind == KIND_NULL && column_start_objects(c) != 0)
        return NULL;
    if (c->kind == KIND_OBJECT)
        return Py_BuildValue("(sO)", "O", c->objects);
    if (c->kind == KIND_INT && c->nulls != NULL) { /* as pandas: NaN for NULL, so float64 */
        for (Py_ssize_t row = 0; row < c->rows; row++)
            c->slots[row].d = (double)c->slots[row].i;
        c->kind = KIND_FLOAT;
    }
    if (c->kind == KIND_FLOAT && c->nulls != NULL)
        for (Py_ssize_t row = 0; row < c->rows; row++)
            if (c->nulls[row])
                c->slots[row].d = NAN;
    /* A bytearray: numpy's array over it is writable, so pandas need not
     * copy it before the one copy into its own block. */
    PyObject *data = PyByteArray_FromStringAndSize(c->rows > 0 ? (const char *)c->slots : "",
                                                   c->rows * (Py_ssize_t)sizeof(slot));
    if (data == NULL)
        return NULL;
    PyObject *result = Py_BuildValue("(sN)", c->kind == KIND_INT ? "i8" : "f8", data);
    return result;
}

/* ---- the query ---- */

/* Raises _SQLiteError(-1, message): the reader's refusal of a statement or
 * its parameters, worded as the sqlite3 module words it. Returns -1. */
static int refuse(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    PyObject *message = PyUnicode_FromFormatV(format, arguments);
    va_end(arguments);
    PyObject *value = message != NULL ? Py_BuildValue("(iN)", -1, message) : NULL;
    if (value != NULL) {
        PyErr_SetObject(sqlite_error, value);
        Py_DECREF(value);
    }
    return -1;
}

/* Binds the parameters (int, float, str or None); 0, or -1 with an
 * exception (OverflowError for an int beyond int64, as sqlite3's). */
static int bind_parameters(sq_db *db, sq_stmt *statement, PyObject *parameters)
{
    Py_ssize_t count = PySequence_Fast_GET_SIZE(parameters);
    if (count != sq.bind_parameter_count(statement))
        return refuse("Incorrect number of bindings supplied. The current statement uses %d, and "
                      "there are %zd supplied.",
                      sq.bind_parameter_count(statement), count);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PySequence_Fast_GET_ITEM(parameters, i);
        int index = (int)i + 1, rc;
        if (value == Py_None) {
            rc = sq.bind_null(statement, index);
        } else if (PyLong_Check(value)) {
            long long number = PyLong_AsLongLong(value);
            if (number == -1 && PyErr_Occurred())
                return -1;
            rc = sq.bind_int64(statement, index, number);
        } else if (PyFloat_Check(value)) {
            rc = sq.bind_double(statement, index, PyFloat_AS_DOUBLE(value));
        } else if (PyUnicode_Check(value)) {
            Py_ssize_t size = 0;
            const char *text = PyUnicode_AsUTF8AndSize(value, &size);
            if (text == NULL)
                return -1;
            if (size > INT32_MAX)
                return refuse("Error binding parameter %d: a str of more than 2 GB", index);
            rc = sq.bind_text(statement, index, text, (int)size, SQ_TRANSIENT);
        } else {
            return refuse("Error binding parameter %d: type '%s' is not supported", index,
                          Py_TYPE(value)->tp_name);
        }
        if (rc != SQ_OK) {
            raise_sqlite(db, "cannot bind");
            return -1;
        }
    }
    return 0;
}

#define ROWS_PER_GIL_RELEASE 4096 /* about 4 ms */

/* Steps through the rows into columns (count of them); 0, or -1 with an
 * exception. */
static int read_rows(sq_db *db, sq_stmt *statement, column *columns, int count)
{
    for (unsigned long row = 0;; row++) {
        /* The first step may wait for a writer's lock (up to the busy
         * timeout), so it runs without the GIL; the others read pages and
         * run as the GIL's owner, which lets other threads run every
         * ROWS_PER_GIL_RELEASE rows (a release per row would cost more than
         * the row). */
        int rc;
        if (row % ROWS_PER_GIL_RELEASE == 0) {
            PyThreadState *thread = PyEval_SaveThread();
            rc = sq.step(statement);
            PyEval_RestoreThread(thread);
        } else {
            rc = sq.step(statement);
        }
        if (rc == SQ_DONE)
            return 0;
        if (rc != SQ_ROW) {
            raise_sqlite(db, "cannot read");
            return -1;
        }
        for (int i = 0; i < count; i++)
            if (column_add(&columns[i], statement, i) != 0)
                return -1;
        if (row % ROWS_PER_GIL_RELEASE == 0 && PyErr_CheckSignals() != 0)
            return -1;
    }
}

/* (names, columns) of the statement's result; NULL with an exception. */
static PyObject *read_result(sq_db *db, sq_stmt *statement)
{
    int count = sq.column_count(statement);
    column *columns = calloc((size_t)(count > 0 ? count : 1), sizeof(column));
    if (columns == NULL)
        return PyErr_NoMemory();
    PyObject *names = PyList_New(count), *results = PyList_New(count), *result = NULL;
    if (names == NULL || results == NULL || read_rows(db, statement, columns, count) != 0)
        goto done;
    for (int i = 0; i < count; i++) {
        const char *name = sq.column_name(statement, i);
        PyObject *text = PyUnicode_FromString(name != NULL ? name : "");
        PyObject *values = text != NULL ? column_result(&columns[i]) : NULL;
        if (values == NULL) {
            Py_XDECREF(text);
            goto done;
        }
        PyList_SET_ITEM(names, i, text);
        PyList_SET_ITEM(results, i, values);
    }
    result = PyTuple_Pack(2, names, results);
done:
    for (int i = 0; i < count; i++)
        column_free(&columns[i]);
    free(columns);
    Py_XDECREF(names);
    Py_XDECREF(results);
    return result;
}

/* SQLite's authorizer callback: asks the reader's Python policy
 * (reader._authorize), so both paths refuse the same statements. A policy
 * that fails denies. SQLite calls it while preparing, which may happen
 * again inside a step (after a writer changed the schema), where this thread
 * has let the GIL go: it takes the GIL itself. */
static int authorize(void *policy, int action, const char *first, const char *second,
                     const char *database, const char *source)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *answer =
        PyObject_CallFunction((PyObject *)policy, "izzzz", action, first, second, database, source);
    long value = answer != NULL ? PyLong_AsLong(answer) : -1;
    Py_XDECREF(answer);
    if (value == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        value = 1; /* SQLITE_DENY */
    }
    PyGILState_Release(gil);
    return (int)value;
}

/* Whether text holds only white space, semicolons and comments. */
static int only_blank(const char *text)
{
    while (*text != '\0') {
        if (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r' || *text == '\f' ||
            *text == '\v' || *text == ';') {
            text++;
        } else if (text[0] == '-' && text[1] == '-') {
            while (*text != '\0' && *text != '\n')
                text++;
        } else if (text[0] == '/' && text[1] == '*') {
            const char *end = strstr(text + 2, "*/");
            if (end == NULL)
                return 1;
            text = end + 2;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Opens uri read-only and prepares query, after the setup statements; the
 * authorizer (when not None) is installed after the setup. 0, or -1 with an
 * exception and whatever was opened in *db and *statement for the caller to
 * close. *statement stays NULL for an empty query. */
static int prepare(const char *uri, PyObject *setup, const char *query, PyObject *authorizer,
                   int timeout_ms, sq_db **db, sq_stmt **statement)
{
    PyThreadState *thread = PyEval_SaveThread();
    int rc = sq.open_v2(uri, db, SQ_OPEN_READONLY | SQ_OPEN_URI | SQ_OPEN_NOMUTEX, NULL);
    PyEval_RestoreThread(thread);
    if (rc != SQ_OK) {
        raise_sqlite(*db, "cannot open");
        return -1;
    }
    sq.busy_timeout(*db, timeout_ms);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(setup); i++) {
        const char *text = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(setup, i));
        if (text == NULL)
            return -1;
        if (sq.exec(*db, text, NULL, NULL, NULL) != SQ_OK) {
            raise_sqlite(*db, "cannot set the connection up");
            return -1;
        }
    }
    if (authorizer != Py_None && sq.set_authorizer(*db, authorize, authorizer) != SQ_OK) {
        raise_sqlite(*db, "cannot install the authorizer");
        return -1;
    }
    const char *tail = NULL;
    if (sq.prepare_v2(*db, query, -1, statement, &tail) != SQ_OK) {
        raise_sqlite(*db, "cannot prepare the query");
        return -1;
    }
    if (tail != NULL && !only_blank(tail))
        return refuse("You can only execute one statement at a time.");
    return 0;
}

/* _read_columns(uri, setup, query, parameters, timeout_ms, authorizer):
 * opens uri read-only, runs the setup statements (the reader's pragmas and,
 * on a version 6 session, its temporary views), installs the authorizer
 * (reader._authorize, or None), then runs query, one statement, with its
 * parameters (a sequence), and returns (names, columns), each column ("i8"
 * or "f8", a bytearray of packed native-endian values) or ("O", list);
 * ([], []) for an
 * empty query. The connection is closed before it returns. */
PyObject *flare_columns_read(PyObject *module, PyObject *args)
{
    (void)module;
    const char *uri, *query;
    PyObject *setup, *parameters, *authorizer;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "sOsOiO:_read_columns", &uri, &setup, &query, &parameters,
                          &timeout_ms, &authorizer))
        return NULL;
    if (sq_resolve() != 0)
        return PyErr_Format(PyExc_RuntimeError, "flare: the fast path is unavailable: %s",
                            sq_reason);
    PyObject *setup_list = PySequence_Fast(setup, "setup must be a sequence of str");
    PyObject *parameter_list =
        setup_list != NULL ? PySequence_Fast(parameters, "parameters must be a sequence") : NULL;
    sq_db *db = NULL;
    sq_stmt *statement = NULL;
    PyObject *result = NULL;
    if (parameter_list != NULL &&
        prepare(uri, setup_list, query, authorizer, timeout_ms, &db, &statement) == 0) {
        if (statement == NULL)
            result = Py_BuildValue("([][])");
        else if (bind_parameters(db, statement, parameter_list) == 0)
            result = read_result(db, statement);
    }
    if (statement != NULL)
        sq.finalize(statement);
    if (db != NULL)
        sq.close_v2(db);
    Py_XDECREF(setup_list);
    Py_XDECREF(parameter_list);
    return result;
}

PyObject *flare_columns_available(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int available = sq_resolve() == 0;
    return Py_BuildValue("(Os)", available ? Py_True : Py_False, available ? "" : sq_reason);
}

int flare_columns_init(PyObject *module)
{
    if (sqlite_error == NULL) {
        sqlite_error = PyErr_NewException("flare._flare._SQLiteError", NULL, NULL);
        if (sqlite_error == NULL)
            return -1;
    }
    Py_INCREF(sqlite_error);
    if (PyModule_AddObject(module, "_SQLiteError", sqlite_error) < 0) {
        Py_DECREF(sqlite_error);
        return -1;
    }
    return 0;
}
