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

#if defined(CRC_X86)
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* unaligned load */
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#elif defined(CRC_ARM)
static uint32_t
crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* unaligned load; AArch64 Linux and macOS are little-endian */
        crc = __crc32cd(crc, word);
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = __crc32cb(crc, *p++);
    return crc;
}
#endif

static uint32_t (*crc_best)(uint32_t, const unsigned char *, size_t) = crc_table;

static PyObject *
checksum(PyObject *args, PyObject *kwargs, uint32_t (*fn)(uint32_t, const unsigned char *, size_t))
{
    static char *keywords[] = {"data", "value", NULL};
    Py_buffer view;
    /* "I": the value's low 32 bits, unchecked, as the crc32c package reads it */
    unsigned int value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|I", keywords, &view, &value))
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
crc32c(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return checksum(args, kwargs, crc_best);
}

static PyObject *
crc32c_table(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return checksum(args, kwargs, crc_table);
}

static PyMethodDef methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_VARARGS | METH_KEYWORDS,
     "crc32c(data, value=0): the CRC-32C of data, continuing from the CRC value."},
    {"crc32c_table", (PyCFunction)(void (*)(void))crc32c_table, METH_VARARGS | METH_KEYWORDS,
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
        crc_best = crc_hw;
        hardware = 1;
    }
#elif defined(CRC_ARM)
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
