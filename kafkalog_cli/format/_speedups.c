/*
 * Optional C fast path for the v2 record decoder (kafkalog_cli/format/records.py).
 *
 * decode_v2(data, pos, n, done, total, base_offset, base_timestamp, append_time, limit,
 *           records, corrupt_error, limit_error) -> new pos
 * decodes n records from data[pos:] into records.offsets / timestamps / keys / values /
 * headers and returns the position after them, exactly as records._decode_v2_loop does: the
 * same values, the same error classes and the same error messages (tests/format/test_c_differential.py
 * checks it). On an error the lists keep the complete records before it. records.py falls back
 * to Python when this module is not built.
 *
 * Every sum is checked before it is made: a record offset or timestamp outside a signed 64-bit
 * long is invalid data (CorruptRecordError), never a wrapped value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *empty_tuple;

#define VARINT_OK 0
#define VARINT_PAST_END (-1)
#define VARINT_TOO_LONG (-2)

/* Zigzag varint of at most max_bytes bytes within buf[*pos:end]. Excess high bits of the last
 * group are dropped, as Kafka's ByteUtils does. */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return VARINT_PAST_END;
        unsigned char b = buf[p++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            if (max_bytes == 5)
                raw &= 0xFFFFFFFFULL;
            /* (raw >> 1) < 2^63: the conversion is exact; so is the negation of 0 or 1 */
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p;
            return VARINT_OK;
        }
        shift += 7;
    }
    return VARINT_TOO_LONG;
}

/* The error of a failed body varint, as records._varint reports it. */
static void
varint_error(PyObject *err, int r, int max_bytes)
{
    if (r == VARINT_TOO_LONG)
        PyErr_Format(err, "varint longer than %d bytes", max_bytes);
    else
        PyErr_SetString(err, "record runs past the end of the batch data");
}

/* a + b, or -1 when it does not fit an int64_t (no signed overflow is ever evaluated). */
static inline int
add_int64(int64_t a, int64_t b, int64_t *out)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return -1;
    *out = a + b;
    return 0;
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
    int r;
    if ((r = read_varint(buf, pos, end, 5, &n)) != VARINT_OK) {
        varint_error(err, r, 5);
        return NULL;
    }
    if (n < 0 || n > end - *pos) {
        PyErr_Format(err, "invalid number of record headers %lld", (long long)n);
        return NULL;
    }
    PyObject *tuple = PyTuple_New((Py_ssize_t)n);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((r = read_varint(buf, pos, end, 5, &klen)) != VARINT_OK) {
            varint_error(err, r, 5);
            goto fail;
        }
        if (klen < 0 || klen > end - *pos) {
            PyErr_Format(err, "invalid header key size %lld", (long long)klen);
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + *pos, (Py_ssize_t)klen, "kafkalog-java-utf8");
        if (key == NULL)
            goto fail;
        *pos += (Py_ssize_t)klen;
        PyObject *value;
        if ((r = read_varint(buf, pos, end, 5, &vlen)) != VARINT_OK) {
            Py_DECREF(key);
            varint_error(err, r, 5);
            goto fail;
        }
        if (vlen < 0) {
            value = Py_None;
            Py_INCREF(value);
        } else {
            if (vlen > end - *pos) {
                Py_DECREF(key);
                PyErr_Format(err, "invalid header value size %lld", (long long)vlen);
                goto fail;
            }
            value = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)vlen);
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            *pos += (Py_ssize_t)vlen;
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
    Py_ssize_t pos, count, done, total;
    long long base_offset, base_ts, limit;
    PyObject *append_obj, *records, *err, *limit_err;
    PyObject *offsets = NULL, *timestamps = NULL, *keys = NULL, *values = NULL, *headers = NULL;
    PyObject *result = NULL;
    Py_ssize_t complete = -1; /* list length to keep on an error, once the lists are known */

    if (!PyArg_ParseTuple(args, "y*nnnnLLOLOOO", &view, &pos, &count, &done, &total,
                          &base_offset, &base_ts, &append_obj, &limit, &records, &err,
                          &limit_err))
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
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "start position outside the data");
        goto done;
    }
    if (count > 0 && (done < 0 || done > PY_SSIZE_T_MAX - count)) {
        PyErr_SetString(PyExc_ValueError, "records done out of range"); /* done + i must fit */
        goto done;
    }
    complete = PyList_GET_SIZE(headers);

    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, n, offset, timestamp;
        int r;
        if (pos >= end) {
            PyErr_Format(err, "premature end of record data: %zd of %zd records read", done + i,
                         total);
            goto done;
        }
        if (read_varint(buf, &pos, end, 5, &length) != VARINT_OK) {
            PyErr_SetString(err, "invalid record length varint");
            goto done;
        }
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
        Py_ssize_t start = pos, rec_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes: unused (pos may now be end + 1: the next read fails) */
        if ((r = read_varint(buf, &pos, end, 10, &ts_delta)) != VARINT_OK) {
            varint_error(err, r, 10);
            goto done;
        }
        if (have_append)
            timestamp = append_ts;
        else if (add_int64(base_ts, ts_delta, &timestamp) < 0) {
            PyErr_Format(err, "record timestamp overflows a 64-bit long: base timestamp %lld + "
                         "timestampDelta %lld", base_ts, (long long)ts_delta);
            goto done;
        }
        if ((r = read_varint(buf, &pos, end, 5, &off_delta)) != VARINT_OK) {
            varint_error(err, r, 5);
            goto done;
        }
        if (add_int64(base_offset, off_delta, &offset) < 0) {
            PyErr_Format(err, "record offset overflows a 64-bit long: base offset %lld + "
                         "offsetDelta %lld", base_offset, (long long)off_delta);
            goto done;
        }
        /* key, value */
        for (int kv = 0; kv < 2; kv++) {
            PyObject *target = kv ? values : keys;
            if ((r = read_varint(buf, &pos, end, 5, &n)) != VARINT_OK) {
                varint_error(err, r, 5);
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
        PyObject *hdrs;
        if (pos >= end) {
            PyErr_SetString(err, "record runs past the end of the batch data");
            goto done;
        }
        if (buf[pos] == 0) {
            pos += 1;
            hdrs = empty_tuple;
            Py_INCREF(hdrs);
        } else if ((hdrs = read_headers(buf, &pos, end, err)) == NULL)
            goto done;
        if (pos != rec_end) {
            Py_DECREF(hdrs);
            PyErr_Format(err, "invalid record size: expected %lld bytes, read %zd",
                         (long long)length, pos - start);
            goto done;
        }
        if (append_new(offsets, PyLong_FromLongLong(offset)) < 0
            || append_new(timestamps, PyLong_FromLongLong(timestamp)) < 0) {
            Py_DECREF(hdrs);
            goto done;
        }
        if (append_new(headers, hdrs) < 0)
            goto done;
    }
    result = PyLong_FromSsize_t(pos);
done:
    if (result == NULL && complete >= 0) {
        /* keep the complete records only (headers is appended last) */
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        complete = PyList_GET_SIZE(headers);
        PyObject *lists[4] = {offsets, timestamps, keys, values};
        for (int k = 0; k < 4; k++)
            if (PyList_GET_SIZE(lists[k]) > complete)
                PyList_SetSlice(lists[k], complete, PyList_GET_SIZE(lists[k]), NULL);
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    PyBuffer_Release(&view);
    return result;
}

/* -- encode_lines: the records area of `kafkalog append --input-format lines` -----------------
 *
 * encode_lines(data, pos, end, key, timestamp_delta, count, pending_bytes, batch_records,
 *              batch_bytes) -> (area, pos, taken, pending_bytes, full)
 * mirrors format/encode.py's encode_lines to the byte (tests/format/test_c_differential.py): each line
 * of data[pos:end] (ending at "\n", dropped with a "\r" before it; the last may have none) becomes
 * a v2 record (DefaultRecord: attributes 0, the timestamp delta, the offset delta going on
 * from count, key, the line as value, no headers) until the batch is full. */

static inline int
zigzag_size(int64_t v)
{
    uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *
put_zigzag(unsigned char *out, int64_t v)
{
    uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (raw >= 0x80) {
        *out++ = (unsigned char)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (unsigned char)raw;
    return out;
}

/* The end of the line at p (before its "\r\n" or "\n") and the start of the next. */
static inline void
line_bounds(const unsigned char *buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t *stop,
            Py_ssize_t *next)
{
    const unsigned char *nl = memchr(buf + p, '\n', (size_t)(end - p));
    if (nl == NULL) {
        *stop = *next = end;
        return;
    }
    Py_ssize_t at = nl - buf;
    *next = at + 1;
    *stop = (at > p && buf[at - 1] == '\r') ? at - 1 : at;
}

static PyObject *
encode_lines(PyObject *self, PyObject *args)
{
    Py_buffer view, keyview;
    PyObject *key_obj;
    Py_ssize_t pos, end;
    long long ts_delta, count, pending, batch_records, batch_bytes;
    if (!PyArg_ParseTuple(args, "y*nnOLLLLL", &view, &pos, &end, &key_obj, &ts_delta, &count,
                          &pending, &batch_records, &batch_bytes))
        return NULL;
    int has_key = key_obj != Py_None;
    keyview.buf = NULL;
    keyview.len = 0;
    if (has_key && PyObject_GetBuffer(key_obj, &keyview, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = view.buf;
    if (pos < 0 || pos > end || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "positions outside the data");
        goto fail;
    }
    int64_t fixed = (int64_t)keyview.len + 21;
    int key_size = has_key ? zigzag_size(keyview.len) : 1;
    int ts_size = zigzag_size(ts_delta);
    /* pass 1: which lines are taken, and the bytes of their records */
    Py_ssize_t p = pos, stop, next, total = 0;
    int64_t n = count, bytes = pending, taken = 0;
    int full = 0;
    while (p < end) {
        line_bounds(buf, p, end, &stop, &next);
        int64_t vlen = stop - p, size = fixed + vlen;
        if (n && bytes + size > batch_bytes) {
            full = 1;
            break;
        }
        int64_t body = 1 + ts_size + zigzag_size(n) + key_size + (has_key ? keyview.len : 0)
                       + zigzag_size(vlen) + vlen + 1;
        total += zigzag_size(body) + body;
        n++;
        taken++;
        bytes += size;
        p = next;
        if (n >= batch_records || bytes >= batch_bytes) {
            full = 1;
            break;
        }
    }
    PyObject *area = PyBytes_FromStringAndSize(NULL, total);
    if (area == NULL)
        goto fail;
    /* pass 2: the records */
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(area);
    Py_ssize_t q = pos;
    for (int64_t i = 0; i < taken; i++) {
        line_bounds(buf, q, end, &stop, &next);
        int64_t vlen = stop - q, delta = count + i;
        int64_t body = 1 + ts_size + zigzag_size(delta) + key_size
                       + (has_key ? keyview.len : 0) + zigzag_size(vlen) + vlen + 1;
        out = put_zigzag(out, body);
        *out++ = 0;
        out = put_zigzag(out, ts_delta);
        out = put_zigzag(out, delta);
        if (has_key) {
            out = put_zigzag(out, keyview.len);
            memcpy(out, keyview.buf, (size_t)keyview.len);
            out += keyview.len;
        } else {
            *out++ = 1;
        }
        out = put_zigzag(out, vlen);
        memcpy(out, buf + q, (size_t)vlen);
        out += vlen;
        *out++ = 0;
        q = next;
    }
    if (has_key)
        PyBuffer_Release(&keyview);
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnLLO)", area, p, (long long)taken, (long long)bytes,
                         full ? Py_True : Py_False);
fail:
    if (has_key)
        PyBuffer_Release(&keyview);
    PyBuffer_Release(&view);
    return NULL;
}

/* -- encode_records: the records area of a v2 batch of format/encode.py's Records ------------
 *
 * encode_records(records, base_timestamp) -> bytes, or None
 * mirrors format/encode.py's encode_v2_records (each Record as DefaultRecord: attributes 0, the
 * timestamp delta from base_timestamp, the offset delta (its index), key, value, headers) to the
 * byte (tests/format/test_c_differential.py). None, for the caller to use the Python, when a record is
 * not plainly made of bytes, None, ints and (str, bytes or None) header tuples, or its
 * timestamp delta does not fit 64 bits. */

static PyObject *str_key, *str_value, *str_timestamp, *str_headers;

typedef struct {
    PyObject *key, *value, *headers; /* new references; headers a tuple or list */
    int64_t delta;
    Py_ssize_t body;
} rec_fields;

static void
rec_clear(rec_fields *r)
{
    Py_CLEAR(r->key);
    Py_CLEAR(r->value);
    Py_CLEAR(r->headers);
}

/* 1: read, 0: not plain (fall back), -1: error */
static int
rec_read(PyObject *rec, int64_t base_ts, Py_ssize_t index, rec_fields *r)
{
    r->key = r->value = r->headers = NULL;
    PyObject *ts = NULL;
    int ok = 0;
    if ((r->key = PyObject_GetAttr(rec, str_key)) == NULL
            || (r->value = PyObject_GetAttr(rec, str_value)) == NULL
            || (ts = PyObject_GetAttr(rec, str_timestamp)) == NULL
            || (r->headers = PyObject_GetAttr(rec, str_headers)) == NULL) {
        Py_XDECREF(ts);
        rec_clear(r);
        return -1;
    }
    if ((r->key != Py_None && !PyBytes_CheckExact(r->key))
            || (r->value != Py_None && !PyBytes_CheckExact(r->value))
            || !PyLong_CheckExact(ts)
            || !(PyTuple_CheckExact(r->headers) || PyList_CheckExact(r->headers)))
        goto done;
    if (PyList_CheckExact(r->headers)) {
        /* a copy that nothing can change between the two passes */
        PyObject *frozen = PyList_AsTuple(r->headers);
        if (frozen == NULL) {
            Py_DECREF(ts);
            rec_clear(r);
            return -1;
        }
        Py_SETREF(r->headers, frozen);
    }
    int overflow;
    long long t = PyLong_AsLongLongAndOverflow(ts, &overflow);
    if (overflow || (t == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        goto done;
    }
    if (__builtin_sub_overflow((int64_t)t, base_ts, &r->delta))
        goto done;
    Py_ssize_t body = 1 + zigzag_size(r->delta) + zigzag_size(index);
    if (r->key == Py_None)
        body += 1;
    else
        body += zigzag_size(PyBytes_GET_SIZE(r->key)) + PyBytes_GET_SIZE(r->key);
    if (r->value == Py_None)
        body += 1;
    else
        body += zigzag_size(PyBytes_GET_SIZE(r->value)) + PyBytes_GET_SIZE(r->value);
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(r->headers);
    body += zigzag_size(nh);
    for (Py_ssize_t i = 0; i < nh; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(r->headers, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            goto done;
        PyObject *hk = PyTuple_GET_ITEM(pair, 0), *hv = PyTuple_GET_ITEM(pair, 1);
        if (!PyUnicode_CheckExact(hk) || (hv != Py_None && !PyBytes_CheckExact(hv)))
            goto done;
        Py_ssize_t klen;
        if (PyUnicode_AsUTF8AndSize(hk, &klen) == NULL) {
            PyErr_Clear(); /* a lone surrogate: the Python raises its own error */
            goto done;
        }
        body += zigzag_size(klen) + klen;
        body += hv == Py_None ? 1 : zigzag_size(PyBytes_GET_SIZE(hv)) + PyBytes_GET_SIZE(hv);
    }
    r->body = body;
    ok = 1;
done:
    Py_DECREF(ts);
    if (!ok)
        rec_clear(r);
    return ok;
}

static inline unsigned char *
put_bytes_field(unsigned char *out, PyObject *b)
{
    if (b == Py_None) {
        *out++ = 1;
        return out;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    out = put_zigzag(out, n);
    memcpy(out, PyBytes_AS_STRING(b), (size_t)n);
    return out + n;
}

static PyObject *
encode_records(PyObject *self, PyObject *args)
{
    PyObject *records;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "OL", &records, &base_ts))
        return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    rec_fields *fields = PyMem_Malloc(sizeof(rec_fields) * (size_t)(n ? n : 1));
    PyObject *result = NULL;
    Py_ssize_t got = 0;
    if (fields == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (; got < n; got++) {
        int r = rec_read(PySequence_Fast_GET_ITEM(seq, got), base_ts, got, &fields[got]);
        if (r < 0)
            goto out;
        if (r == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto out;
        }
        total += zigzag_size(fields[got].body) + fields[got].body;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto out;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        rec_fields *r = &fields[i];
        o = put_zigzag(o, r->body);
        *o++ = 0;
        o = put_zigzag(o, r->delta);
        o = put_zigzag(o, i);
        o = put_bytes_field(o, r->key);
        o = put_bytes_field(o, r->value);
        Py_ssize_t nh = PySequence_Fast_GET_SIZE(r->headers);
        o = put_zigzag(o, nh);
        for (Py_ssize_t h = 0; h < nh; h++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(r->headers, h);
            Py_ssize_t klen;
            const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen);
            o = put_zigzag(o, klen);
            memcpy(o, k, (size_t)klen);
            o += klen;
            o = put_bytes_field(o, PyTuple_GET_ITEM(pair, 1));
        }
    }
out:
    if (fields != NULL) {
        for (Py_ssize_t i = 0; i < got; i++)
            rec_clear(&fields[i]);
        PyMem_Free(fields);
    }
    Py_DECREF(seq);
    return result;
}

/* -- v2_records_ok: do a batch's uncompressed records decode? ---------------------------------
 *
 * v2_records_ok(buf, start, end, count, base_offset, base_timestamp, log_append_time, limit)
 * -> bool: True when records.iter_v2_records would decode the count records of buf[start:end]
 * without an error (CorruptRecordError or LimitExceededError: every check of decode_v2, and
 * the data filled exactly), reading them in place and making no object; False when it would
 * raise, for the caller to decode them and say why. Mirrored by format/scan.py's
 * v2_records_ok (tests/format/test_c_differential.py). */

/* The check of v2_records_ok on buf[start:end] (positions already checked): 1 when the count
 * records decode, else 0. */
static int
records_ok(const unsigned char *buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
           int64_t base_offset, int64_t base_ts, int log_append_time, int64_t limit)
{
    Py_ssize_t pos = start;
    int ok = count >= 0;
    for (Py_ssize_t i = 0; ok && i < count; i++) {
        int64_t length, ts_delta, off_delta, n, value;
        ok = 0;
        if (pos >= end || read_varint(buf, &pos, end, 5, &length) != VARINT_OK
                || length < 0 || length > end - pos || length > limit)
            break;
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        if (read_varint(buf, &pos, end, 10, &ts_delta) != VARINT_OK
                || (!log_append_time && add_int64(base_ts, ts_delta, &value) < 0)
                || read_varint(buf, &pos, end, 5, &off_delta) != VARINT_OK
                || add_int64(base_offset, off_delta, &value) < 0)
            break;
        int kv;
        for (kv = 0; kv < 2; kv++) {
            if (read_varint(buf, &pos, end, 5, &n) != VARINT_OK || n > end - pos)
                break;
            if (n > 0)
                pos += (Py_ssize_t)n;
        }
        if (kv < 2 || pos >= end)
            break;
        /* headers, as read_headers reads them */
        int64_t nh;
        if (read_varint(buf, &pos, end, 5, &nh) != VARINT_OK || nh < 0 || nh > end - pos)
            break;
        int64_t h;
        for (h = 0; h < nh; h++) {
            if (read_varint(buf, &pos, end, 5, &n) != VARINT_OK || n < 0 || n > end - pos)
                break;
            pos += (Py_ssize_t)n;
            if (read_varint(buf, &pos, end, 5, &n) != VARINT_OK || n > end - pos)
                break;
            if (n > 0)
                pos += (Py_ssize_t)n;
        }
        if (h < nh || pos != rec_end)
            break;
        ok = 1;
    }
    if (ok && pos != end)
        ok = 0; /* bytes left after the records: "incorrect declared batch size" */
    return ok;
}

static PyObject *
v2_records_ok(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long base_offset, base_ts, limit;
    int log_append_time;
    if (!PyArg_ParseTuple(args, "y*nnnLLpL", &view, &start, &end, &count, &base_offset,
                          &base_ts, &log_append_time, &limit))
        return NULL;
    if (start < 0 || start > end || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "positions outside the data");
        return NULL;
    }
    int ok = records_ok(view.buf, start, end, count, base_offset, base_ts, log_append_time,
                        limit);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

/* -- recover_run: LogSegment.recover's batch loop, its common case -----------------------------
 *
 * recover_run(buf, pos, end, at, scan, prev_last, limit, epoch_limit, crc32c)
 *     -> (new_pos, prev_last, short)
 * mirrors log/recovery_scan.py's recover_run_python (tests/format/test_c_differential.py): from
 * buf[pos:] (byte i of buf is byte at + i of the segment) up to end, each whole v2 batch that the
 * recovery scan keeps by its own bytes alone is kept in scan (a SegmentScan: its valid_end,
 * last_offset, first_offset, records, producer_positions and the IndexBuilder scan.builder, as
 * SegmentScan.keep and IndexBuilder.add change them); it stops at the first other batch, left to
 * the general path, or for want of bytes (short: fewer than a v2 header before end, or a batch
 * running past it). The attributes are read once and written back once, also when an error
 * (from crc32c) stops the run: the batches before it stay kept, as in the Python. */

#define RUN_V2_OVERHEAD 61
#define RUN_MAX_RELATIVE 2147483647LL

static inline int64_t
be64_at(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static inline int32_t
be32_at(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
                     | (uint32_t)p[3]);
}

/* An int attribute of obj within 64 bits into *out (*none set for None when none is not
 * NULL); -1 with an exception set otherwise. */
static int
attr_i64(PyObject *obj, const char *name, int64_t *out, int *none)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL)
        return -1;
    if (none != NULL) {
        *none = v == Py_None;
        if (*none) {
            Py_DECREF(v);
            *out = 0;
            return 0;
        }
    }
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

static int
set_i64(PyObject *obj, const char *name, int64_t v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    int r = PyObject_SetAttrString(obj, name, o);
    Py_DECREF(o);
    return r;
}

/* Is the sequence attribute `name` of obj empty? 1, 0, or -1 with an exception set. */
static int
attr_empty(PyObject *obj, const char *name)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL)
        return -1;
    Py_ssize_t n = PyObject_Length(v);
    Py_DECREF(v);
    return n < 0 ? -1 : n == 0;
}

typedef struct {
    unsigned char *data;
    size_t len, cap;
} growbuf;

static int
grow_put(growbuf *g, const unsigned char *p, size_t n)
{
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        while (cap < g->len + n)
            cap *= 2;
        unsigned char *d = PyMem_Realloc(g->data, cap);
        if (d == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->data = d;
        g->cap = cap;
    }
    memcpy(g->data + g->len, p, n);
    g->len += n;
    return 0;
}

static void
put_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* Append the bytes of g to the bytearray attribute `name` of obj. */
static int
extend_bytearray(PyObject *obj, const char *name, const growbuf *g)
{
    if (g->len == 0)
        return 0;
    PyObject *ba = PyObject_GetAttrString(obj, name);
    if (ba == NULL)
        return -1;
    if (!PyByteArray_Check(ba)) {
        Py_DECREF(ba);
        PyErr_Format(PyExc_TypeError, "%s is not a bytearray", name);
        return -1;
    }
    Py_ssize_t old = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, old + (Py_ssize_t)g->len) < 0) {
        Py_DECREF(ba);
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(ba) + old, g->data, g->len);
    Py_DECREF(ba);
    return 0;
}

static PyObject *
recover_run(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end;
    long long at, limit, epoch_limit;
    PyObject *scan, *prev_obj, *crc_func;
    if (!PyArg_ParseTuple(args, "y*nnLOOLLO", &view, &pos, &end, &at, &scan, &prev_obj, &limit,
                          &epoch_limit, &crc_func))
        return NULL;
    if (pos < 0 || pos > end || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "positions outside the data");
        return NULL;
    }
    const unsigned char *buf = view.buf;
    PyObject *builder = NULL, *producers = NULL, *result = NULL;
    growbuf offsets = {NULL, 0, 0}, times = {NULL, 0, 0};
    int failed = 0;

    /* prev_last: None, a long, or beyond one (above: nothing follows it; below: all do) */
    int prev_none = prev_obj == Py_None, prev_above = 0, prev_below = 0;
    int64_t prev = 0;
    if (!prev_none) {
        int ovf;
        prev = PyLong_AsLongLongAndOverflow(prev_obj, &ovf);
        if (prev == -1 && PyErr_Occurred())
            goto done;
        prev_above = ovf > 0;
        prev_below = ovf < 0;
    }
    builder = PyObject_GetAttrString(scan, "builder");
    if (builder == NULL)
        goto done;
    producers = PyObject_GetAttrString(scan, "producer_positions");
    if (producers == NULL)
        goto done;
    if (!PyList_Check(producers)) {
        PyErr_SetString(PyExc_TypeError, "producer_positions is not a list");
        goto done;
    }
    /* the segment's base offset (the index's), beyond a long: no batch reaches it */
    int base_ok = 1;
    int64_t base;
    {
        PyObject *b = PyObject_GetAttrString(builder, "base_offset");
        if (b == NULL)
            goto done;
        int ovf;
        base = PyLong_AsLongLongAndOverflow(b, &ovf);
        Py_DECREF(b);
        if (base == -1 && PyErr_Occurred())
            goto done;
        base_ok = ovf == 0;
    }
    /* index.interval.bytes beyond a long: as the extreme (valid_bytes - last_index_entry is
     * never negative) */
    int64_t interval;
    {
        PyObject *iv = PyObject_GetAttrString(builder, "interval");
        if (iv == NULL)
            goto done;
        int ovf;
        interval = PyLong_AsLongLongAndOverflow(iv, &ovf);
        Py_DECREF(iv);
        if (interval == -1 && PyErr_Occurred())
            goto done;
        if (ovf)
            interval = ovf > 0 ? INT64_MAX : INT64_MIN;
    }
    int64_t valid_bytes, last_entry, max_ts, max_ts_offset, last_time_ts;
    int64_t valid_end, last_offset, first_offset, records = 0;
    int first_none, last_none;
    int overflowed = 0;
    if (attr_i64(builder, "valid_bytes", &valid_bytes, NULL) < 0
            || attr_i64(builder, "last_index_entry", &last_entry, NULL) < 0
            || attr_i64(builder, "max_ts", &max_ts, NULL) < 0
            || attr_i64(builder, "max_ts_offset", &max_ts_offset, NULL) < 0
            || attr_i64(builder, "last_time_ts", &last_time_ts, NULL) < 0
            || attr_i64(scan, "valid_end", &valid_end, NULL) < 0
            || attr_i64(scan, "last_offset", &last_offset, &last_none) < 0
            || attr_i64(scan, "first_offset", &first_offset, &first_none) < 0)
        goto done;
    {
        int e1 = attr_empty(builder, "offset_overflow"), e2 = attr_empty(builder, "time_overflow");
        if (e1 < 0 || e2 < 0)
            goto done;
        overflowed = !(e1 && e2);
    }

    int short_ = 1;
    Py_ssize_t taken = 0; /* batches kept */
    while (end - pos >= RUN_V2_OVERHEAD) {
        const unsigned char *b = buf + pos;
        int64_t total = (int64_t)be32_at(b + 8) + 12;
        if (b[16] != 2 || total < RUN_V2_OVERHEAD) {
            short_ = 0;
            break;
        }
        if (total > end - pos)
            break;
        int64_t base_offset = be64_at(b), last;
        int32_t ple = be32_at(b + 12);
        uint32_t stored = (uint32_t)be32_at(b + 17);
        int attrs = b[22];
        int64_t base_ts = be64_at(b + 27), batch_max_ts = be64_at(b + 35);
        int64_t pid = be64_at(b + 43);
        int32_t count = be32_at(b + 57);
        int64_t rel;
        short_ = 0;
        if (add_int64(base_offset, be32_at(b + 23), &last) < 0
                || (attrs & 0x27) /* a codec, or a control batch */
                || (!prev_none && (prev_above || (!prev_below && last <= prev)))
                || !base_ok || __builtin_sub_overflow(last, base, &rel)
                || rel < 0 || rel > RUN_MAX_RELATIVE
                || (ple >= 0 && ple > epoch_limit))
            break;
        /* the index entries it makes must fit their layouts */
        int64_t since, next_valid, next_end;
        int entry = __builtin_sub_overflow(valid_bytes, last_entry, &since)
                        ? valid_bytes > last_entry : since > interval;
        if (add_int64(valid_bytes, total, &next_valid) < 0
                || add_int64(at, (int64_t)pos + total, &next_end) < 0)
            break; /* beyond 64 bits: left to the general path */
        int64_t new_max_ts = max_ts, new_max_ts_offset = max_ts_offset, time_rel = 0;
        if (batch_max_ts > max_ts) {
            new_max_ts = batch_max_ts;
            new_max_ts_offset = last;
        }
        int time_entry = entry && new_max_ts > last_time_ts;
        if (entry && (overflowed || valid_bytes > INT32_MAX || valid_bytes < INT32_MIN))
            break;
        if (time_entry && (__builtin_sub_overflow(new_max_ts_offset, base, &time_rel)
                           || time_rel < INT32_MIN || time_rel > INT32_MAX))
            break;
        /* the CRC, by the function the Python path uses */
        PyObject *mv = PyMemoryView_FromMemory((char *)b + 21, (Py_ssize_t)total - 21,
                                               PyBUF_READ);
        if (mv == NULL) {
            failed = 1;
            break;
        }
        PyObject *crc = PyObject_CallOneArg(crc_func, mv);
        Py_DECREF(mv);
        if (crc == NULL) {
            failed = 1;
            break;
        }
        int crc_ok;
        if (PyLong_CheckExact(crc)) {
            int ovf;
            long long c = PyLong_AsLongLongAndOverflow(crc, &ovf);
            crc_ok = !ovf && c == (long long)stored;
        }
        else { /* compared as the Python compares it */
            PyObject *st = PyLong_FromUnsignedLong(stored);
            crc_ok = st == NULL ? -1 : PyObject_RichCompareBool(crc, st, Py_EQ);
            Py_XDECREF(st);
            if (crc_ok < 0) {
                Py_DECREF(crc);
                failed = 1;
                break;
            }
        }
        Py_DECREF(crc);
        if (!crc_ok)
            break;
        if (count != 0 && !records_ok(b, RUN_V2_OVERHEAD, (Py_ssize_t)total, count, base_offset,
                                      base_ts, attrs & 0x08, limit))
            break;
        /* kept */
        if (pid >= 0) {
            /* (at + pos + total fits: so does at + pos) */
            if (append_new(producers, PyLong_FromLongLong(at + (int64_t)pos)) < 0) {
                failed = 1;
                break;
            }
        }
        max_ts = new_max_ts;
        max_ts_offset = new_max_ts_offset;
        if (entry) {
            unsigned char e[12];
            put_be(e, (uint64_t)rel, 4);
            put_be(e + 4, (uint64_t)valid_bytes, 4);
            if (grow_put(&offsets, e, 8) < 0) {
                failed = 1;
                break;
            }
            if (time_entry) {
                put_be(e, (uint64_t)max_ts, 8);
                put_be(e + 8, (uint64_t)time_rel, 4);
                if (grow_put(&times, e, 12) < 0) {
                    failed = 1;
                    break;
                }
                last_time_ts = max_ts;
            }
            last_entry = valid_bytes;
        }
        valid_bytes = next_valid;
        valid_end = next_end;
        last_offset = last;
        last_none = 0;
        if (first_none) {
            first_offset = base_offset;
            first_none = 0;
        }
        records += count;
        prev = last;
        prev_none = prev_above = prev_below = 0;
        pos += (Py_ssize_t)total;
        taken++;
        short_ = 1;
    }
    if (failed)
        short_ = 0;

    /* written back, also after an error: the batches kept stay kept */
    PyObject *err_type = NULL, *err_value = NULL, *err_tb = NULL;
    if (failed)
        PyErr_Fetch(&err_type, &err_value, &err_tb);
    int wb = 0;
    if (taken > 0) {
        PyObject *old = PyObject_GetAttrString(scan, "records"), *sum = NULL, *n = NULL;
        if (old != NULL && (n = PyLong_FromLongLong(records)) != NULL)
            sum = PyNumber_Add(old, n);
        Py_XDECREF(old);
        Py_XDECREF(n);
        if (sum == NULL || PyObject_SetAttrString(scan, "records", sum) < 0)
            wb = -1;
        Py_XDECREF(sum);
        if (wb == 0
                && (extend_bytearray(builder, "offset_index", &offsets) < 0
                    || extend_bytearray(builder, "time_index", &times) < 0
                    || set_i64(builder, "valid_bytes", valid_bytes) < 0
                    || set_i64(builder, "last_index_entry", last_entry) < 0
                    || set_i64(builder, "max_ts", max_ts) < 0
                    || set_i64(builder, "max_ts_offset", max_ts_offset) < 0
                    || set_i64(builder, "last_time_ts", last_time_ts) < 0
                    || set_i64(scan, "valid_end", valid_end) < 0
                    || set_i64(scan, "last_offset", last_offset) < 0
                    || set_i64(scan, "first_offset", first_offset) < 0))
            wb = -1;
    }
    if (failed) {
        if (wb < 0) {
            Py_XDECREF(err_type);
            Py_XDECREF(err_value);
            Py_XDECREF(err_tb);
        }
        else
            PyErr_Restore(err_type, err_value, err_tb);
        goto done;
    }
    if (wb < 0)
        goto done;
    if (prev_none)
        result = Py_BuildValue("(nOO)", pos, Py_None, short_ ? Py_True : Py_False);
    else if (taken > 0)
        result = Py_BuildValue("(nLO)", pos, (long long)prev, short_ ? Py_True : Py_False);
    else
        result = Py_BuildValue("(nOO)", pos, prev_obj, short_ ? Py_True : Py_False);
done:
    PyMem_Free(offsets.data);
    PyMem_Free(times.data);
    Py_XDECREF(builder);
    Py_XDECREF(producers);
    PyBuffer_Release(&view);
    return result;
}

/* -- plain_record: `append --input-format jsonl`'s plain records -------------------------------
 *
 * plain_record(obj, now, record_type) -> record_type(key, value, timestamp), or None
 * mirrors log/append_input.py's _plain_from_object (tests/format/test_c_differential.py): a dict of
 * at most "key", "value" (str, UTF-8 encoded, or None) and "timestamp" (an int within 64 bits,
 * not a bool; None or absent: now) makes a record; anything else None. */

static int
plain_text(PyObject *v, PyObject **out)
{
    if (v == NULL || v == Py_None) {
        *out = Py_None;
        Py_INCREF(Py_None);
        return 1;
    }
    if (!PyUnicode_CheckExact(v))
        return 0;
    *out = PyUnicode_AsUTF8String(v);
    if (*out == NULL) {
        PyErr_Clear(); /* a lone surrogate: not plain */
        return 0;
    }
    return 1;
}

static PyObject *
plain_record(PyObject *self, PyObject *args)
{
    PyObject *obj, *now, *record_type;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &now, &record_type))
        return NULL;
    if (!PyDict_CheckExact(obj))
        Py_RETURN_NONE;
    PyObject *k, *v, *key = NULL, *value = NULL, *ts = NULL;
    Py_ssize_t i = 0;
    while (PyDict_Next(obj, &i, &k, &v)) {
        if (!PyUnicode_Check(k))
            Py_RETURN_NONE;
        if (PyUnicode_CompareWithASCIIString(k, "key") == 0)
            key = v;
        else if (PyUnicode_CompareWithASCIIString(k, "value") == 0)
            value = v;
        else if (PyUnicode_CompareWithASCIIString(k, "timestamp") == 0)
            ts = v;
        else
            Py_RETURN_NONE;
    }
    if (ts == NULL || ts == Py_None)
        ts = now;
    else {
        if (!PyLong_CheckExact(ts))
            Py_RETURN_NONE;
        int overflow;
        long long t = PyLong_AsLongLongAndOverflow(ts, &overflow);
        if (overflow || (t == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    PyObject *kb = NULL, *vb = NULL;
    if (!plain_text(key, &kb))
        Py_RETURN_NONE;
    if (!plain_text(value, &vb)) {
        Py_DECREF(kb);
        Py_RETURN_NONE;
    }
    /* record_type(kb, vb, ts), its fields set without a call of its Python __init__ (a
     * __slots__ class that only stores them, headers () by default) */
    PyObject *rec = NULL;
    if (!PyType_Check(record_type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a class");
        goto out;
    }
    PyTypeObject *tp = (PyTypeObject *)record_type;
    if (tp->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "record_type cannot be made");
        goto out;
    }
    Py_INCREF(ts); /* borrowed from obj, which code run by tp_new could change */
    rec = tp->tp_new(tp, empty_tuple, NULL);
    if (rec != NULL && (PyObject_SetAttr(rec, str_key, kb) < 0
                        || PyObject_SetAttr(rec, str_value, vb) < 0
                        || PyObject_SetAttr(rec, str_timestamp, ts) < 0
                        || PyObject_SetAttr(rec, str_headers, empty_tuple) < 0))
        Py_CLEAR(rec);
    Py_DECREF(ts);
out:
    Py_DECREF(kb);
    Py_DECREF(vb);
    return rec;
}


/* -- encode_jsonl: the records area of `kafkalog append --input-format jsonl` -----------------
 *
 * encode_jsonl(data, pos, end, now, base_ts, count, pending_bytes, max_ts, batch_records,
 *              batch_bytes, record_limit, plain)
 *   -> (area, pos, lines, taken, base_ts, pending_bytes, max_ts, full)
 * mirrors log/append_input.py's encode_jsonl to the byte (tests/format/test_c_differential.py):
 * the lines of data[pos:end] (ending at "\n"; the last may have none) that make plain records
 * (append_input._plain_record: an object of at most a string or null "key" and "value" and an
 * integer or null "timestamp") become v2 records of a batch being gathered, blank lines are
 * passed over, up to the first line that makes no plain record or whose record does not fit.
 *
 * The Python asks `plain(line, now)` (orjson) of every line. This reads the lines of the common
 * shape itself, with no object made: a JSON object whose members are "key", "value" (each a
 * string or null) and "timestamp" (an integer within 64 bits, or null), each at most once,
 * spelled without escapes in the names, strings with any escape JSON has and valid UTF-8 (what
 * orjson takes; the decoded text is what orjson's str encodes to). A member of another name
 * (spelled without escapes) makes the line no plain record whatever follows (an object keeps
 * every name; invalid JSON is none either). Any other line is given to `plain`, as the Python
 * gives every line, so the two agree wherever this reader decides. */

enum { JL_PLAIN, JL_NOT_PLAIN, JL_UNSURE };

typedef struct {
    const unsigned char *raw[2];  /* key, value: the bytes between the quotes; NULL: null */
    Py_ssize_t raw_len[2], len[2]; /* their length as written, and as decoded */
    int escaped[2];
    int has_ts;
    int64_t ts;
} jl_fields;

/* Does any of the 8 bytes of x need a look of its own in a string: a quote, a backslash, a
 * control character or a byte of a multi-byte UTF-8 sequence? (Bytes after the first such one
 * may be reported too; the caller then reads them one by one.) */
static inline uint64_t
jl_special8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x) & high;
}

static inline const unsigned char *
jl_ws(const unsigned char *p, const unsigned char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

/* The value of 4 hex digits at p (within e), or -1. */
static inline int
jl_hex4(const unsigned char *p, const unsigned char *e)
{
    if (e - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The length of the valid UTF-8 sequence at p (its lead byte >= 0x80), or 0 (overlong forms,
 * surrogates and code points past U+10FFFF are not UTF-8). */
static inline int
jl_utf8(const unsigned char *p, const unsigned char *e)
{
    unsigned c = p[0];
    Py_ssize_t left = e - p;
#define JL_CONT(i) (left > (i) && (p[i] & 0xC0) == 0x80)
    if (c >= 0xC2 && c <= 0xDF)
        return JL_CONT(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (!JL_CONT(1) || !JL_CONT(2))
            return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))
            return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!JL_CONT(1) || !JL_CONT(2) || !JL_CONT(3))
            return 0;
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
            return 0;
        return 4;
    }
#undef JL_CONT
    return 0;
}

/* The escape at p (a backslash, within e): the bytes it takes and, in *cp, the code point it
 * stands for; 0 when it is none JSON has (a lone surrogate included). */
static inline int
jl_escape(const unsigned char *p, const unsigned char *e, uint32_t *cp)
{
    if (e - p < 2)
        return 0;
    switch (p[1]) {
    case '"': *cp = '"'; return 2;
    case '\\': *cp = '\\'; return 2;
    case '/': *cp = '/'; return 2;
    case 'b': *cp = '\b'; return 2;
    case 'f': *cp = '\f'; return 2;
    case 'n': *cp = '\n'; return 2;
    case 'r': *cp = '\r'; return 2;
    case 't': *cp = '\t'; return 2;
    case 'u': {
        int hi = jl_hex4(p + 2, e);
        if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF))
            return 0;
        if (hi < 0xD800 || hi > 0xDBFF) {
            *cp = (uint32_t)hi;
            return 6;
        }
        if (e - p < 12 || p[6] != '\\' || p[7] != 'u')
            return 0;
        int lo = jl_hex4(p + 8, e);
        if (lo < 0xDC00 || lo > 0xDFFF)
            return 0;
        *cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
        return 12;
    }
    default:
        return 0;
    }
}

static inline int
jl_cp_size(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* The string whose text starts at p (after its opening quote): 1 with *close at its closing
 * quote, *len its length once decoded, *escaped set when it holds an escape; 0 when it is no
 * string orjson reads (or e cuts it). */
static int
jl_string(const unsigned char *p, const unsigned char *e, const unsigned char **close,
          Py_ssize_t *len, int *escaped)
{
    Py_ssize_t saved = 0; /* bytes the escapes take beyond what they stand for */
    const unsigned char *s = p;
    *escaped = 0;
    for (;;) {
        while (e - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            if (jl_special8(x))
                break;
            p += 8;
        }
        if (p >= e)
            return 0;
        unsigned c = *p;
        if (c == '"') {
            *close = p;
            *len = (p - s) - saved;
            return 1;
        }
        if (c == '\\') {
            uint32_t cp;
            int n = jl_escape(p, e, &cp);
            if (n == 0)
                return 0;
            saved += n - jl_cp_size(cp);
            *escaped = 1;
            p += n;
        }
        else if (c < 0x20)
            return 0;
        else if (c < 0x80)
            p++;
        else {
            int n = jl_utf8(p, e);
            if (n == 0)
                return 0;
            p += n;
        }
    }
}

/* The text of a string jl_string read (raw bytes, raw_len of them) written decoded at out. */
static unsigned char *
jl_unescape(unsigned char *out, const unsigned char *p, Py_ssize_t raw_len)
{
    const unsigned char *e = p + raw_len;
    while (p < e) {
        const unsigned char *b = memchr(p, '\\', (size_t)(e - p));
        if (b == NULL)
            b = e;
        memcpy(out, p, (size_t)(b - p));
        out += b - p;
        p = b;
        if (p == e)
            break;
        uint32_t cp = 0;
        p += jl_escape(p, e, &cp); /* valid: jl_string read it */
        if (cp < 0x80)
            *out++ = (unsigned char)cp;
        else if (cp < 0x800) {
            *out++ = (unsigned char)(0xC0 | (cp >> 6));
            *out++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            *out++ = (unsigned char)(0xE0 | (cp >> 12));
            *out++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else {
            *out++ = (unsigned char)(0xF0 | (cp >> 18));
            *out++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            *out++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *out++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    return out;
}

/* The line [p, e) read as a plain record into *f: JL_PLAIN, JL_NOT_PLAIN (certainly none), or
 * JL_UNSURE (for `plain` to say). */
static int
jl_parse(const unsigned char *p, const unsigned char *e, jl_fields *f)
{
    int seen = 0;
    f->raw[0] = f->raw[1] = NULL;
    f->has_ts = 0;
    p = jl_ws(p, e);
    if (p >= e || *p != '{')
        return JL_UNSURE;
    p = jl_ws(p + 1, e);
    if (p < e && *p == '}') {
        p++;
    }
    else {
        for (;;) {
            if (p >= e || *p != '"')
                return JL_UNSURE;
            const unsigned char *name = ++p;
            while (p < e && *p != '"' && *p != '\\')
                p++;
            if (p >= e || *p == '\\')
                return JL_UNSURE;
            Py_ssize_t name_len = p - name;
            int field;
            if (name_len == 3 && memcmp(name, "key", 3) == 0)
                field = 0;
            else if (name_len == 5 && memcmp(name, "value", 5) == 0)
                field = 1;
            else if (name_len == 9 && memcmp(name, "timestamp", 9) == 0)
                field = 2;
            else
                return JL_NOT_PLAIN;
            if (seen & (1 << field))
                return JL_UNSURE; /* the last one counts: left to orjson */
            seen |= 1 << field;
            p = jl_ws(p + 1, e);
            if (p >= e || *p != ':')
                return JL_UNSURE;
            p = jl_ws(p + 1, e);
            if (p >= e)
                return JL_UNSURE;
            if (*p == 'n') {
                if (e - p < 4 || memcmp(p, "null", 4) != 0)
                    return JL_UNSURE;
                p += 4;
            }
            else if (field < 2) {
                const unsigned char *close;
                if (*p != '"' || !jl_string(p + 1, e, &close, &f->len[field], &f->escaped[field]))
                    return JL_UNSURE;
                f->raw[field] = p + 1;
                f->raw_len[field] = close - (p + 1);
                p = close + 1;
            }
            else {
                /* an integer: -?(0|[1-9][0-9]*), within 64 bits (the grammar after it refuses
                 * a fraction, an exponent or a leading zero) */
                int neg = *p == '-';
                if (neg)
                    p++;
                if (p >= e || *p < '0' || *p > '9')
                    return JL_UNSURE;
                uint64_t m = 0, limit = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
                if (*p == '0')
                    p++;
                else {
                    while (p < e && *p >= '0' && *p <= '9') {
                        uint64_t d = (uint64_t)(*p - '0');
                        if (m > (limit - d) / 10)
                            return JL_UNSURE;
                        m = m * 10 + d;
                        p++;
                    }
                }
                f->has_ts = 1;
                f->ts = !neg ? (int64_t)m : m == ((uint64_t)1 << 63) ? INT64_MIN : -(int64_t)m;
            }
            p = jl_ws(p, e);
            if (p >= e)
                return JL_UNSURE;
            if (*p == ',') {
                p = jl_ws(p + 1, e);
                continue;
            }
            if (*p != '}')
                return JL_UNSURE;
            p++;
            break;
        }
    }
    return jl_ws(p, e) == e ? JL_PLAIN : JL_UNSURE;
}

/* Is [p, e) empty once bytes.strip() has taken its whitespace? */
static inline int
jl_blank(const unsigned char *p, const unsigned char *e)
{
    for (; p < e; p++)
        if (!(*p == ' ' || (*p >= '\t' && *p <= '\r')))
            return 0;
    return 1;
}

/* Room for n more bytes at *out in *area (a bytes object being filled, *used of it so far). */
static int
jl_reserve(PyObject **area, unsigned char **out, Py_ssize_t n)
{
    Py_ssize_t size = PyBytes_GET_SIZE(*area);
    Py_ssize_t used = *out - (unsigned char *)PyBytes_AS_STRING(*area);
    if (size - used >= n)
        return 0;
    Py_ssize_t want = size * 2 > used + n ? size * 2 : used + n;
    if (_PyBytes_Resize(area, want) < 0)
        return -1;
    *out = (unsigned char *)PyBytes_AS_STRING(*area) + used;
    return 0;
}

/* A field of a record: null as -1, else its length and text. */
static inline unsigned char *
jl_put_field(unsigned char *out, const unsigned char *raw, Py_ssize_t raw_len, Py_ssize_t len,
             int escaped)
{
    if (raw == NULL) {
        *out++ = 1;
        return out;
    }
    out = put_zigzag(out, len);
    if (escaped)
        return jl_unescape(out, raw, raw_len);
    memcpy(out, raw, (size_t)len);
    return out + len;
}

/* A field of the record `plain` made: bytes or None into *raw / *len (borrowed). */
static int
jl_object_field(PyObject *rec, PyObject *name, const unsigned char **raw, Py_ssize_t *len,
                PyObject **ref)
{
    PyObject *v = PyObject_GetAttr(rec, name);
    if (v == NULL)
        return -1;
    if (v == Py_None) {
        *raw = NULL;
        *len = 0;
        Py_DECREF(v);
        return 0;
    }
    if (!PyBytes_Check(v)) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_TypeError, "plain() must make a record of bytes or None");
        return -1;
    }
    *raw = (const unsigned char *)PyBytes_AS_STRING(v);
    *len = PyBytes_GET_SIZE(v);
    *ref = v;
    return 0;
}

static PyObject *
encode_jsonl(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end;
    long long now, base_ts, count, pending, max_ts, batch_records, batch_bytes, record_limit;
    PyObject *plain;
    if (!PyArg_ParseTuple(args, "y*nnLLLLLLLLO", &view, &pos, &end, &now, &base_ts, &count,
                          &pending, &max_ts, &batch_records, &batch_bytes, &record_limit, &plain))
        return NULL;
    if (pos < 0 || pos > end || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "positions outside the data");
        return NULL;
    }
    const unsigned char *buf = view.buf;
    /* room for the records of a batch, grown when they need more */
    Py_ssize_t room = end - pos + 64;
    if (pending >= 0 && pending < batch_bytes && batch_bytes - pending < end - pos)
        room = (Py_ssize_t)(batch_bytes - pending) + 4096;
    PyObject *area = PyBytes_FromStringAndSize(NULL, room);
    if (area == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(area);
    long long lines = 0, taken = 0;
    int full = 0;
    Py_ssize_t p = pos;
    while (p < end) {
        const unsigned char *line = buf + p;
        const unsigned char *nl = memchr(line, '\n', (size_t)(end - p));
        const unsigned char *line_end = nl != NULL ? nl : buf + end;
        Py_ssize_t next = nl != NULL ? (nl - buf) + 1 : end;
        if (jl_blank(line, line_end)) {
            lines++;
            p = next;
            continue;
        }
        jl_fields f;
        PyObject *refs[2] = {NULL, NULL};
        int r = jl_parse(line, line_end, &f);
        if (r == JL_UNSURE) {
            PyObject *rec = PyObject_CallFunction(plain, "y#L", (const char *)line,
                                                  (Py_ssize_t)(line_end - line), now);
            if (rec == NULL)
                goto fail;
            if (rec == Py_None) {
                r = JL_NOT_PLAIN;
            }
            else {
                PyObject *ts = NULL;
                int bad = jl_object_field(rec, str_key, &f.raw[0], &f.len[0], &refs[0]) < 0
                          || jl_object_field(rec, str_value, &f.raw[1], &f.len[1], &refs[1]) < 0
                          || (ts = PyObject_GetAttr(rec, str_timestamp)) == NULL;
                if (!bad) {
                    f.ts = PyLong_AsLongLong(ts);
                    bad = f.ts == -1 && PyErr_Occurred();
                }
                Py_XDECREF(ts);
                Py_DECREF(rec);
                if (bad) {
                    Py_XDECREF(refs[0]);
                    Py_XDECREF(refs[1]);
                    goto fail;
                }
                f.has_ts = 1;
                f.escaped[0] = f.escaped[1] = 0;
                f.raw_len[0] = f.len[0];
                f.raw_len[1] = f.len[1];
                r = JL_PLAIN;
            }
        }
        if (r == JL_NOT_PLAIN)
            break;
        int64_t ts = f.has_ts ? f.ts : (int64_t)now;
        int64_t klen = f.raw[0] != NULL ? f.len[0] : 0, vlen = f.raw[1] != NULL ? f.len[1] : 0;
        int64_t size = klen + vlen + 21, delta;
        int stop = 0;
        if (size > record_limit)
            stop = 1; /* for the caller's error */
        else if (count && pending + size > batch_bytes)
            stop = full = 1;
        else {
            if (!count)
                base_ts = max_ts = ts;
            if (__builtin_sub_overflow(ts, (int64_t)base_ts, &delta))
                stop = 1; /* for the Python's varint */
        }
        if (!stop) {
            Py_ssize_t body = 1 + zigzag_size(delta) + zigzag_size(count)
                              + (f.raw[0] != NULL ? zigzag_size(klen) + klen : 1)
                              + (f.raw[1] != NULL ? zigzag_size(vlen) + vlen : 1) + 1;
            if (jl_reserve(&area, &out, zigzag_size(body) + body) < 0) {
                Py_XDECREF(refs[0]);
                Py_XDECREF(refs[1]);
                goto fail;
            }
            out = put_zigzag(out, body);
            *out++ = 0;
            out = put_zigzag(out, delta);
            out = put_zigzag(out, count);
            out = jl_put_field(out, f.raw[0], f.raw_len[0], klen, f.escaped[0]);
            out = jl_put_field(out, f.raw[1], f.raw_len[1], vlen, f.escaped[1]);
            *out++ = 0;
        }
        Py_XDECREF(refs[0]);
        Py_XDECREF(refs[1]);
        if (stop)
            break;
        count++;
        taken++;
        lines++;
        pending += size;
        if (ts > max_ts)
            max_ts = ts;
        p = next;
        if (count >= batch_records || pending >= batch_bytes) {
            full = 1;
            break;
        }
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&area, out - (unsigned char *)PyBytes_AS_STRING(area)) < 0)
        return NULL;
    return Py_BuildValue("(NnLLLLLO)", area, p, lines, taken, base_ts, pending, max_ts,
                         full ? Py_True : Py_False);
fail:
    Py_XDECREF(area);
    PyBuffer_Release(&view);
    return NULL;
}


/* --- snappy compression: the C mirror of format/snappy.py (Google's snappy 1.1.10
 * CompressFragment, EmitLiteral, EmitCopy), byte for byte ------------------------------------ */

static uint32_t
snappy_load32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
        | ((uint32_t)p[3] << 24);
}

static unsigned char *
snappy_literal(unsigned char *op, const unsigned char *src, size_t len)
{
    size_t n = len - 1;
    if (n < 60) {
        *op++ = (unsigned char)(n << 2);
    } else {
        int count = 0;
        size_t m = n;
        while (m) { count++; m >>= 8; }
        *op++ = (unsigned char)((59 + count) << 2);
        for (int i = 0; i < count; i++)
            *op++ = (unsigned char)(n >> (8 * i));
    }
    memcpy(op, src, len);
    return op + len;
}

static unsigned char *
snappy_copy64(unsigned char *op, size_t offset, size_t len)
{
    if (len < 12 && offset < 2048) {
        *op++ = (unsigned char)(1 | ((len - 4) << 2) | ((offset >> 8) << 5));
        *op++ = (unsigned char)(offset & 0xff);
    } else {
        *op++ = (unsigned char)(2 | ((len - 1) << 2));
        *op++ = (unsigned char)(offset & 0xff);
        *op++ = (unsigned char)(offset >> 8);
    }
    return op;
}

static unsigned char *
snappy_copy(unsigned char *op, size_t offset, size_t len)
{
    if (len >= 12) {
        while (len >= 68) { op = snappy_copy64(op, offset, 64); len -= 64; }
        if (len > 64) { op = snappy_copy64(op, offset, 60); len -= 60; }
    }
    return snappy_copy64(op, offset, len);
}

static size_t
snappy_match(const unsigned char *d, size_t s1, size_t s2, size_t limit)
{
    size_t n = 0;
    while (s2 + n < limit && d[s1 + n] == d[s2 + n])
        n++;
    return n;
}

#define SNAPPY_SLOT(v, mask) ((((uint32_t)((v) * 0x1E35A7BDu) >> 17) & (mask)) >> 1)

static unsigned char *
snappy_fragment(unsigned char *op, const unsigned char *d, size_t n, uint16_t *table)
{
    size_t size = 256;
    if (n > (1u << 14)) size = 1u << 14;
    else if (n >= 256) { size = 1; while (size < n) size <<= 1; }
    memset(table, 0, size * sizeof(uint16_t));
    uint32_t mask = (uint32_t)(2 * (size - 1));
    size_t ip = 0;
    if (n >= 15) {
        size_t limit = n - 15;
        for (;;) {
            size_t next_emit = ip++;
            uint32_t skip = 32;
            long candidate = -1;
            if (limit - ip >= 16 && limit >= ip) {
                int i;
                for (i = 0; i < 16; i++) {
                    uint32_t dword = snappy_load32(d + ip + i);
                    uint32_t e = SNAPPY_SLOT(dword, mask);
                    size_t c = table[e];
                    table[e] = (uint16_t)(ip + i);
                    if (snappy_load32(d + c) == dword) {
                        candidate = (long)c;
                        op = snappy_literal(op, d + next_emit, ip + i - next_emit);
                        ip += i;
                        break;
                    }
                }
                if (i == 16) { ip += 16; skip += 16; }
            }
            if (candidate < 0) {
                for (;;) {
                    uint32_t dword = snappy_load32(d + ip);
                    uint32_t e = SNAPPY_SLOT(dword, mask);
                    uint32_t step = skip >> 5;
                    skip += step;
                    size_t next_ip = ip + step;
                    if (next_ip > limit) {
                        if (next_emit < n)
                            op = snappy_literal(op, d + next_emit, n - next_emit);
                        return op;
                    }
                    size_t c = table[e];
                    table[e] = (uint16_t)ip;
                    if (dword == snappy_load32(d + c)) { candidate = (long)c; break; }
                    ip = next_ip;
                }
                op = snappy_literal(op, d + next_emit, ip - next_emit);
            }
            for (;;) {
                size_t matched = 4 + snappy_match(d, (size_t)candidate + 4, ip + 4, n);
                op = snappy_copy(op, ip - (size_t)candidate, matched);
                ip += matched;
                if (ip >= limit) {
                    if (ip < n)
                        op = snappy_literal(op, d + ip, n - ip);
                    return op;
                }
                table[SNAPPY_SLOT(snappy_load32(d + ip - 1), mask)] = (uint16_t)(ip - 1);
                uint32_t dword = snappy_load32(d + ip);
                uint32_t e = SNAPPY_SLOT(dword, mask);
                candidate = table[e];
                table[e] = (uint16_t)ip;
                if (dword != snappy_load32(d + candidate))
                    break;
            }
        }
    }
    if (ip < n)
        op = snappy_literal(op, d + ip, n - ip);
    return op;
}

static PyObject *
snappy_compress_raw(PyObject *self, PyObject *args)
{
    Py_buffer in;
    if (!PyArg_ParseTuple(args, "y*", &in))
        return NULL;
    size_t n = (size_t)in.len;
    /* MaxCompressedLength: 32 + n + n / 6, plus the length varint */
    size_t cap = 32 + n + n / 6 + 10;
    unsigned char *out = PyMem_Malloc(cap);
    uint16_t *table = PyMem_Malloc((1u << 14) * sizeof(uint16_t));
    if (out == NULL || table == NULL) {
        PyMem_Free(out);
        PyMem_Free(table);
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    unsigned char *op = out;
    size_t v = n;
    while (v >= 0x80) { *op++ = (unsigned char)(v | 0x80); v >>= 7; }
    *op++ = (unsigned char)v;
    const unsigned char *d = in.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t start = 0; start < n; start += 65536) {
        size_t len = n - start < 65536 ? n - start : 65536;
        op = snappy_fragment(op, d + start, len, table);
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyBytes_FromStringAndSize((const char *)out, op - out);
    PyMem_Free(out);
    PyMem_Free(table);
    PyBuffer_Release(&in);
    return result;
}


/* --- OffsetMap: the C mirror of log/offset_map.py OffsetMap ---------------------------------
 * The log cleaner's offset map (SkimpyOffsetMap): 16-byte MD5 digests of keys to offsets, 24
 * bytes a slot, open addressing (linear probing on the digest's first 8 bytes). The table
 * starts small and doubles while it is under three quarters full, up to max_slots, so that it
 * never holds more memory than the broker's dedupe buffer. */

typedef struct {
    PyObject_HEAD
    unsigned char *slots;   /* cap * 24 bytes: digest, then offset + 1 (0: empty) */
    Py_ssize_t cap;
    Py_ssize_t max_slots;
    Py_ssize_t size;
} OffsetMapObject;

static uint64_t
om_read64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void
om_write64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

/* the slot holding ``digest``, or the empty slot where it would go */
static unsigned char *
om_find(unsigned char *slots, Py_ssize_t cap, const unsigned char *digest)
{
    Py_ssize_t i = (Py_ssize_t)(om_read64(digest) % (uint64_t)cap);
    for (;;) {
        unsigned char *slot = slots + i * 24;
        if (om_read64(slot + 16) == 0 || memcmp(slot, digest, 16) == 0)
            return slot;
        if (++i == cap)
            i = 0;
    }
}

static int
om_grow(OffsetMapObject *self)
{
    Py_ssize_t cap = self->cap * 2 < self->max_slots ? self->cap * 2 : self->max_slots;
    unsigned char *slots = PyMem_Calloc((size_t)cap, 24);
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->cap; i++) {
        unsigned char *old = self->slots + i * 24;
        if (om_read64(old + 16) != 0)
            memcpy(om_find(slots, cap, old), old, 24);
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->cap = cap;
    return 0;
}

static int
OffsetMap_init(OffsetMapObject *self, PyObject *args, PyObject *kwds)
{
    Py_ssize_t max_slots;
    if (!PyArg_ParseTuple(args, "n", &max_slots))
        return -1;
    if (max_slots < 1) {
        PyErr_SetString(PyExc_ValueError, "an offset map needs a slot");
        return -1;
    }
    PyMem_Free(self->slots);
    self->max_slots = max_slots;
    self->cap = max_slots < 1024 ? max_slots : 1024;
    self->size = 0;
    self->slots = PyMem_Calloc((size_t)self->cap, 24);
    if (self->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
OffsetMap_dealloc(OffsetMapObject *self)
{
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
om_digest(PyObject *arg, Py_buffer *view)
{
    if (PyObject_GetBuffer(arg, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len != 16) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "an offset map key is a 16-byte digest");
        return -1;
    }
    return 0;
}

static PyObject *
OffsetMap_put(OffsetMapObject *self, PyObject *args)
{
    PyObject *key;
    long long offset;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OL", &key, &offset))
        return NULL;
    if (offset < 0) {
        PyErr_SetString(PyExc_ValueError, "an offset map holds offsets >= 0");
        return NULL;
    }
    if (om_digest(key, &view) < 0)
        return NULL;
    unsigned char *slot = om_find(self->slots, self->cap, view.buf);
    if (om_read64(slot + 16) == 0) {
        if (self->size + 1 >= self->max_slots) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_OverflowError, "the offset map is full");
            return NULL;
        }
        if (self->cap < self->max_slots && (self->size + 1) * 4 > self->cap * 3) {
            if (om_grow(self) < 0) {
                PyBuffer_Release(&view);
                return NULL;
            }
            slot = om_find(self->slots, self->cap, view.buf);
        }
        memcpy(slot, view.buf, 16);
        self->size++;
    }
    om_write64(slot + 16, (uint64_t)offset + 1);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *
OffsetMap_get(OffsetMapObject *self, PyObject *key)
{
    Py_buffer view;
    if (om_digest(key, &view) < 0)
        return NULL;
    unsigned char *slot = om_find(self->slots, self->cap, view.buf);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)om_read64(slot + 16) - 1);
}

static Py_ssize_t
OffsetMap_len(OffsetMapObject *self)
{
    return self->size;
}

static PyMethodDef OffsetMap_methods[] = {
    {"put", (PyCFunction)OffsetMap_put, METH_VARARGS, "Map a key's digest to an offset."},
    {"get", (PyCFunction)OffsetMap_get, METH_O, "The offset of a key's digest, -1 if none."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods OffsetMap_as_sequence = {
    .sq_length = (lenfunc)OffsetMap_len,
};

static PyTypeObject OffsetMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_speedups.OffsetMap",
    .tp_basicsize = sizeof(OffsetMapObject),
    .tp_dealloc = (destructor)OffsetMap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The log cleaner's offset map (log/offset_map.py OffsetMap).",
    .tp_methods = OffsetMap_methods,
    .tp_as_sequence = &OffsetMap_as_sequence,
    .tp_init = (initproc)OffsetMap_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"snappy_compress_raw", snappy_compress_raw, METH_VARARGS, "Snappy raw compression as C++ snappy 1.1.10 writes it (format/snappy.py compress_raw)."},
    {"decode_v2", decode_v2, METH_VARARGS, "Decode v2 records into a Records object's lists; return the position after them."},
    {"encode_lines", encode_lines, METH_VARARGS, "The v2 records area of lines of input (format/encode.py encode_lines)."},
    {"encode_records", encode_records, METH_VARARGS, "The v2 records area of encode.Record objects (format/encode.py encode_v2_records), or None."},
    {"v2_records_ok", v2_records_ok, METH_VARARGS, "Do the uncompressed records of a v2 batch decode without an error (format/scan.py v2_records_ok)?"},
    {"recover_run", recover_run, METH_VARARGS, "LogSegment.recover's batch loop, its common case (log/recovery_scan.py recover_run_python)."},
    {"plain_record", plain_record, METH_VARARGS, "A plain record of a JSON line's object, or None (log/append_input.py _plain_from_object)."},
    {"encode_jsonl", encode_jsonl, METH_VARARGS, "The v2 records area of plain JSON lines of input (log/append_input.py encode_jsonl)."},
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
    if ((str_key = PyUnicode_InternFromString("key")) == NULL
            || (str_value = PyUnicode_InternFromString("value")) == NULL
            || (str_timestamp = PyUnicode_InternFromString("timestamp")) == NULL
            || (str_headers = PyUnicode_InternFromString("headers")) == NULL)
        return NULL;
    if (PyType_Ready(&OffsetMapType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&OffsetMapType);
    if (PyModule_AddObject(m, "OffsetMap", (PyObject *)&OffsetMapType) < 0) {
        Py_DECREF(&OffsetMapType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
