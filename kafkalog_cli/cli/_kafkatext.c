/*
 * Optional C fast path for the `--format kafka` text of `kafkalog dump` (cli/render.py).
 *
 * batch_lines(buf, pos, end, max_bytes, crc32c[, base[, prev_last]]) -> (bytes, new_pos[, last])
 *     The v2 batch lines of consecutive entries from pos: stops before the first entry that is
 *     not a complete v2 batch with a correct CRC (render.py's Python path takes that one), at
 *     end, or once max_bytes of the log are consumed. buf holds the file's bytes from file
 *     position base on (positions printed are base + the position in buf). Given prev_last (the
 *     highest last offset before pos, or None), it also stops before a batch whose last offset
 *     is not above it (offsets going back: invalid data, which the Python path reports), and
 *     returns the highest last offset printed (or prev_last) as a third item.
 * record_lines(offsets, timestamps, keys, values, headers, base_offset, base_sequence,
 *              timestamp_label, print_data[, payloads]) -> bytes
 *     The `| offset: ...` lines of a v2 data batch, keys and payloads as UTF-8 text (malformed
 *     bytes replaced by U+FFFD, as Java's String does). Given payloads (a list of UTF-8 bytes or
 *     None, one per record: what a parser such as --cluster-metadata-decoder prints), each line
 *     ends with ` payload: ` and that text instead (nothing for None), and no key.
 * deep_lines(buf, pos, end, max_bytes, crc32c, base, prev_last, reach_last, last_record, limit,
 *            print_data, inflate, errors, max_out, max_records)
 *         -> (bytes, new_pos, prev_last, last_record)
 *     The batch line and `| offset: ...` record lines (keys and payloads as text with
 *     print_data) of consecutive plain v2 data batches from pos, as the Python path prints them
 *     for `dump --deep-iteration`: it stops before the first entry that is not a complete v2
 *     batch with a correct CRC, a known codec, records (count above 0, at most max_records: a
 *     larger batch is left to the Python path, which holds a chunk at a time) and no control flag,
 *     whose last offset is above prev_last and at most reach_last (the segment's reach), whose
 *     records all decode as records.py's decoder reads them (each at most limit bytes) and
 *     whose record offsets follow last_record (None: the first may be any) one by one; the
 *     Python path takes that entry and says what is wrong with it, or notes the gap. A
 *     compressed batch's records are inflate(codec, view)'s bytes (inflate None: it stops
 *     there); when inflate raises one of errors, the run stops before the batch (the Python
 *     path raises it again and reports it). Also stops once max_out bytes of text are made.
 *     Returns the text, where it stopped, the highest last offset and the last record offset
 *     printed (or those given).
 *
 * The text is exactly what render.KafkaWriter's Python code produces; tests run both
 * (tests/format/test_c_differential.py in-process, the dump tests through the CLI). No signed sum is
 * evaluated that could overflow: a batch whose last offset does not fit a 64-bit long is left to
 * the Python path (the scan reports it as invalid bytes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} out_t;

static int
out_reserve(out_t *o, Py_ssize_t extra)
{
    if (o->len + extra <= o->cap)
        return 0;
    if (extra > PY_SSIZE_T_MAX / 2 - o->len) { /* doubling below must not overflow */
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + extra)
        cap *= 2;
    char *p = PyMem_Realloc(o->data, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = p;
    o->cap = cap;
    return 0;
}

static inline int
out_put(out_t *o, const char *s, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->data + o->len, s, n);
    o->len += n;
    return 0;
}

static inline int
out_str(out_t *o, const char *s)
{
    return out_put(o, s, (Py_ssize_t)strlen(s));
}

static inline int
out_int(out_t *o, long long v)
{
    char tmp[24];
    char *p = tmp + sizeof(tmp);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return out_put(o, p, tmp + sizeof(tmp) - p);
}

#ifdef __SIZEOF_INT128__
/* The sequence of a record at any int64 offset, as Python's arbitrary-precision integers give
 * it: base_seq + (off - base_offset), less 2^31 past Integer.MAX_VALUE (|sum| < 2^65). */
static int
out_sequence(out_t *o, long long base_seq, long long off, long long base_offset)
{
    if (base_seq == -1)
        return out_int(o, -1);
    __int128 s = (__int128)base_seq + ((__int128)off - (__int128)base_offset);
    if (s > 0x7FFFFFFF)
        s -= 0x80000000LL;
    if (s >= INT64_MIN && s <= INT64_MAX)
        return out_int(o, (long long)s);
    char tmp[48];
    char *p = tmp + sizeof(tmp);
    unsigned __int128 u = s < 0 ? (unsigned __int128)0 - (unsigned __int128)s : (unsigned __int128)s;
    do {
        *--p = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (s < 0)
        *--p = '-';
    return out_put(o, p, tmp + sizeof(tmp) - p);
}
#else
static int
out_sequence(out_t *o, long long base_seq, long long off, long long base_offset)
{
    if (base_seq == -1)
        return out_int(o, -1);
    /* without 128-bit integers: the decoder's offsets are base + an int32 delta */
    if ((base_offset < 0 && off > LLONG_MAX + base_offset)
        || (base_offset > 0 && off < LLONG_MIN + base_offset)
        || off - base_offset > INT32_MAX || off - base_offset < INT32_MIN
        || base_seq > INT32_MAX || base_seq < INT32_MIN) {
        PyErr_SetString(PyExc_ValueError, "record offset too far from its batch's base offset");
        return -1;
    }
    long long s = base_seq + (off - base_offset);
    return out_int(o, s > 0x7FFFFFFFLL ? s - 0x80000000LL : s);
}
#endif

static PyObject *
out_finish(out_t *o)
{
    PyObject *b = PyBytes_FromStringAndSize(o->data ? o->data : "", o->len);
    PyMem_Free(o->data);
    return b;
}

static inline int64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static const char *CODECS[8] = {"none", "gzip", "snappy", "lz4", "zstd", NULL, NULL, NULL};

static inline const char *
tf(int b)
{
    return b ? "true" : "false";
}

/* A record's sequence for a batch's int32 base sequence and an int32 offset delta (the sum
 * fits a long long): -1 without one, else continuing at 0 past Integer.MAX_VALUE. */
static inline long long
record_sequence(long long base_seq, long long delta)
{
    if (base_seq == -1)
        return -1;
    long long s = base_seq + delta;
    return s > 0x7FFFFFFFLL ? s - 0x80000000LL : s;
}

/* The last offset of a v2 batch, or -1 when base + lastOffsetDelta leaves the int64 range. */
static inline int
last_offset(int64_t base, int32_t delta, int64_t *out)
{
    if ((delta > 0 && base > INT64_MAX - delta) || (delta < 0 && base < INT64_MIN - delta))
        return -1;
    *out = base + delta;
    return 0;
}

/* The kafka-dump-log line of the complete v2 batch at b (position pos, total bytes). */
/* The CRC-32C of the v2 batch of ``total`` bytes at ``b`` (from its attributes on), by the
   crc32c function given (the one the Python path uses): 0, or -1 with an exception set. */
static int
batch_crc(PyObject *crc_func, const unsigned char *b, Py_ssize_t total, unsigned long *out)
{
    PyObject *mv = PyMemoryView_FromMemory((char *)b + 21, total - 21, PyBUF_READ);
    if (mv == NULL)
        return -1;
    PyObject *crc = PyObject_CallOneArg(crc_func, mv);
    Py_DECREF(mv);
    if (crc == NULL)
        return -1;
    *out = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (*out == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return 0;
}

static int
put_batch_line(out_t *o, const unsigned char *b, Py_ssize_t pos, Py_ssize_t total, int valid)
{
    int64_t base_offset = be64(b);
    int32_t ple = be32(b + 12);
    uint32_t stored = (uint32_t)be32(b + 17);
    int attrs = b[22];
    int32_t last_delta = be32(b + 23);
    int64_t base_ts = be64(b + 27), max_ts = be64(b + 35), pid = be64(b + 43);
    int16_t epoch = be16(b + 51);
    int32_t base_seq = be32(b + 53), count = be32(b + 57);
    const char *codec = CODECS[attrs & 7];
    int64_t last;
    if (codec == NULL) {
        PyErr_SetString(PyExc_ValueError, "unknown compression type");
        return -1;
    }
    if (last_offset(base_offset, last_delta, &last) < 0) {
        PyErr_SetString(PyExc_ValueError, "last offset overflows a 64-bit long");
        return -1;
    }
    if (out_str(o, "baseOffset: ") || out_int(o, base_offset)
        || out_str(o, " lastOffset: ") || out_int(o, last)
        || out_str(o, " count: ") || out_int(o, count)
        || out_str(o, " baseSequence: ") || out_int(o, base_seq)
        || out_str(o, " lastSequence: ") || out_int(o, record_sequence(base_seq, last_delta))
        || out_str(o, " producerId: ") || out_int(o, pid)
        || out_str(o, " producerEpoch: ") || out_int(o, epoch)
        || out_str(o, " partitionLeaderEpoch: ") || out_int(o, ple)
        || out_str(o, " isTransactional: ") || out_str(o, tf(attrs & 0x10))
        || out_str(o, " isControl: ") || out_str(o, tf(attrs & 0x20))
        || out_str(o, " deleteHorizonMs: "))
        return -1;
    if (attrs & 0x40) {
        if (out_str(o, "OptionalLong[") || out_int(o, base_ts) || out_str(o, "]"))
            return -1;
    } else if (out_str(o, "OptionalLong.empty"))
        return -1;
    if (out_str(o, " position: ") || out_int(o, pos)
        || out_str(o, (attrs & 0x08) ? " LogAppendTime: " : " CreateTime: ")
        || out_int(o, max_ts)
        || out_str(o, " size: ") || out_int(o, total)
        || out_str(o, " magic: 2 compresscodec: ") || out_str(o, codec)
        || out_str(o, " crc: ") || out_int(o, stored)
        || out_str(o, valid ? " isvalid: true\n" : " isvalid: false\n"))
        return -1;
    return 0;
}

static PyObject *
batch_lines(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, max_bytes, base = 0;
    PyObject *crc_func, *prev_obj = NULL;
    out_t o = {NULL, 0, 0};
    int has_prev = 0;
    long long prev_last = 0;

    if (!PyArg_ParseTuple(args, "y*nnnO|nO", &view, &pos, &end, &max_bytes, &crc_func, &base,
                          &prev_obj))
        return NULL;
    if (prev_obj != NULL && prev_obj != Py_None) {
        prev_last = PyLong_AsLongLong(prev_obj);
        if (prev_last == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
        has_prev = 1;
    }
    const unsigned char *buf = view.buf;
    if (pos < 0 || max_bytes < 0 || base < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "negative position, size or base");
        return NULL;
    }
    if (end > view.len)
        end = view.len;
    /* pos + max_bytes without overflow */
    Py_ssize_t stop = max_bytes > PY_SSIZE_T_MAX - pos ? PY_SSIZE_T_MAX : pos + max_bytes;
    while (pos < stop && end - pos >= 18) {
        const unsigned char *b = buf + pos;
        int32_t size = be32(b + 8);
        signed char magic = (signed char)b[16];
        if (magic != 2 || size < 49 || (Py_ssize_t)size > end - pos - 12)
            break;
        Py_ssize_t total = (Py_ssize_t)size + 12;
        uint32_t stored = (uint32_t)be32(b + 17);
        unsigned long computed;
        if (batch_crc(crc_func, b, total, &computed) < 0)
            goto fail;
        int64_t last;
        if (computed != stored || CODECS[b[22] & 7] == NULL
            || last_offset(be64(b), be32(b + 23), &last) < 0 || base > PY_SSIZE_T_MAX - pos
            || (has_prev && last <= prev_last))
            break;
        if (put_batch_line(&o, b, base + pos, total, 1) < 0)
            goto fail;
        if (prev_obj != NULL) {  /* offsets are compared only when the caller asks */
            prev_last = last;
            has_prev = 1;
        }
        pos += total;
    }
    PyBuffer_Release(&view);
    PyObject *bytes = out_finish(&o);
    if (bytes == NULL)
        return NULL;
    if (prev_obj == NULL)
        return Py_BuildValue("(Nn)", bytes, pos);
    if (!has_prev)
        return Py_BuildValue("(NnO)", bytes, pos, Py_None);
    return Py_BuildValue("(NnL)", bytes, pos, prev_last);
fail:
    PyBuffer_Release(&view);
    PyMem_Free(o.data);
    return NULL;
}

static PyObject *
batch_line(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int valid;
    out_t o = {NULL, 0, 0};

    if (!PyArg_ParseTuple(args, "y*np", &view, &pos, &valid))
        return NULL;
    if (pos < 0 || pos > view.len || view.len - pos < 61
        || be32((const unsigned char *)view.buf + pos + 8) < 49
        || (Py_ssize_t)be32((const unsigned char *)view.buf + pos + 8) > view.len - pos - 12) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "no complete v2 batch at this position");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)view.buf + pos;
    int r = put_batch_line(&o, b, pos, (Py_ssize_t)be32(b + 8) + 12, valid);
    PyBuffer_Release(&view);
    if (r < 0) {
        PyMem_Free(o.data);
        return NULL;
    }
    return out_finish(&o);
}

/* Append bytes as UTF-8 text: ASCII and valid UTF-8 as they are, malformed input as Java's
 * String decodes it (U+FFFD for each malformed part, through format/utf8.py's error handler). */
static int
out_text_raw(out_t *o, const unsigned char *s, Py_ssize_t n)
{
    /* copied as it is checked (one pass); kept when it is ASCII */
    if (out_reserve(o, n) < 0)
        return -1;
    char *dst = o->data + o->len;
    uint64_t word, seen = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, s + i, 8);
        memcpy(dst + i, &word, 8);
        seen |= word;
    }
    for (; i < n; i++) {
        dst[i] = (char)s[i];
        seen |= s[i];
    }
    if (!(seen & 0x8080808080808080ULL)) {
        o->len += n;
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "kafkalog-java-utf8");
    if (text == NULL)
        return -1;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    int r = utf8 == NULL ? -1 : out_put(o, utf8, len);
    Py_DECREF(text);
    return r;
}

static int
out_text(out_t *o, PyObject *bytes)
{
    return out_text_raw(o, (const unsigned char *)PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

static PyObject *
record_lines(PyObject *self, PyObject *args)
{
    PyObject *offsets, *timestamps, *keys, *values, *headers;
    long long base_offset, base_seq;
    const char *label;
    Py_ssize_t label_len;
    int print_data;
    PyObject *payloads = Py_None;
    out_t o = {NULL, 0, 0};

    if (!PyArg_ParseTuple(args, "O!O!O!O!O!LLs#p|O", &PyList_Type, &offsets, &PyList_Type,
                          &timestamps, &PyList_Type, &keys, &PyList_Type, &values, &PyList_Type,
                          &headers, &base_offset, &base_seq, &label, &label_len, &print_data,
                          &payloads))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    if (payloads != Py_None && (!PyList_Check(payloads) || PyList_GET_SIZE(payloads) != n)) {
        PyErr_SetString(PyExc_ValueError, "payloads must be None or a list, one per record");
        return NULL;
    }
    if (PyList_GET_SIZE(timestamps) != n || PyList_GET_SIZE(keys) != n
        || PyList_GET_SIZE(values) != n || PyList_GET_SIZE(headers) != n) {
        PyErr_SetString(PyExc_ValueError, "record lists differ in length");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long off = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        long long ts = PyLong_AsLongLong(PyList_GET_ITEM(timestamps, i));
        if (PyErr_Occurred())
            goto fail;
        PyObject *k = PyList_GET_ITEM(keys, i), *v = PyList_GET_ITEM(values, i);
        PyObject *h = PyList_GET_ITEM(headers, i);
        if ((k != Py_None && !PyBytes_Check(k)) || (v != Py_None && !PyBytes_Check(v))
            || !PyTuple_Check(h)) {
            PyErr_SetString(PyExc_TypeError, "keys/values must be bytes or None, headers tuples");
            goto fail;
        }
        if (out_str(&o, "| offset: ") || out_int(&o, off) || out_put(&o, " ", 1)
            || out_put(&o, label, label_len) || out_str(&o, ": ") || out_int(&o, ts)
            || out_str(&o, " keySize: ") || out_int(&o, k == Py_None ? -1 : PyBytes_GET_SIZE(k))
            || out_str(&o, " valueSize: ") || out_int(&o, v == Py_None ? -1 : PyBytes_GET_SIZE(v))
            || out_str(&o, " sequence: ") || out_sequence(&o, base_seq, off, base_offset)
            || out_str(&o, " headerKeys: ["))
            goto fail;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(h); j++) {
            PyObject *pair = PyTuple_GET_ITEM(h, j);
            Py_ssize_t klen;
            const char *key;
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2
                || (key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen)) == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "headers must be (str, bytes) pairs");
                goto fail;
            }
            if ((j && out_put(&o, ",", 1)) || out_put(&o, key, klen))
                goto fail;
        }
        if (out_put(&o, "]", 1))
            goto fail;
        if (payloads != Py_None) {
            PyObject *p = PyList_GET_ITEM(payloads, i);
            if (p != Py_None && !PyBytes_Check(p)) {
                PyErr_SetString(PyExc_TypeError, "payloads must be bytes or None");
                goto fail;
            }
            if (p != Py_None && (out_str(&o, " payload: ")
                                 || out_put(&o, PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p))))
                goto fail;
        } else if (print_data) {
            if (k != Py_None && (out_str(&o, " key: ") || out_text(&o, k)))
                goto fail;
            if (v != Py_None && (out_str(&o, " payload: ") || out_text(&o, v)))
                goto fail;
        }
        if (out_put(&o, "\n", 1))
            goto fail;
    }
    return out_finish(&o);
fail:
    PyMem_Free(o.data);
    return NULL;
}

/* a + b, or -1 when it does not fit an int64_t (no signed overflow is ever evaluated). */
static inline int
add_int64_checked(int64_t a, int64_t b, int64_t *out)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return -1;
    *out = a + b;
    return 0;
}
/* Zigzag varint of at most max_bytes bytes within d[*pos:end] (records._varint's rule: excess
 * high bits of the last group dropped); 0, or -1 where records._varint raises. */
static inline int
varint_at(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return -1;
        unsigned char b = d[p++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            if (max_bytes == 5)
                raw &= 0xFFFFFFFFULL;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* The `| offset: ...` lines of the count records filling d[0:end] exactly, as records'
 * decoder reads them and KafkaWriter._v2_lines prints them. Returns 1 when every record
 * decodes (and, with *has_last, each offset follows the one before it: the writer's
 * consecutive-offset tracking has nothing to note), 0 where the Python path must take the batch
 * instead (it then reports what is wrong), -1 on an error of our own (memory). */
static int
put_records(out_t *o, const unsigned char *d, Py_ssize_t end, int64_t count, int64_t base_offset,
            int64_t base_ts, int have_append, int64_t append_ts, int32_t base_seq,
            long long limit, const char *label, int print_data, int *has_last,
            long long *last_record)
{
    Py_ssize_t pos = 0;
    int64_t expect = *last_record;
    int has = *has_last;
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, n, offset, timestamp;
        if (pos >= end || varint_at(d, &pos, end, 5, &length) < 0 || length < 0
            || length > end - pos || length > limit)
            return 0;
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        if (varint_at(d, &pos, end, 10, &ts_delta) < 0)
            return 0;
        if (have_append)
            timestamp = append_ts;
        else if (add_int64_checked(base_ts, ts_delta, &timestamp) < 0)
            return 0;
        if (varint_at(d, &pos, end, 5, &off_delta) < 0
            || add_int64_checked(base_offset, off_delta, &offset) < 0)
            return 0;
        if (has && (expect == INT64_MAX || offset != expect + 1))
            return 0;
        Py_ssize_t kv_at[2], kv_len[2];
        for (int kv = 0; kv < 2; kv++) {
            if (varint_at(d, &pos, end, 5, &n) < 0)
                return 0;
            if (n < 0) {
                kv_at[kv] = 0;
                kv_len[kv] = -1;
            } else {
                if (n > end - pos)
                    return 0;
                kv_at[kv] = pos;
                kv_len[kv] = (Py_ssize_t)n;
                pos += (Py_ssize_t)n;
            }
        }
        if (out_str(o, "| offset: ") || out_int(o, offset) || out_put(o, " ", 1)
            || out_str(o, label) || out_str(o, ": ") || out_int(o, timestamp)
            || out_str(o, " keySize: ") || out_int(o, kv_len[0])
            || out_str(o, " valueSize: ") || out_int(o, kv_len[1])
            || out_str(o, " sequence: ") || out_int(o, record_sequence(base_seq, off_delta))
            || out_str(o, " headerKeys: ["))
            return -1;
        if (pos >= end)
            return 0;
        if (d[pos] == 0)
            pos += 1;
        else {
            int64_t hn, klen, vlen;
            if (varint_at(d, &pos, end, 5, &hn) < 0 || hn < 0 || hn > end - pos)
                return 0;
            for (int64_t j = 0; j < hn; j++) {
                if (varint_at(d, &pos, end, 5, &klen) < 0 || klen < 0 || klen > end - pos)
                    return 0;
                if ((j && out_put(o, ",", 1)) || out_text_raw(o, d + pos, (Py_ssize_t)klen))
                    return -1;
                pos += (Py_ssize_t)klen;
                if (varint_at(d, &pos, end, 5, &vlen) < 0)
                    return 0;
                if (vlen >= 0) {
                    if (vlen > end - pos)
                        return 0;
                    pos += (Py_ssize_t)vlen;
                }
            }
        }
        if (pos != rec_end)
            return 0;
        if (out_put(o, "]", 1))
            return -1;
        if (print_data) {
            if (kv_len[0] >= 0 && (out_str(o, " key: ") || out_text_raw(o, d + kv_at[0], kv_len[0])))
                return -1;
            if (kv_len[1] >= 0
                && (out_str(o, " payload: ") || out_text_raw(o, d + kv_at[1], kv_len[1])))
                return -1;
        }
        if (out_put(o, "\n", 1))
            return -1;
        expect = offset;
        has = 1;
    }
    if (pos != end)
        return 0;
    *last_record = expect;
    *has_last = has;
    return 1;
}

/* The bytes inflate(codec, view) returns for a compressed batch's records; 0 with nothing held
 * when it raised one of `errors` (the Python path then says what is wrong), -1 on another error. */
static int
inflated(PyObject *inflate, PyObject *errors, int codec, const unsigned char *data, Py_ssize_t n,
         Py_buffer *out)
{
    PyObject *mv = PyMemoryView_FromMemory((char *)data, n, PyBUF_READ);
    if (mv == NULL)
        return -1;
    PyObject *res = PyObject_CallFunction(inflate, "iO", codec, mv);
    /* the view is of the caller's buffer: released now (a failure to, when something kept
     * an export of it, changes nothing here), the pending exception kept */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *rel = PyObject_CallMethod(mv, "release", NULL);
    if (rel == NULL)
        PyErr_Clear();
    Py_XDECREF(rel);
    Py_DECREF(mv);
    PyErr_Restore(et, ev, tb);
    if (res == NULL) {
        if (PyErr_ExceptionMatches(errors)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    int r = PyObject_GetBuffer(res, out, PyBUF_SIMPLE);
    Py_DECREF(res); /* the buffer holds its own reference */
    return r < 0 ? -1 : 1;
}

static PyObject *
deep_lines(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, max_bytes, base, max_out, max_records;
    long long prev_last, reach_last, limit, last_record = 0;
    PyObject *crc_func, *last_obj, *inflate, *errors;
    int print_data, has_last = 0;
    out_t o = {NULL, 0, 0};

    if (!PyArg_ParseTuple(args, "y*nnnOnLLOLpOOnn", &view, &pos, &end, &max_bytes, &crc_func,
                          &base, &prev_last, &reach_last, &last_obj, &limit, &print_data,
                          &inflate, &errors, &max_out, &max_records))
        return NULL;
    if (last_obj != Py_None) {
        last_record = PyLong_AsLongLong(last_obj);
        if (last_record == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
        has_last = 1;
    }
    const unsigned char *buf = view.buf;
    if (pos < 0 || max_bytes < 0 || base < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "negative position, size or base");
        return NULL;
    }
    if (end > view.len)
        end = view.len;
    Py_ssize_t stop = max_bytes > PY_SSIZE_T_MAX - pos ? PY_SSIZE_T_MAX : pos + max_bytes;
    /* room for max_out and a batch's lines at once: the text is not moved as it grows */
    if (max_out > 0 && max_out < (1 << 26) && out_reserve(&o, max_out + (1 << 16)) < 0)
        goto fail;
    while (pos < stop && end - pos >= 61 && o.len < max_out) {
        const unsigned char *b = buf + pos;
        int32_t size = be32(b + 8);
        int attrs = b[22];
        int codec = attrs & 7;
        if ((signed char)b[16] != 2 || size < 49 || (Py_ssize_t)size > end - pos - 12
            || CODECS[codec] == NULL || (attrs & 0x20) || base > PY_SSIZE_T_MAX - pos)
            break;
        Py_ssize_t total = (Py_ssize_t)size + 12;
        int64_t base_offset = be64(b), last;
        int32_t count = be32(b + 57);
        if (last_offset(base_offset, be32(b + 23), &last) < 0 || last <= prev_last
            || last > reach_last || count <= 0 || count > max_records
            || (codec != 0 && inflate == Py_None))
            break;
        unsigned long computed;
        if (batch_crc(crc_func, b, total, &computed) < 0)
            goto fail;
        if (computed != (uint32_t)be32(b + 17))
            break;
        Py_ssize_t mark = o.len;
        if (put_batch_line(&o, b, base + pos, total, 1) < 0)
            goto fail;
        Py_buffer data;
        const unsigned char *d = b + 61;
        Py_ssize_t dlen = total - 61;
        int held = 0;
        if (codec != 0) {
            int r = inflated(inflate, errors, codec, d, dlen, &data);
            if (r < 0)
                goto fail;
            if (r == 0) {
                o.len = mark;
                break;
            }
            held = 1;
            d = data.buf;
            dlen = data.len;
        }
        int append = (attrs & 0x08) != 0;
        int r = put_records(&o, d, dlen, count, base_offset, be64(b + 27), append, be64(b + 35),
                            be32(b + 53), limit, append ? "LogAppendTime" : "CreateTime",
                            print_data, &has_last, &last_record);
        if (held)
            PyBuffer_Release(&data);
        if (r < 0)
            goto fail;
        if (r == 0) {
            o.len = mark;
            break;
        }
        prev_last = last;
        pos += total;
    }
    PyBuffer_Release(&view);
    PyObject *bytes = out_finish(&o);
    if (bytes == NULL)
        return NULL;
    if (!has_last)
        return Py_BuildValue("(NnLO)", bytes, pos, prev_last, Py_None);
    return Py_BuildValue("(NnLL)", bytes, pos, prev_last, last_record);
fail:
    PyBuffer_Release(&view);
    PyMem_Free(o.data);
    return NULL;
}

static PyMethodDef methods[] = {
    {"batch_lines", batch_lines, METH_VARARGS, "kafka-dump-log batch lines of valid v2 batches."},
    {"batch_line", batch_line, METH_VARARGS, "The kafka-dump-log line of one v2 batch."},
    {"record_lines", record_lines, METH_VARARGS, "kafka-dump-log record lines of a v2 batch."},
    {"deep_lines", deep_lines, METH_VARARGS,
     "kafka-dump-log batch and record lines of plain valid v2 data batches."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kafkatext", "C fast path for kafka-dump-log text.", -1, methods,
};

PyMODINIT_FUNC
PyInit__kafkatext(void)
{
    return PyModule_Create(&module);
}
