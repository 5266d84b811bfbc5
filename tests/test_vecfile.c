/* test_vecfile.c - unit test of the .vec parser in reference/vecfile.h
       cc -std=c99 -Wall -Wextra -Werror -I. tests/test_vecfile.c -o test_vecfile && ./test_vecfile
   Run from the repository root (one check loads reference/vectors/attn_causal.vec; it is skipped
   when that file is not there). Prints one line per failed check and `N passed, N failed` last;
   exits non-zero on any failure.

   Leaks are checked without valgrind: the parser's allocator macros point at counting wrappers,
   and every check verifies that no block is outstanding afterwards. The same wrappers can make
   the k-th allocation fail, to test the out-of-memory paths. Every input is copied into a heap
   block of exactly its length (no NUL after it), so valgrind or ASan flags a read past len. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t g_live;      /* blocks allocated by the parser and not yet freed */
static size_t g_calls;     /* MN_VEC_MALLOC calls so far */
static size_t g_fail_at;   /* the g_fail_at-th call returns NULL; 0 = never */
static size_t g_max_bytes; /* largest single request */

static void* t_malloc(size_t n)
{
    void* p;
    g_calls++;
    if (n > g_max_bytes) g_max_bytes = n;
    if (g_fail_at != 0 && g_calls == g_fail_at) return NULL;
    p = malloc(n);
    if (p != NULL) g_live++;
    return p;
}

static void t_free(void* p)
{
    if (p != NULL) {
        g_live--;
        free(p);
    }
}

#define MN_VEC_MALLOC(n) t_malloc(n)
#define MN_VEC_FREE(p) t_free(p)
#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"

static int n_pass, n_fail;

static void check(int cond, const char* what, const char* detail)
{
    if (cond) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    }
}

static int is_zero(const mn_vec_file* f)
{
    static const mn_vec_file zero; /* all zero bits */
    return memcmp(f, &zero, sizeof(zero)) == 0;
}

/* Parses the first len bytes of text from an exact-size heap copy. */
static int parse_n(mn_vec_file* f, const char* text, size_t len, char* err, size_t errlen)
{
    char* copy = (char*)malloc(len ? len : 1);
    int rc;
    if (copy == NULL) return -100;
    memcpy(copy, text, len);
    rc = mn_vec_parse(f, copy, len, err, errlen);
    free(copy);
    return rc;
}

static int parse(mn_vec_file* f, const char* text, char* err, size_t errlen)
{
    return parse_n(f, text, strlen(text), err, errlen);
}

#define HDR "op demo\nsource unit test\n"

/* ---- inputs that must parse ---------------------------------------------------------------- */

static void test_good(void)
{
    mn_vec_file f;
    char err[256];
    const mn_vec_tensor* t;
    int rc;

    g_live = 0;
    rc = parse(&f, "# a comment\n" HDR "attr scale 0.2\nattr layout BTHD\ntensor t 2 2 3\n1 2 3\n4 5 6\n"
                   "tensor u 1 1\n-0.5\nend\n",
               err, sizeof(err));
    check(rc == 0, "good: basic file parses", err);
    check(strcmp(f.op, "demo") == 0 && strcmp(f.source, "unit test") == 0, "good: op and source", NULL);
    check(f.n_attr == 2 && f.n_tensor == 2, "good: counts", NULL);
    check(mn_vec_attr_f(&f, "scale", -1) == 0.2, "good: attr_f", NULL);
    check(mn_vec_attr_f(&f, "layout", -1) == -1, "good: attr_f of a non-number gives dflt", NULL);
    check(mn_vec_attr_f(&f, "nope", 7) == 7, "good: attr_f of a missing attr gives dflt", NULL);
    check(mn_vec_attr(&f, "layout") && strcmp(mn_vec_attr(&f, "layout"), "BTHD") == 0, "good: attr", NULL);
    check(mn_vec_attr(&f, "nope") == NULL, "good: missing attr is NULL", NULL);
    t = mn_vec_get(&f, "t");
    check(t && t->ndim == 2 && t->dims[0] == 2 && t->dims[1] == 3 && t->n == 6, "good: tensor shape", NULL);
    check(t && t->data[0] == 1 && t->data[5] == 6, "good: tensor values", NULL);
    check(mn_vec_get(&f, "u") && mn_vec_get(&f, "u")->data[0] == -0.5, "good: second tensor", NULL);
    check(mn_vec_get(&f, "nope") == NULL, "good: missing tensor is NULL", NULL);
    check(g_live == 2, "good: one block per tensor", NULL);
    mn_vec_free(&f);
    check(g_live == 0 && is_zero(&f), "good: free releases everything and zeroes", NULL);
    mn_vec_free(&f); /* a second free of a zeroed struct must be harmless */
    mn_vec_free(NULL);

    /* CRLF, blank lines, comments between blocks, values broken across lines at random, tabs,
       no newline after end, NaN/inf/hex spellings that strtod accepts */
    rc = parse(&f, "\r\n  # indented comment\r\nop  demo \r\nsource a b  c\r\n\r\nattr\tw\t8\r\n"
                   "tensor x 3 1 2 3\r\n1\t2\r\n3 4\r\n\r\n  5 6\r\n# between\r\n"
                   "tensor y 1 4\r\nnan -inf 0x1p-2 1e-310\r\nend",
               err, sizeof(err));
    check(rc == 0, "good: CRLF, comments, split values", err);
    check(strcmp(f.source, "a b  c") == 0, "good: source keeps inner blanks, trims outer", f.source);
    check(rc == 0 && mn_vec_get(&f, "x")->data[5] == 6, "good: split values read in order", NULL);
    if (rc == 0) {
        const double* y = mn_vec_get(&f, "y")->data;
        check(isnan(y[0]) && isinf(y[1]) && y[1] < 0 && y[2] == 0.25 && y[3] > 0 && y[3] < 1e-300,
              "good: nan, -inf, hex float and subnormal are accepted", NULL);
    }
    mn_vec_free(&f);

    /* %.17g text must come back as the exact double */
    rc = parse(&f, HDR "tensor z 1 3\n0.10000000000000001 -1.7976931348623157e+308 4.9406564584124654e-324\nend\n", err,
               sizeof(err));
    check(rc == 0 && f.tensor[0].data[0] == 0.1 && f.tensor[0].data[1] == -1.7976931348623157e+308 &&
              f.tensor[0].data[2] > 0,
          "good: %.17g round trip, DBL_MAX and the smallest subnormal", err);
    mn_vec_free(&f);

    /* bytes past len must be ignored: here they would be garbage after end */
    {
        const char* text = HDR "tensor t 1 1\n5\nend\nGARBAGE";
        rc = parse_n(&f, text, strlen(text) - 7, err, sizeof(err));
        check(rc == 0, "good: bytes beyond len are not read", err);
        mn_vec_free(&f);
    }
    /* a file with no attrs and no tensors is well-formed (the checker rejects it later) */
    rc = parse(&f, HDR "end\n", err, sizeof(err));
    check(rc == 0 && f.n_tensor == 0, "good: no tensors", err);
    mn_vec_free(&f);
    /* limits are inclusive: 63-byte names, 8 dims, 32 attrs, 64 tensors */
    {
        char buf[8192];
        size_t len = 0, i;
        len += (size_t)sprintf(buf + len, "op %s\nsource s\n",
                               "o23456789012345678901234567890123456789012345678901234567890123");
        for (i = 0; i < 32; i++)
            len += (size_t)sprintf(buf + len, "attr a%lu %lu\n", (unsigned long)i, (unsigned long)i);
        len += (size_t)sprintf(buf + len, "tensor t 8 1 1 1 1 1 1 1 2\n1 2\n");
        for (i = 1; i < 64; i++)
            len += (size_t)sprintf(buf + len, "tensor t%lu 1 1\n%lu\n", (unsigned long)i, (unsigned long)i);
        sprintf(buf + len, "end\n");
        rc = parse(&f, buf, err, sizeof(err));
        check(rc == 0 && f.n_attr == 32 && f.n_tensor == 64 && strlen(f.op) == 63, "good: at the limits", err);
        check(rc == 0 && mn_vec_attr_f(&f, "a31", -1) == 31 && mn_vec_get(&f, "t63")->data[0] == 63,
              "good: last attr and tensor", NULL);
        mn_vec_free(&f);
    }
    check(g_live == 0, "good: no leaks", NULL);
}

/* ---- inputs that must be rejected ---------------------------------------------------------- */

typedef struct {
    const char* name;
    const char* text;
    int code;
} bad_case;

static void test_bad(void)
{
    /* grouped by what they probe: keyword order, header syntax, limits, value blocks, the tail;
       each expects one specific code so a change in which check fires gets noticed */
    static const bad_case cases[] = {
        {"empty input", "", MN_VEC_ESYNTAX},
        {"only comments and blanks", "# x\n\n   \n# y", MN_VEC_ESYNTAX},
        {"missing op", "source s\ntensor t 1 1\n1\nend\n", MN_VEC_ESYNTAX},
        {"op without a name", "op\nsource s\nend\n", MN_VEC_ESYNTAX},
        {"op with two names", "op a b\nsource s\nend\n", MN_VEC_ESYNTAX},
        {"missing source", "op x\ntensor t 1 1\n1\nend\n", MN_VEC_ESYNTAX},
        {"source without text", "op x\nsource   \nend\n", MN_VEC_ESYNTAX},
        {"op only", "op x\n", MN_VEC_ESYNTAX},
        {"second op", HDR "op y\nend\n", MN_VEC_ESYNTAX},
        {"second source", HDR "source again\nend\n", MN_VEC_ESYNTAX},
        {"source after attr", "op x\nattr a 1\nsource s\nend\n", MN_VEC_ESYNTAX},
        {"attr after tensor", HDR "tensor t 1 1\n1\nattr a 1\nend\n", MN_VEC_ESYNTAX},
        {"unknown keyword", HDR "tensr t 1 1\n1\nend\n", MN_VEC_ESYNTAX},
        {"keyword is case-sensitive", HDR "END\n", MN_VEC_ESYNTAX},
        {"attr without value", HDR "attr a\nend\n", MN_VEC_ESYNTAX},
        {"attr without name", HDR "attr\nend\n", MN_VEC_ESYNTAX},
        {"duplicate attr", HDR "attr a 1\nattr a 2\nend\n", MN_VEC_EDUP},
        {"tensor without name", HDR "tensor\nend\n", MN_VEC_ESYNTAX},
        {"tensor without ndim", HDR "tensor t\nend\n", MN_VEC_ESYNTAX},
        {"ndim 0", HDR "tensor t 0\nend\n", MN_VEC_ELIMIT},
        {"ndim 9", HDR "tensor t 9 1 1 1 1 1 1 1 1 1\n1\nend\n", MN_VEC_ELIMIT},
        {"ndim overflowing size_t", HDR "tensor t 99999999999999999999999 1\n1\nend\n", MN_VEC_ELIMIT},
        {"ndim negative", HDR "tensor t -1 1\n1\nend\n", MN_VEC_ESYNTAX},
        {"ndim not a number", HDR "tensor t two 1 1\n1 1\nend\n", MN_VEC_ESYNTAX},
        {"fewer dims than ndim", HDR "tensor t 3 1 2\n1 2\nend\n", MN_VEC_ESYNTAX},
        {"more dims than ndim", HDR "tensor t 1 2 2\n1 2\nend\n", MN_VEC_ESYNTAX},
        {"dimension 0", HDR "tensor t 2 2 0\nend\n", MN_VEC_ELIMIT},
        {"dimension with a sign", HDR "tensor t 1 +2\n1 2\nend\n", MN_VEC_ESYNTAX},
        {"dimension as a float", HDR "tensor t 1 2.0\n1 2\nend\n", MN_VEC_ESYNTAX},
        {"dimension over the element limit", HDR "tensor t 1 268435457\n1\nend\n", MN_VEC_ELIMIT},
        {"product over the element limit", HDR "tensor t 2 65536 65536\n1\nend\n", MN_VEC_ELIMIT},
        {"product overflowing size_t", HDR "tensor t 3 4294967296 4294967296 4294967296\n1\nend\n", MN_VEC_ELIMIT},
        {"dimension overflowing size_t", HDR "tensor t 1 184467440737095516160\n1\nend\n", MN_VEC_ELIMIT},
        {"huge but legal size, tiny input", HDR "tensor t 1 268435456\n1 2 3\nend\n", MN_VEC_ETRUNC},
        {"tensor header at end of input", HDR "tensor t 1 3", MN_VEC_ETRUNC},
        {"truncated values", HDR "tensor t 1 6\n1 2 3 4", MN_VEC_ETRUNC},
        {"truncated values, padded", HDR "tensor t 1 3\n1   2     ", MN_VEC_ETRUNC},
        {"truncated mid-number", HDR "tensor t 1 2\n1.5 2.5e", MN_VEC_ENUMBER},
        {"too few values before end", HDR "tensor t 1 4\n1 2 3\nend\n", MN_VEC_ETRUNC},
        {"too few values before tensor", HDR "tensor t 1 4\n1 2 3\ntensor u 1 1\n1\nend\n", MN_VEC_ETRUNC},
        {"too many values on the line", HDR "tensor t 1 2\n1 2 3\nend\n", MN_VEC_ESYNTAX},
        {"too many values on the next line", HDR "tensor t 1 2\n1 2\n3\nend\n", MN_VEC_ESYNTAX},
        {"keyword on the last value's line", HDR "tensor t 1 1\n1 end\n", MN_VEC_ESYNTAX},
        {"comment inside values", HDR "tensor t 1 2\n1\n# c\n2\nend\n", MN_VEC_ENUMBER},
        {"bad number", HDR "tensor t 1 3\n1 2x 3\nend\n", MN_VEC_ENUMBER},
        {"word instead of number", HDR "tensor t 1 1\nabc\nend\n", MN_VEC_ENUMBER},
        {"number overflowing a double", HDR "tensor t 1 1\n1e999\nend\n", MN_VEC_ENUMBER},
        {"number too long", HDR "tensor t 1 1\n"
                                "1.000000000000000000000000000000000000000000000000000000000000000001\nend\n",
         MN_VEC_ENUMBER},
        {"comma decimal", HDR "tensor t 1 1\n1,5\nend\n", MN_VEC_ENUMBER},
        {"duplicate tensor", HDR "tensor t 1 1\n1\ntensor t 1 1\n2\nend\n", MN_VEC_EDUP},
        {"missing end", HDR "tensor t 1 1\n1\n", MN_VEC_ETRUNC},
        {"missing end after attrs", HDR "attr a 1\n", MN_VEC_ETRUNC},
        {"garbage after end", HDR "tensor t 1 1\n1\nend\nx\n", MN_VEC_ETRAILING},
        {"token after end on its line", HDR "end now\n", MN_VEC_ETRAILING},
        {"second end", HDR "end\nend\n", MN_VEC_ETRAILING},
        {"comment after end", HDR "end\n# late\n", MN_VEC_ETRAILING},
        {"op name too long", "op o234567890123456789012345678901234567890123456789012345678901234\nsource s\nend\n",
         MN_VEC_ELIMIT},
        {"tensor name too long",
         HDR "tensor t234567890123456789012345678901234567890123456789012345678901234 1 1\n1\nend\n", MN_VEC_ELIMIT},
        {"attr name too long", HDR "attr a234567890123456789012345678901234567890123456789012345678901234 1\nend\n",
         MN_VEC_ELIMIT},
        {"attr value too long",
         HDR "attr a v2345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678"
             "901234567890123456789012345678\nend\n",
         MN_VEC_ELIMIT},
        {"control byte in a name", HDR "tensor t\001 1 1\n1\nend\n", MN_VEC_ESYNTAX},
        {"control byte in a value", HDR "attr a x\033y\nend\n", MN_VEC_ESYNTAX},
    };
    size_t i;
    char err[256];
    mn_vec_file f;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char what[160];
        int rc;
        g_live = 0;
        g_max_bytes = 0;
        /* garbage in: the parser must zero f even though it never owned what was there */
        memset(&f, 0x5a, sizeof(f));
        err[0] = '\0';
        rc = parse(&f, cases[i].text, err, sizeof(err));
        snprintf(what, sizeof(what), "bad: %s (rc %d, want %d)", cases[i].name, rc, cases[i].code);
        check(rc == cases[i].code, what, err);
        snprintf(what, sizeof(what), "bad: %s leaves f zeroed and frees everything", cases[i].name);
        check(is_zero(&f) && g_live == 0, what, NULL);
        snprintf(what, sizeof(what), "bad: %s has a message", cases[i].name);
        check(err[0] != '\0', what, NULL);
        /* nothing should ever allocate more than 8 bytes per input byte (the 2^28 case) */
        snprintf(what, sizeof(what), "bad: %s allocates within bounds", cases[i].name);
        check(g_max_bytes <= 8 * strlen(cases[i].text) + 64, what, NULL);
        if (getenv("VERBOSE")) printf("  %-40s %d %s\n", cases[i].name, rc, err);
    }

    /* a NUL byte inside a value: only visible with an explicit length */
    {
        const char text[] = HDR "tensor t 1 2\n1\0002 3\nend\n";
        int rc = parse_n(&f, text, sizeof(text) - 1, err, sizeof(err));
        check(rc == MN_VEC_ENUMBER && is_zero(&f), "bad: NUL inside a value", err);
    }
    /* one tensor and one attr over the limits */
    {
        char buf[8192];
        size_t len = 0, k;
        int rc;
        len += (size_t)sprintf(buf + len, HDR);
        for (k = 0; k < 33; k++) len += (size_t)sprintf(buf + len, "attr a%lu 1\n", (unsigned long)k);
        sprintf(buf + len, "end\n");
        rc = parse(&f, buf, err, sizeof(err));
        check(rc == MN_VEC_ELIMIT && is_zero(&f), "bad: 33 attrs", err);
        len = (size_t)sprintf(buf, HDR);
        for (k = 0; k < 65; k++) len += (size_t)sprintf(buf + len, "tensor t%lu 1 1\n1\n", (unsigned long)k);
        sprintf(buf + len, "end\n");
        g_live = 0;
        rc = parse(&f, buf, err, sizeof(err));
        check(rc == MN_VEC_ELIMIT && is_zero(&f) && g_live == 0, "bad: 65 tensors, 64 freed", err);
        len = (size_t)sprintf(buf, "op x\nsource ");
        for (k = 0; k < 512; k++) buf[len++] = 's';
        sprintf(buf + len, "\nend\n");
        rc = parse(&f, buf, err, sizeof(err));
        check(rc == MN_VEC_ELIMIT && is_zero(&f), "bad: source of 512 bytes", err);
    }
}

/* ---- API edges ----------------------------------------------------------------------------- */

static void test_api(void)
{
    mn_vec_file f;
    char err[256], tiny[8];
    int rc;
    check(mn_vec_parse(NULL, "x", 1, err, sizeof(err)) == MN_VEC_EARG, "api: NULL f", NULL);
    check(mn_vec_parse(&f, NULL, 5, err, sizeof(err)) == MN_VEC_EARG && is_zero(&f), "api: NULL buf with len", NULL);
    check(mn_vec_parse(&f, NULL, 0, err, sizeof(err)) == MN_VEC_ESYNTAX, "api: NULL buf, len 0 is empty input", NULL);
    /* no message buffer, or a tiny one, must still work */
    check(parse(&f, "garbage", NULL, 0) == MN_VEC_ESYNTAX, "api: err NULL", NULL);
    rc = parse(&f, "garbage", tiny, sizeof(tiny));
    check(rc == MN_VEC_ESYNTAX && strlen(tiny) == sizeof(tiny) - 1, "api: message truncated and terminated", tiny);
    tiny[0] = 'x';
    rc = parse(&f, "garbage", tiny, 1);
    check(rc == MN_VEC_ESYNTAX && tiny[0] == '\0', "api: errlen 1", NULL);
    check(mn_vec_get(NULL, "x") == NULL && mn_vec_attr(NULL, "x") == NULL && mn_vec_attr_f(NULL, "x", 3) == 3,
          "api: NULL file in accessors", NULL);
    check(strcmp(mn_vec_strerror(MN_VEC_ETRUNC), "truncated input") == 0 && mn_vec_strerror(-99) != NULL,
          "api: strerror", NULL);

    /* the k-th allocation fails: ENOMEM, nothing leaks, f zeroed, for every k */
    {
        const char* text = HDR "tensor a 1 2\n1 2\ntensor b 1 1\n3\ntensor c 1 1\n4\nend\n";
        size_t k;
        for (k = 1; k <= 3; k++) {
            char what[96];
            g_live = 0;
            g_calls = 0;
            g_fail_at = k;
            rc = parse(&f, text, err, sizeof(err));
            snprintf(what, sizeof(what), "api: allocation %lu of 3 fails", (unsigned long)k);
            check(rc == MN_VEC_ENOMEM && is_zero(&f) && g_live == 0, what, err);
        }
        g_fail_at = 0;
    }

    /* load: a missing file is EIO with the path in the message, and the read buffer is
       released on the out-of-memory path as well */
    rc = mn_vec_load(&f, "/nonexistent/dir/x.vec", err, sizeof(err));
    check(rc == MN_VEC_EIO && is_zero(&f), "load: missing file", err);
    g_live = 0;
    rc = mn_vec_load(&f, "reference/vectors/attn_causal.vec", err, sizeof(err));
    if (rc == MN_VEC_EIO) {
        printf("note: reference/vectors/attn_causal.vec not found (run from the repo root); load test skipped\n");
    } else {
        const mn_vec_tensor* q = mn_vec_get(&f, "q");
        check(rc == 0, "load: attn_causal.vec", err);
        check(strcmp(f.op, "attn_causal") == 0 && f.n_tensor == 8 && q && q->ndim == 4 && q->n == 2 * 64 * 2 * 16,
              "load: attn_causal.vec contents", NULL);
        check(mn_vec_attr_f(&f, "scale", 0) == 0.2, "load: attn_causal.vec scale", NULL);
        mn_vec_free(&f);
        check(g_live == 0, "load: no leak", NULL);
        /* the read buffer's allocation fails */
        g_calls = 0;
        g_fail_at = 1;
        rc = mn_vec_load(&f, "reference/vectors/attn_causal.vec", err, sizeof(err));
        g_fail_at = 0;
        check(rc == MN_VEC_ENOMEM && is_zero(&f) && g_live == 0, "load: out of memory", err);
    }
}

int main(void)
{
    test_good();
    test_bad();
    test_api();
    check(g_live == 0, "no blocks outstanding at exit", NULL);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
