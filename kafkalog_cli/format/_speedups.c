/*
 * Optional C fast path for the v2 record decoder (kafkalog_cli/format/records.py).
 *
 * decode_v2(data, count, base_offset, base_timestamp, append_time, limit, records,
 *           corrupt_error, limit_error)
 * fills records.offsets / timestamps / keys / values / headers exactly as the pure-Python
 * decoder does, and raises the same errors. records.py falls back to Python when this module
 * is not built; tests run both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *empty_tuple;

/* Zigzag varint of at most max_bytes bytes; returns 0 on success, -1 on a bad varint. */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return -1;
        unsigned char b = buf[p++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            if (max_bytes == 5)
                raw &= 0xFFFFFFFFULL;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            if (max_bytes == 5)
                *out = (int32_t)*out;
            *pos = p;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static int
append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

static PyObject *
read_headers(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, PyObject *err)
{
    int64_t n, klen, vlen;
    if (read_varint(buf, pos, end, 5, &n) < 0 || n < 0 || n > end - *pos) {
        PyErr_SetString(err, "invalid number of record headers");
        return NULL;
    }
    PyObject *tuple = PyTuple_New((Py_ssize_t)n);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (read_varint(buf, pos, end, 5, &klen) < 0 || klen < 0 || *pos + klen > end) {
            PyErr_SetString(err, "invalid header key size");
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + *pos, (Py_ssize_t)klen, "replace");
        if (key == NULL)
            goto fail;
        *pos += klen;
        PyObject *value;
        if (read_varint(buf, pos, end, 5, &vlen) < 0) {
            Py_DECREF(key);
            PyErr_SetString(err, "invalid header value size");
            goto fail;
        }
        if (vlen < 0) {
            value = Py_None;
            Py_INCREF(value);
        } else {
            if (*pos + vlen > end) {
                Py_DECREF(key);
                PyErr_SetString(err, "invalid header value size");
                goto fail;
            }
            value = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)vlen);
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            *pos += vlen;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL)
            goto fail;
        PyTuple_SET_ITEM(tuple, i, pair);
    }
    return tuple;
fail:
    Py_DECREF(tuple);
    return NULL;
}

static PyObject *
get_list(PyObject *records, const char *name)
{
    PyObject *list = PyObject_GetAttrString(records, name);
    if (list != NULL && !PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "records.%s must be a list", name);
        Py_DECREF(list);
        return NULL;
    }
    return list;
}

static PyObject *
decode_v2(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, limit;
    PyObject *append_obj, *records, *err, *limit_err;
    PyObject *offsets = NULL, *timestamps = NULL, *keys = NULL, *values = NULL, *headers = NULL;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "y*nLLOLOOO", &view, &count, &base_offset, &base_ts,
                          &append_obj, &limit, &records, &err, &limit_err))
        return NULL;
    int have_append = append_obj != Py_None;
    long long append_ts = 0;
    if (have_append) {
        append_ts = PyLong_AsLongLong(append_obj);
        if (append_ts == -1 && PyErr_Occurred())
            goto done;
    }
    if (!(offsets = get_list(records, "offsets")) || !(timestamps = get_list(records, "timestamps"))
        || !(keys = get_list(records, "keys")) || !(values = get_list(records, "values"))
        || !(headers = get_list(records, "headers")))
        goto done;

    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, n;
        if (pos >= end) {
            PyErr_Format(err, "premature end of record data: %zd of %zd records read", i, count);
            goto done;
        }
        if (read_varint(buf, &pos, end, 5, &length) < 0) {
            PyErr_SetString(err, "invalid record length varint");
            goto done;
        }
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        if (length < 0 || length > end - pos) {
            PyErr_Format(err, "invalid record size %lld with %zd bytes left", (long long)length,
                         end - pos);
            goto done;
        }
        if (length > limit) {
            PyErr_Format(limit_err, "record of %lld bytes exceeds the limit of %lld bytes",
                         (long long)length, limit);
            goto done;
        }
        Py_ssize_t start = pos;
        pos += 1; /* attributes */
        if (read_varint(buf, &pos, rec_end, 10, &ts_delta) < 0
            || read_varint(buf, &pos, rec_end, 5, &off_delta) < 0) {
            PyErr_SetString(err, "record runs past the end of the batch data");
            goto done;
        }
        if (append_new(offsets, PyLong_FromLongLong(base_offset + off_delta)) < 0
            || append_new(timestamps, PyLong_FromLongLong(have_append ? append_ts : base_ts + ts_delta)) < 0)
            goto done;
        /* key, value */
        for (int kv = 0; kv < 2; kv++) {
            PyObject *target = kv ? values : keys;
            if (read_varint(buf, &pos, rec_end, 5, &n) < 0) {
                PyErr_SetString(err, "record runs past the end of the batch data");
                goto done;
            }
            if (n < 0) {
                if (PyList_Append(target, Py_None) < 0)
                    goto done;
            } else {
                if (n > end - pos) {
                    PyErr_SetString(err, "record runs past the end of the batch data");
                    goto done;
                }
                if (append_new(target, PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)n)) < 0)
                    goto done;
                pos += (Py_ssize_t)n;
            }
        }
        if (pos < rec_end && buf[pos] == 0) {
            pos += 1;
            if (PyList_Append(headers, empty_tuple) < 0)
                goto done;
        } else {
            if (pos >= end) {
                PyErr_SetString(err, "record runs past the end of the batch data");
                goto done;
            }
            if (append_new(headers, read_headers(buf, &pos, rec_end, err)) < 0)
                goto done;
        }
        if (pos != rec_end) {
            PyErr_Format(err, "invalid record size: expected %lld bytes, read %zd",
                         (long long)length, pos - start);
            goto done;
        }
    }
    if (pos != end) {
        PyErr_Format(err, "incorrect declared batch size: %zd bytes remain after %zd records",
                     end - pos, count);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_v2", decode_v2, METH_VARARGS, "Decode v2 records into a Records object's lists."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "C fast path for the v2 record decoder.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return NULL;
    return PyModule_Create(&module);
}
