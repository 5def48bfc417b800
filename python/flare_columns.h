/*
 * flare_columns.h: the session reader's fast path (flare_columns.c), the
 * functions flare_module.c adds to flare._flare. Private to the package:
 * python/flare/reader.py is the only caller.
 */
#ifndef FLARE_PYTHON_FLARE_COLUMNS_H
#define FLARE_PYTHON_FLARE_COLUMNS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _read_columns(uri, setup, query, parameters, timeout_ms) -> (names,
 * columns): see flare_columns.c. */
PyObject *flare_columns_read(PyObject *module, PyObject *args);

/* _columns_available() -> (bool, reason). */
PyObject *flare_columns_available(PyObject *module, PyObject *unused);

/* Adds the exception _SQLiteError to the module; 0, or -1 with an
 * exception set. */
int flare_columns_init(PyObject *module);

#endif /* FLARE_PYTHON_FLARE_COLUMNS_H */
