/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of Kafka's v2 record
 * batches (org.apache.kafka.common.record.DefaultRecordBatch, computed with
 * org.apache.kafka.common.utils.Crc32C) and of producer-state snapshots.
 *
 * crc32c(data, value=0) -> int
 *     the CRC-32C of data (any contiguous buffer), continuing from value, the CRC of the bytes
 *     before it: crc32c(b, crc32c(a)) == crc32c(a + b), as the `crc32c` package's crc32c does.
 * crc32c_table(data, value=0) -> int
 *     the same from the table path only (tests compare both paths on this machine).
 * hardware: True when crc32c uses the CPU's CRC-32C instructions.
 *
 * The fast path uses the CPU's CRC-32C instructions: SSE4.2 `crc32` on x86-64 (checked at run
 * time: the function is compiled for SSE4.2 whatever the build flags, and used only when the CPU
 * has it), ARMv8 CRC32C on AArch64 (where the compiler targets a CPU that has them). Everywhere
 * else a slicing-by-8 table, built when the module is loaded. This module exists so that the
 * C path does not import the `crc32c` package, whose import costs more than a whole dump of an
 * empty segment; the pure-Python path (KAFKALOG_PURE_PYTHON=1) keeps using that package.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define CRC_X86 1
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#define CRC_ARM 1
#include <arm_acle.h>
#endif

/* Buffers at least this long are checksummed with the GIL released. */
#define RELEASE_GIL_FROM (64 * 1024)

static uint32_t table[8][256];

static void
build_table(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            table[t][n] = (table[t - 1][n] >> 8) ^ table[0][table[t - 1][n] & 0xFF];
}

/* Little-endian 32-bit load from any alignment. */
static inline uint32_t
load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Slicing-by-8 over the inverted register crc. */
static uint32_t
crc_table(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = load_le32(p) ^ crc;
        uint32_t hi = load_le32(p + 4);
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF]
              ^ table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF]
              ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(CRC_X86) || defined(CRC_ARM)
/*
 * The instruction's latency is three times its throughput: one chain of dependent crc32
 * instructions runs at a third of the speed the CPU can give. So a long buffer is cut into three
 * blocks checksummed side by side, three independent chains, and their CRCs are then joined: the
 * CRC register is linear, so the register after A then B is the register after A moved over
 * len(B) zero bytes, XOR B's register computed from 0. Moving a register over a fixed number of
 * zero bytes is a fixed linear map of its 32 bits, applied with four byte tables
 * (shift_long/shift_short, made once). This is the method of Intel's white paper "Fast CRC
 * Computation for iSCSI Polynomial Using CRC32 Instruction" (2011) and of Mark Adler's crc32c.c.
 */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

/* mat (32 columns, column i the image of bit i) times vec, over GF(2). */
static uint32_t
gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1)
            sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void
gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

/* The four byte tables of the map "register moved over len zero bytes" (len a power of 2). */
static void
build_shift(uint32_t shift[4][256], size_t len)
{
    uint32_t op[32], sq[32];
    /* one zero bit: the reflected register shifts right, the polynomial fed back from bit 0 */
    op[0] = 0x82F63B78u;
    for (int n = 1; n < 32; n++)
        op[n] = 1u << (n - 1);
    for (size_t bits = 1; bits < 8 * len; bits <<= 1) { /* squared: twice as many zero bits */
        gf2_square(sq, op);
        memcpy(op, sq, sizeof(op));
    }
    for (uint32_t n = 0; n < 256; n++) {
        shift[0][n] = gf2_times(op, n);
        shift[1][n] = gf2_times(op, n << 8);
        shift[2][n] = gf2_times(op, n << 16);
        shift[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t
shift_crc(uint32_t shift[4][256], uint32_t crc)
{
    return shift[0][crc & 0xFF] ^ shift[1][(crc >> 8) & 0xFF] ^ shift[2][(crc >> 16) & 0xFF]
           ^ shift[3][crc >> 24];
}

static inline uint64_t
load64(const unsigned char *p)
{
    uint64_t word;
    memcpy(&word, p, 8); /* any alignment; x86-64 and AArch64 Linux/macOS are little-endian */
    return word;
}

/* reg_t: the register as the instruction takes it. On x86-64 a 64-bit one (its high half zero):
 * narrowing it between instructions would put a move on each chain. */
#if defined(CRC_X86)
#define HW_TARGET __attribute__((target("sse4.2")))
typedef uint64_t reg_t;
#define CRC_U64(crc, word) _mm_crc32_u64((crc), (word))
#define CRC_U8(crc, byte) _mm_crc32_u8((crc), (byte))
#else
#define HW_TARGET
typedef uint32_t reg_t;
#define CRC_U64(crc, word) __crc32cd((crc), (word))
#define CRC_U8(crc, byte) __crc32cb((crc), (byte))
#endif

/* Three blocks of `block` bytes side by side while there are, joined with `shift`. */
#define THREE_WAY(block, shift)                                                   \
    while (n >= 3 * (size_t)(block)) {                                            \
        reg_t c1 = 0, c2 = 0;                                                     \
        const unsigned char *stop = p + (block);                                  \
        do { /* two words a chain a turn: fewer loop instructions */              \
            crc = CRC_U64(crc, load64(p));                                        \
            c1 = CRC_U64(c1, load64(p + (block)));                                \
            c2 = CRC_U64(c2, load64(p + 2 * (block)));                            \
            crc = CRC_U64(crc, load64(p + 8));                                    \
            c1 = CRC_U64(c1, load64(p + (block) + 8));                            \
            c2 = CRC_U64(c2, load64(p + 2 * (block) + 8));                        \
            p += 16;                                                              \
        } while (p < stop);                                                       \
        crc = shift_crc(shift, (uint32_t)crc) ^ c1;                               \
        crc = shift_crc(shift, (uint32_t)crc) ^ c2;                               \
        p += 2 * (block);                                                         \
        n -= 3 * (size_t)(block);                                                 \
    }

HW_TARGET static uint32_t
crc_hw(uint32_t crc32, const unsigned char *p, size_t n)
{
    reg_t crc = crc32;
    THREE_WAY(LONG_BLOCK, shift_long)
    THREE_WAY(SHORT_BLOCK, shift_short)
    while (n >= 8) {
        crc = CRC_U64(crc, load64(p));
        p += 8;
        n -= 8;
    }
    uint32_t c = (uint32_t)crc;
    while (n--)
        c = CRC_U8(c, *p++);
    return c;
}

static void
build_shifts(void)
{
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
}
#endif

static uint32_t (*crc_best)(uint32_t, const unsigned char *, size_t) = crc_table;

/* crc32c(data, value=0) arguments, read without building a tuple and a dict per call (most
 * calls are one batch of a few KiB, where that would be a good part of the time). */
static PyObject *
checksum(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *name,
         uint32_t (*fn)(uint32_t, const unsigned char *, size_t))
{
    PyObject *data = NULL, *value_obj = NULL;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 2 arguments (%zd given)", name, nargs);
        return NULL;
    }
    if (nargs >= 1)
        data = args[0];
    if (nargs == 2)
        value_obj = args[1];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot;
        if (PyUnicode_CompareWithASCIIString(key, "data") == 0)
            slot = &data;
        else if (PyUnicode_CompareWithASCIIString(key, "value") == 0)
            slot = &value_obj;
        else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", name,
                         key);
            return NULL;
        }
        if (*slot != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", name,
                         key);
            return NULL;
        }
        *slot = args[nargs + i];
    }
    if (data == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'data'", name);
        return NULL;
    }
    /* The value's low 32 bits, unchecked, as the crc32c package reads it (format "I"). */
    unsigned int value = 0;
    if (value_obj != NULL) {
        unsigned long v = PyLong_AsUnsignedLongMask(value_obj);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        value = (unsigned int)v;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = ~(uint32_t)value;
    const unsigned char *p = (const unsigned char *)view.buf;
    size_t n = (size_t)view.len;
    if (n >= RELEASE_GIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        crc = fn(crc, p, n);
        Py_END_ALLOW_THREADS
    }
    else {
        crc = fn(crc, p, n);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong((unsigned long)~crc);
}

static PyObject *
crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return checksum(args, nargs, kwnames, "crc32c", crc_best);
}

static PyObject *
crc32c_table(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return checksum(args, nargs, kwnames, "crc32c_table", crc_table);
}

static PyMethodDef methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_FASTCALL | METH_KEYWORDS,
     "crc32c(data, value=0): the CRC-32C of data, continuing from the CRC value."},
    {"crc32c_table", (PyCFunction)(void (*)(void))crc32c_table, METH_FASTCALL | METH_KEYWORDS,
     "crc32c_table(data, value=0): crc32c computed by the table path only."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_crc32c", "CRC-32C: CPU instructions where there, else a table.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__crc32c(void)
{
    build_table();
    int hardware = 0;
#if defined(CRC_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        build_shifts();
        crc_best = crc_hw;
        hardware = 1;
    }
#elif defined(CRC_ARM)
    build_shifts();
    crc_best = crc_hw;
    hardware = 1;
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObject(m, "hardware", PyBool_FromLong(hardware)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
