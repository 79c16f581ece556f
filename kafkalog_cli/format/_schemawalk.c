/*
 * Optional C fast path of the schema-driven reader (kafkalog_cli/format/schema.py): walks the
 * bytes of one message along a compact program that schema.py compiles from the same layout as
 * its Python reader (schema._program), writing the value's JSON text directly, byte for byte
 * what schema's text readers (and json_text) give.
 *
 * walk(program, data, pos) -> (text, end) | None
 *     The JSON text (UTF-8 bytes) of the message at data[pos:] and the position after it, or
 *     None when the bytes do not decode (the Python reader then says why, in Kafka's words).
 * metadata_texts(values, programs) -> list
 *     For each item of the list values (bytes or None), a KRaft record framed by
 *     MetadataRecordSerde with one-byte varints (frame version 1, apiKey, version): when
 *     programs (a dict) maps apiKey << 8 | version to (prefix, program, ...) and the message
 *     decodes to the last byte, prefix + text + b"}"; otherwise None (the caller takes the
 *     Python path).
 *
 * A float64 is written as jackson.java_double writes it (Java's Double.toString, from the
 * shortest digits that read back as the value: repr's).
 *
 * The program (schema._program): a byte for flexible versions, then a struct body:
 *     u16 slots, u16 tagged (little-endian), then per untagged field in declaration order
 *     [u8 slot][u8 key length][key: "name":][node], then per tagged field
 *     [u32 tag][u8 slot][u8 key length][key][u16 default length][default JSON text][node].
 * A node: [u8 op][u8 flags: 1 nullable]; an array adds [u32 size][item node], a struct
 * [u32 size][struct body].
 *
 * Hostile bytes: every read is checked against the end of the data (or of a tagged field's
 * bytes); counts are checked against the bytes left before anything is read for them; the
 * nesting is that of the program, never of the data. The program itself is bounds-checked too.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

enum {
    OP_INT8 = 1, OP_INT16, OP_UINT16, OP_INT32, OP_UINT32, OP_INT64, OP_BOOL, OP_FLOAT64,
    OP_UUID, OP_STRING, OP_BYTES, OP_ARRAY, OP_STRUCT
};

#define MAX_SLOTS 64
#define WALK_OK 0
#define WALK_NO 1     /* the bytes (or the program) do not decode here: not handled */
#define WALK_ERR (-1) /* a Python exception is set */

/* -- the text being written ------------------------------------------------------------------ */

typedef struct {
    char *s;
    Py_ssize_t len, cap;
} text_t;

static int
grow(text_t *t, Py_ssize_t need)
{
    Py_ssize_t cap = t->cap < 1024 ? 1024 : t->cap;
    if (need > PY_SSIZE_T_MAX / 4 - t->len) {
        PyErr_NoMemory();
        return WALK_ERR;
    }
    while (cap < t->len + need)
        cap *= 2;
    char *s = PyMem_Realloc(t->s, cap);
    if (s == NULL) {
        PyErr_NoMemory();
        return WALK_ERR;
    }
    t->s = s;
    t->cap = cap;
    return WALK_OK;
}

#define ROOM(t, n) (((t)->cap - (t)->len >= (n)) ? WALK_OK : grow((t), (n)))

static inline int
put(text_t *t, const void *p, Py_ssize_t n)
{
    if (ROOM(t, n))
        return WALK_ERR;
    memcpy(t->s + t->len, p, n);
    t->len += n;
    return WALK_OK;
}

static inline int
put_int(text_t *t, int64_t v)
{
    char tmp[24];
    char *p = tmp + sizeof(tmp);
    uint64_t u = v < 0 ? 0ULL - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return put(t, p, tmp + sizeof(tmp) - p);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* "base64" of n bytes: the standard alphabet with padding (binascii.b2a_base64), or the
 * URL-safe one without padding (Uuid.toString). */
static int
put_base64(text_t *t, const unsigned char *d, Py_ssize_t n, const char *alphabet, int pad)
{
    if (ROOM(t, (n + 2) / 3 * 4 + 2))
        return WALK_ERR;
    char *o = t->s + t->len;
    *o++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8) | d[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)d[i + 1] << 8;
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        if (i + 1 < n)
            *o++ = alphabet[(v >> 6) & 63];
        else if (pad)
            *o++ = '=';
        if (pad)
            *o++ = '=';
    }
    *o++ = '"';
    t->len = o - t->s;
    return WALK_OK;
}

/* Well-formed UTF-8 (what Python's decoder accepts: no overlong forms, no surrogates, nothing
 * above U+10FFFF). */
static int
utf8_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            more = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (n - i <= more)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int k = 2; k <= more; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += more + 1;
    }
    return 1;
}

/* A JSON string of well-formed UTF-8, escaped as json.encoder.encode_basestring does. */
static int
put_escaped(text_t *t, const unsigned char *s, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (ROOM(t, n * 6 + 2))
        return WALK_ERR;
    char *o = t->s + t->len;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    t->len = o - t->s;
    return WALK_OK;
}

/* A string field's bytes as its JSON text: decoded as Java's String decodes them (U+FFFD for
 * each malformed part, through format/utf8.py's error handler), then escaped. */
static int
put_string(text_t *t, const unsigned char *s, Py_ssize_t n)
{
    if (utf8_valid(s, n))
        return put_escaped(t, s, n);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "kafkalog-java-utf8");
    if (text == NULL)
        return WALK_ERR;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    int r = utf8 == NULL ? WALK_ERR : put_escaped(t, (const unsigned char *)utf8, len);
    Py_DECREF(text);
    return r;
}

/* jackson.java_double: Java's Double.toString of x from repr's digits; NaN and the infinities
 * as JSON strings (Jackson's WRITE_NAN_AS_STRINGS). */
static int
put_double(text_t *t, double x)
{
    if (Py_IS_NAN(x))
        return put(t, "\"NaN\"", 5);
    if (Py_IS_INFINITY(x))
        return x > 0 ? put(t, "\"Infinity\"", 10) : put(t, "\"-Infinity\"", 11);
    if (x == 0)
        return copysign(1.0, x) < 0 ? put(t, "-0.0", 4) : put(t, "0.0", 3);
    double ax = fabs(x);
    char *r = PyOS_double_to_string(ax, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL)
        return WALK_ERR;
    /* repr: <whole>[.<frac>][e<exponent>], at most 17 significant digits */
    size_t rlen = strlen(r);
    char *e = strchr(r, 'e');
    long exp10 = e ? strtol(e + 1, NULL, 10) : 0;
    const char *mend = e ? e : r + rlen;
    const char *dot = memchr(r, '.', mend - r);
    const char *wend = dot ? dot : mend, *frac = dot ? dot + 1 : mend;
    char digits[64];
    size_t nd = 0;
    if (rlen >= 40) {
        PyMem_Free(r);
        return WALK_NO;
    }
    for (const char *c = r; c < wend; c++)
        digits[nd++] = *c;
    for (const char *c = frac; c < mend; c++)
        digits[nd++] = *c;
    size_t lead = 0;
    while (lead < nd && digits[lead] == '0')
        lead++;
    long exponent = exp10 + (long)(wend - r) - 1;  /* of the first digit */
    if (wend - r == 1 && r[0] == '0') {
        size_t zeros = 0;
        while (frac + zeros < mend && frac[zeros] == '0')
            zeros++;
        exponent = exp10 - (long)zeros - 1;
    }
    PyMem_Free(r);
    char *d = digits + lead;
    nd -= lead;
    while (nd > 0 && d[nd - 1] == '0')
        nd--;
    if (nd == 0)
        d[nd++] = '0';
    char out[96];
    size_t n = 0;
    if (x < 0)
        out[n++] = '-';
    if (ax >= 1e-3 && ax < 1e7) {
        if (exponent >= 0) {
            for (long i = 0; i <= exponent; i++)
                out[n++] = (size_t)i < nd ? d[i] : '0';
            out[n++] = '.';
            if ((size_t)exponent + 1 < nd)
                for (size_t i = (size_t)exponent + 1; i < nd; i++)
                    out[n++] = d[i];
            else
                out[n++] = '0';
        } else {
            out[n++] = '0';
            out[n++] = '.';
            for (long i = 0; i < -exponent - 1; i++)
                out[n++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[n++] = d[i];
        }
        return put(t, out, n);
    }
    out[n++] = d[0];
    out[n++] = '.';
    if (nd > 1)
        for (size_t i = 1; i < nd; i++)
            out[n++] = d[i];
    else
        out[n++] = '0';
    out[n++] = 'E';
    if (put(t, out, n))
        return WALK_ERR;
    return put_int(t, exponent);
}

/* -- reading the data ------------------------------------------------------------------------ */

typedef struct {
    const unsigned char *d;  /* the data */
    int flexible;
    text_t *t;
} walk_t;

static inline uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t
be64(const unsigned char *p)
{
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
        | ((uint32_t)p[3] << 24);
}

static inline unsigned
le16(const unsigned char *p)
{
    return (unsigned)p[0] | ((unsigned)p[1] << 8);
}

/* ByteUtils.readUnsignedVarint: at most 5 bytes, the value kept to 32 bits. */
static inline int
uvarint(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end, uint32_t *out)
{
    uint32_t v = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return WALK_NO;
        unsigned char b = d[p++];
        v |= (uint32_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = v;
            *pos = p;
            return WALK_OK;
        }
    }
    return WALK_NO;
}

/* A length: compact (unsigned varint less one) in flexible versions, else int16 (strings) or
 * int32 (bytes, arrays). */
static inline int
length(walk_t *w, Py_ssize_t *pos, Py_ssize_t end, int wide, int64_t *n)
{
    if (w->flexible) {
        uint32_t v;
        if (uvarint(w->d, pos, end, &v))
            return WALK_NO;
        *n = (int64_t)v - 1;
        return WALK_OK;
    }
    if (end - *pos < (wide ? 4 : 2))
        return WALK_NO;
    const unsigned char *p = w->d + *pos;
    *n = wide ? (int64_t)(int32_t)be32(p) : (int64_t)(int16_t)(((unsigned)p[0] << 8) | p[1]);
    *pos += wide ? 4 : 2;
    return WALK_OK;
}

static const int FIXED_SIZE[] = {0, 1, 2, 2, 4, 4, 8, 1, 8, 16};

/* One fixed-size value (op OP_INT8..OP_UUID), its bytes known to be there. */
static int
put_fixed(text_t *t, int op, const unsigned char *p)
{
    switch (op) {
    case OP_INT8: return put_int(t, (int8_t)p[0]);
    case OP_INT16: return put_int(t, (int16_t)(((unsigned)p[0] << 8) | p[1]));
    case OP_UINT16: return put_int(t, ((unsigned)p[0] << 8) | p[1]);
    case OP_INT32: return put_int(t, (int32_t)be32(p));
    case OP_UINT32: return put_int(t, be32(p));
    case OP_INT64: return put_int(t, (int64_t)be64(p));
    case OP_BOOL: return p[0] ? put(t, "true", 4) : put(t, "false", 5);
    case OP_FLOAT64: {
        uint64_t bits = be64(p);
        double x;
        memcpy(&x, &bits, 8);
        return put_double(t, x);
    }
    case OP_UUID: return put_base64(t, p, 16, B64URL, 0);
    }
    return WALK_NO;
}

/* The size of the node at prog (within pend), or -1 when it runs past pend. */
static Py_ssize_t
node_size(const unsigned char *prog, const unsigned char *pend)
{
    if (pend - prog < 2)
        return -1;
    if (prog[0] != OP_ARRAY && prog[0] != OP_STRUCT)
        return 2;
    if (pend - prog < 6 || le32(prog + 2) > (uint64_t)(pend - prog - 6))
        return -1;
    return 6 + (Py_ssize_t)le32(prog + 2);
}

static int walk_struct(walk_t *w, const unsigned char *prog, const unsigned char *pend,
                       Py_ssize_t *pos, Py_ssize_t end);

/* One value of the node at prog (its size already checked by the caller) from *pos, reading
 * nothing at or past end. */
static int
walk_node(walk_t *w, const unsigned char *prog, const unsigned char *pend, Py_ssize_t *pos,
          Py_ssize_t end)
{
    int op = prog[0], nullable = prog[1] & 1;
    text_t *t = w->t;
    int64_t n;
    if (op >= OP_INT8 && op <= OP_UUID) {
        if (end - *pos < FIXED_SIZE[op])
            return WALK_NO;
        int r = put_fixed(t, op, w->d + *pos);
        *pos += FIXED_SIZE[op];
        return r;
    }
    if (op == OP_STRUCT) {
        if (nullable) {
            if (end - *pos < 1)
                return WALK_NO;
            if ((int8_t)w->d[(*pos)++] < 0)
                return put(t, "null", 4);
        }
        return walk_struct(w, prog + 6, pend, pos, end);
    }
    if (op != OP_STRING && op != OP_BYTES && op != OP_ARRAY)
        return WALK_NO;
    if (length(w, pos, end, op != OP_STRING, &n))
        return WALK_NO;
    if (n < 0)
        return nullable ? put(t, "null", 4) : WALK_NO;
    if (op == OP_STRING && n > 0x7FFF)
        return WALK_NO;
    if (n > end - *pos)
        return WALK_NO;
    if (op == OP_STRING) {
        int r = put_string(t, w->d + *pos, (Py_ssize_t)n);
        *pos += (Py_ssize_t)n;
        return r;
    }
    if (op == OP_BYTES) {
        int r = put_base64(t, w->d + *pos, (Py_ssize_t)n, B64, 1);
        *pos += (Py_ssize_t)n;
        return r;
    }
    /* an array of n items (n <= the bytes left) */
    const unsigned char *item = prog + 6;
    Py_ssize_t isize = node_size(item, pend);
    if (isize < 0 || isize > le32(prog + 2))
        return WALK_NO;
    int iop = item[0];
    if (put(t, "[", 1))
        return WALK_ERR;
    if (iop >= OP_INT8 && iop <= OP_UUID) {
        if (n > (end - *pos) / FIXED_SIZE[iop])
            return WALK_NO;
        for (int64_t i = 0; i < n; i++) {
            if ((i && put(t, ",", 1)) || put_fixed(t, iop, w->d + *pos))
                return PyErr_Occurred() ? WALK_ERR : WALK_NO;
            *pos += FIXED_SIZE[iop];
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (i && put(t, ",", 1))
                return WALK_ERR;
            int r = walk_node(w, item, item + isize, pos, end);
            if (r)
                return r;
        }
    }
    return put(t, "]", 1);
}

/* A struct body at prog: its fields in declaration order, then (flexible versions) its tagged
 * fields, those that differ from their defaults put among the others in declaration order. */
static int
walk_struct(walk_t *w, const unsigned char *prog, const unsigned char *pend, Py_ssize_t *pos,
            Py_ssize_t end)
{
    text_t *t = w->t;
    if (pend - prog < 4)
        return WALK_NO;
    unsigned slots = le16(prog), ntagged = le16(prog + 2);
    if (slots > MAX_SLOTS || ntagged > slots)
        return WALK_NO;
    Py_ssize_t span_start[MAX_SLOTS], span_end[MAX_SLOTS];
    for (unsigned i = 0; i < slots; i++)
        span_start[i] = -1;
    const unsigned char *p = prog + 4;
    Py_ssize_t open = t->len;
    if (put(t, "{", 1))
        return WALK_ERR;
    for (unsigned i = 0; i < slots - ntagged; i++) {
        if (pend - p < 2 || p[0] >= slots || (Py_ssize_t)p[1] > pend - p - 2)
            return WALK_NO;
        unsigned slot = p[0], klen = p[1];
        if (i && put(t, ",", 1))
            return WALK_ERR;
        span_start[slot] = t->len;
        if (put(t, p + 2, klen))
            return WALK_ERR;
        p += 2 + klen;
        Py_ssize_t size = node_size(p, pend);
        if (size < 0)
            return WALK_NO;
        int r = walk_node(w, p, p + size, pos, end);
        if (r)
            return r;
        span_end[slot] = t->len;
        p += size;
    }
    const unsigned char *tags = p;
    int found = 0;
    if (w->flexible) {
        uint32_t count;
        if (uvarint(w->d, pos, end, &count))
            return WALK_NO;
        for (uint32_t c = 0; c < count; c++) {
            uint32_t tag, size;
            if (uvarint(w->d, pos, end, &tag) || uvarint(w->d, pos, end, &size)
                || size > (uint64_t)(end - *pos))
                return WALK_NO;
            Py_ssize_t fend = *pos + (Py_ssize_t)size;
            /* the entry of this tag, if the layout knows it */
            p = tags;
            for (unsigned k = 0; k < ntagged; k++) {
                if (pend - p < 6 || p[4] >= slots || (Py_ssize_t)p[5] > pend - p - 8)
                    return WALK_NO;
                unsigned slot = p[4], klen = p[5];
                const unsigned char *key = p + 6;
                unsigned dlen = le16(key + klen);
                const unsigned char *dflt = key + klen + 2;
                if ((Py_ssize_t)dlen > pend - dflt)
                    return WALK_NO;
                const unsigned char *node = dflt + dlen;
                Py_ssize_t nsize = node_size(node, pend);
                if (nsize < 0)
                    return WALK_NO;
                if (le32(p) == tag) {
                    Py_ssize_t start = t->len, fpos = *pos;
                    if (put(t, key, klen))
                        return WALK_ERR;
                    Py_ssize_t value = t->len;
                    int r = walk_node(w, node, node + nsize, &fpos, fend);
                    if (r)
                        return r;
                    if (fpos != fend)
                        return WALK_NO;  /* bytes left over in the field */
                    if (t->len - value == (Py_ssize_t)dlen && memcmp(t->s + value, dflt, dlen) == 0)
                        t->len = start;  /* the default: left out */
                    else {
                        span_start[slot] = start;
                        span_end[slot] = t->len;
                        found = 1;
                    }
                    break;
                }
                p = node + nsize;
            }
            *pos = fend;
        }
    }
    if (found) {
        /* rewrite the fields in declaration order */
        Py_ssize_t n = t->len - open;
        char *copy = PyMem_Malloc(n);
        if (copy == NULL) {
            PyErr_NoMemory();
            return WALK_ERR;
        }
        memcpy(copy, t->s + open, n);
        t->len = open + 1;
        int first = 1;
        for (unsigned i = 0; i < slots; i++) {
            if (span_start[i] < 0)
                continue;
            if ((!first && put(t, ",", 1))
                || put(t, copy + (span_start[i] - open), span_end[i] - span_start[i])) {
                PyMem_Free(copy);
                return WALK_ERR;
            }
            first = 0;
        }
        PyMem_Free(copy);
    }
    return put(t, "}", 1);
}

/* The message of program (a bytes object) at data[pos:end]: WALK_OK with *pos after it. */
static int
walk_program(PyObject *program, const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end,
             text_t *t)
{
    if (!PyBytes_Check(program) || PyBytes_GET_SIZE(program) < 1)
        return WALK_NO;
    const unsigned char *prog = (const unsigned char *)PyBytes_AS_STRING(program);
    walk_t w = {d, prog[0] & 1, t};
    return walk_struct(&w, prog + 1, prog + PyBytes_GET_SIZE(program), pos, end);
}

static PyObject *
walk(PyObject *self, PyObject *args)
{
    PyObject *program;
    Py_buffer view;
    Py_ssize_t pos;
    text_t t = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "O!y*n", &PyBytes_Type, &program, &view, &pos))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "position outside the data");
        goto done;
    }
    int r = walk_program(program, view.buf, &pos, view.len, &t);
    if (r == WALK_ERR)
        goto done;
    if (r == WALK_NO) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    result = Py_BuildValue("(y#n)", t.s, t.len, pos);
done:
    PyBuffer_Release(&view);
    PyMem_Free(t.s);
    return result;
}

static PyObject *
metadata_texts(PyObject *self, PyObject *args)
{
    PyObject *values, *programs;
    text_t t = {NULL, 0, 0};
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &values, &PyDict_Type, &programs))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i), *text = Py_None;
        PyObject *entry = NULL;
        const unsigned char *d = NULL;
        Py_ssize_t len = 0;
        if (PyBytes_Check(v)) {
            d = (const unsigned char *)PyBytes_AS_STRING(v);
            len = PyBytes_GET_SIZE(v);
        }
        if (d != NULL && len >= 3 && d[0] == 1 && d[1] < 0x80 && d[2] < 0x80) {
            PyObject *key = PyLong_FromLong((long)d[1] << 8 | d[2]);
            if (key == NULL)
                goto fail;
            entry = PyDict_GetItemWithError(programs, key);
            Py_DECREF(key);
            if (entry == NULL && PyErr_Occurred())
                goto fail;
        }
        if (entry != NULL && PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) >= 2
                && PyBytes_Check(PyTuple_GET_ITEM(entry, 0))) {
            PyObject *prefix = PyTuple_GET_ITEM(entry, 0);
            Py_ssize_t pos = 3;
            t.len = 0;
            if (put(&t, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix)))
                goto fail;
            int r = walk_program(PyTuple_GET_ITEM(entry, 1), d, &pos, len, &t);
            if (r == WALK_ERR || (r == WALK_OK && put(&t, "}", 1)))
                goto fail;
            if (r == WALK_OK && pos == len) {
                text = PyBytes_FromStringAndSize(t.s, t.len);
                if (text == NULL)
                    goto fail;
            }
        }
        if (text == Py_None)
            Py_INCREF(text);
        PyList_SET_ITEM(out, i, text);
    }
    PyMem_Free(t.s);
    return out;
fail:
    PyMem_Free(t.s);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "The JSON text of a message along its program, or None."},
    {"metadata_texts", metadata_texts, METH_VARARGS,
     "The JSON texts of framed KRaft records (None where not handled)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_schemawalk", "C fast path of the schema-driven reader.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__schemawalk(void)
{
    return PyModule_Create(&module);
}
