/* vecfile.h - reader for the mesanet golden-vector text format (.vec)

   Single-header library in the stb style. In exactly ONE C or C++ file write

       #define MN_VECFILE_IMPLEMENTATION
       #include "vecfile.h"

   and include it without the define everywhere else. Compiles as C99 and as C++.

   ---------------------------------------------------------------------------------------------
   THE FORMAT (reference/vectors/README.md section 1 is the authoritative description)

       # comment lines start with '#'
       op <opname>
       source <free text up to the end of the line>
       attr <name> <value>                      (zero or more)
       tensor <name> <ndim> <d0> ... <d_{ndim-1}>
       <d0*...*d_{ndim-1} values, row-major, whitespace separated, any line breaks>
       tensor ...                               (zero or more further tensors)
       end

   What this reader accepts, precisely:
   - Header lines (op, source, attr, tensor, end) are split into tokens at spaces and tabs; a
     trailing '\r' is treated as a space, so CRLF files read fine. Blank lines and comment lines
     (first non-blank character '#') may appear anywhere between header lines, but not inside a
     tensor's block of values.
   - The order is fixed: exactly one `op`, then exactly one `source`, then the `attr` lines, then
     the `tensor` blocks, then exactly one `end`. Any other order, repeated op/source/end, or an
     unknown keyword is an error.
   - Names (op, attr and tensor names) are printable ASCII without spaces; op/attr/tensor names
     are at most 63 bytes, an attr value at most 127 bytes, the source text at most 511 bytes.
     attr values and the source text are the rest of the line with outer blanks removed.
   - At most 32 attrs (distinct names) and 64 tensors (distinct names).
   - 1 <= ndim <= 8; every dimension >= 1; dimensions are plain decimal digits; the element count
     may not exceed MN_VEC_MAX_ELEMS (default 2^28, overridable), checked without overflow.
   - A tensor is followed by exactly that many values. The last value must end its line: extra
     values on the same line are an error, and extra values on later lines show up as an
     "unknown keyword" error that says it looks like a number.
   - A value is any token that strtod() consumes completely, so besides %.17g output it also
     accepts hex floats and the strings "inf", "infinity" and "nan" (any case). NaN and infinity
     are therefore accepted on input, on purpose: the reader stores what the file says and leaves
     judging the numbers to the caller. A finite value too large for a double ("1e999") is
     rejected; values that underflow to subnormals or zero are accepted. Each token is copied to
     a local NUL-terminated buffer (at most 63 bytes) before strtod sees it, so the input buffer
     never has to be NUL-terminated. strtod follows LC_NUMERIC: keep the "C" locale (the default
     unless the program calls setlocale).
   - After `end` only whitespace may follow (the generator writes a single '\n').

   ---------------------------------------------------------------------------------------------
   API

       int  mn_vec_parse(mn_vec_file* f, const char* buf, size_t len, char* err, size_t errlen);
       int  mn_vec_load (mn_vec_file* f, const char* path, char* err, size_t errlen);
       void mn_vec_free (mn_vec_file* f);
       const mn_vec_tensor* mn_vec_get(const mn_vec_file* f, const char* name);     NULL if absent
       const char* mn_vec_attr  (const mn_vec_file* f, const char* name);           NULL if absent
       double      mn_vec_attr_f(const mn_vec_file* f, const char* name, double dflt);
       const char* mn_vec_strerror(int code);

   parse and load return 0 (MN_VEC_OK) or one of the negative MN_VEC_E* codes below, and write a
   one-line message (with the line number where it applies) into err when err != NULL and
   errlen > 0. On error every allocation has been freed and *f is all zero bits, so calling
   mn_vec_free on it is harmless. On success release the tensors with mn_vec_free(f), which also
   zeroes *f. parse reads at most len bytes of buf. Nothing here calls exit() or prints.

   mn_vec_file is about 17 KB; it is fine on the stack of a tool but not inside a deep recursion.

   ---------------------------------------------------------------------------------------------
   CONFIGURATION (define before including the implementation)

       MN_VEC_MALLOC(sz), MN_VEC_FREE(p)   allocator; define both or neither (default malloc/free)
       MN_VEC_MAX_ELEMS                   largest element count of one tensor (default 1<<28)
       MN_VEC_MAX_FILE                    largest file mn_vec_load will read (default 1<<30 bytes)
*/
#ifndef MN_VECFILE_H
#define MN_VECFILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MN_VEC_NAME_CAP 64    /* bytes incl. the terminating NUL: names are at most 63 bytes */
#define MN_VEC_VALUE_CAP 128  /* attr values */
#define MN_VEC_SOURCE_CAP 512 /* the source line's text */
#define MN_VEC_MAX_NDIM 8
#define MN_VEC_MAX_ATTR 32
#define MN_VEC_MAX_TENSOR 64

#ifndef MN_VEC_MAX_ELEMS
#define MN_VEC_MAX_ELEMS ((size_t)1 << 28)
#endif

/* Return codes. Every error is negative so callers can test `rc < 0`. */
enum {
    MN_VEC_OK = 0,
    MN_VEC_EARG = -1,     /* NULL f, or NULL buf with len > 0 */
    MN_VEC_EIO = -2,      /* mn_vec_load: cannot open or read the file */
    MN_VEC_ENOMEM = -3,   /* MN_VEC_MALLOC returned NULL */
    MN_VEC_ESYNTAX = -4,  /* missing/unknown/out-of-order keyword, malformed header line */
    MN_VEC_ELIMIT = -5,   /* a name too long, too many attrs/tensors, bad ndim, dimension 0 or too big */
    MN_VEC_ENUMBER = -6,  /* a value that is not a number (or overflows a double) */
    MN_VEC_ETRUNC = -7,   /* too few values for a tensor, or no `end` line: the file was cut short */
    MN_VEC_EDUP = -8,     /* duplicate tensor or attr name */
    MN_VEC_ETRAILING = -9 /* something other than whitespace after `end` */
};

typedef struct {
    char name[MN_VEC_NAME_CAP];
    size_t ndim;                  /* 1..MN_VEC_MAX_NDIM */
    size_t dims[MN_VEC_MAX_NDIM]; /* dims[ndim..] are 0 */
    size_t n;                     /* product of dims: number of values in data */
    double* data;                 /* row-major, last dimension fastest; owned by the mn_vec_file */
} mn_vec_tensor;

typedef struct {
    char op[MN_VEC_NAME_CAP];
    char source[MN_VEC_SOURCE_CAP];
    size_t n_attr;
    struct {
        char name[MN_VEC_NAME_CAP];
        char value[MN_VEC_VALUE_CAP];
    } attr[MN_VEC_MAX_ATTR];
    size_t n_tensor;
    mn_vec_tensor tensor[MN_VEC_MAX_TENSOR]; /* in file order */
} mn_vec_file;

int mn_vec_parse(mn_vec_file* f, const char* buf, size_t len, char* err, size_t errlen);
int mn_vec_load(mn_vec_file* f, const char* path, char* err, size_t errlen);
void mn_vec_free(mn_vec_file* f);
const mn_vec_tensor* mn_vec_get(const mn_vec_file* f, const char* name);
const char* mn_vec_attr(const mn_vec_file* f, const char* name);
/* The attr parsed as a number; dflt when it is absent or not entirely a number. */
double mn_vec_attr_f(const mn_vec_file* f, const char* name, double dflt);
/* A short constant description of a return code ("ok", "syntax error", ...). */
const char* mn_vec_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* MN_VECFILE_H */

/* ============================================================================================= */
#ifdef MN_VECFILE_IMPLEMENTATION
#ifndef MN_VECFILE_IMPLEMENTATION_DONE
#define MN_VECFILE_IMPLEMENTATION_DONE

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stb convention: overriding only one of the pair would pair a custom malloc with libc free. */
#if defined(MN_VEC_MALLOC) && defined(MN_VEC_FREE)
#elif !defined(MN_VEC_MALLOC) && !defined(MN_VEC_FREE)
#define MN_VEC_MALLOC(sz) malloc(sz)
#define MN_VEC_FREE(p) free(p)
#else
#error "vecfile.h: define both MN_VEC_MALLOC and MN_VEC_FREE, or neither"
#endif

#ifndef MN_VEC_MAX_FILE
#define MN_VEC_MAX_FILE ((size_t)1 << 30)
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MN_VEC__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MN_VEC__PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Parser state: a cursor over buf[0, len) plus where messages go. `line` is the 1-based line
   number of buf[pos]; it is kept up to date by every function that steps over a '\n'. */
typedef struct {
    const char* buf;
    size_t len;
    size_t pos;
    size_t line;
    char* err;
    size_t errlen;
} mn_vec__in;

static void mn_vec__msg(char* err, size_t errlen, const char* fmt, ...) MN_VEC__PRINTF(3, 4);
static void mn_vec__msg(char* err, size_t errlen, const char* fmt, ...)
{
    va_list ap;
    if (err == NULL || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int mn_vec__isblank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int mn_vec__isspace(char c)
{
    return c == '\n' || mn_vec__isblank(c);
}

/* Bytes allowed in names: printable ASCII except space. Anything else (NUL, control bytes, UTF-8)
   would make the C string differ from the file or garble messages. */
static int mn_vec__isname(char c)
{
    return c > ' ' && c < 0x7f;
}

/* Renders up to 40 bytes of untrusted input as printable text for an error message: the buffer
   is not NUL-terminated and may hold any byte, so it is never printed directly. */
static const char* mn_vec__show(char out[48], const char* s, size_t n)
{
    size_t i, m = n > 40 ? 40 : n;
    for (i = 0; i < m; i++) out[i] = (s[i] >= ' ' && s[i] < 0x7f) ? s[i] : '?';
    if (m < n) {
        out[m++] = '.';
        out[m++] = '.';
        out[m++] = '.';
    }
    out[m] = '\0';
    return out;
}

static int mn_vec__eq(const char* s, size_t n, const char* lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* Next token of a header line held in buf[*p, e): returns 1 and its start/length, or 0 when
   only blanks are left. */
static int mn_vec__token(const char* buf, size_t* p, size_t e, size_t* tb, size_t* tl)
{
    size_t i = *p;
    while (i < e && mn_vec__isblank(buf[i])) i++;
    if (i >= e) {
        *p = i;
        return 0;
    }
    *tb = i;
    while (i < e && !mn_vec__isblank(buf[i])) i++;
    *tl = i - *tb;
    *p = i;
    return 1;
}

/* Copies a name token, checking length and characters. what = "op", "attr", "tensor". */
static int mn_vec__name(mn_vec__in* in, size_t line, char* dst, size_t cap, const char* s,
                        size_t n, const char* what)
{
    char show[48];
    size_t i;
    if (n >= cap) {
        mn_vec__msg(in->err, in->errlen, "line %lu: %s name '%s' is %lu bytes long, at most %lu allowed",
                    (unsigned long)line, what, mn_vec__show(show, s, n), (unsigned long)n,
                    (unsigned long)(cap - 1));
        return MN_VEC_ELIMIT;
    }
    for (i = 0; i < n; i++) {
        if (!mn_vec__isname(s[i])) {
            mn_vec__msg(in->err, in->errlen,
                        "line %lu: %s name '%s' contains a byte that is not printable ASCII (0x%02x)",
                        (unsigned long)line, what, mn_vec__show(show, s, n), (unsigned)(unsigned char)s[i]);
            return MN_VEC_ESYNTAX;
        }
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    return MN_VEC_OK;
}

/* Copies the rest of a header line (source text, attr value) with outer blanks trimmed. Tabs
   and bytes >= 0x80 are kept; other control bytes (NUL included) are refused. */
static int mn_vec__rest(mn_vec__in* in, size_t line, char* dst, size_t cap, size_t b, size_t e,
                        const char* what)
{
    char show[48];
    size_t i;
    while (b < e && mn_vec__isblank(in->buf[b])) b++;
    while (e > b && mn_vec__isblank(in->buf[e - 1])) e--;
    if (b == e) {
        mn_vec__msg(in->err, in->errlen, "line %lu: %s is empty", (unsigned long)line, what);
        return MN_VEC_ESYNTAX;
    }
    if (e - b >= cap) {
        mn_vec__msg(in->err, in->errlen, "line %lu: %s is %lu bytes long, at most %lu allowed",
                    (unsigned long)line, what, (unsigned long)(e - b), (unsigned long)(cap - 1));
        return MN_VEC_ELIMIT;
    }
    for (i = b; i < e; i++) {
        unsigned char c = (unsigned char)in->buf[i];
        if ((c < ' ' && c != '\t') || c == 0x7f) {
            mn_vec__msg(in->err, in->errlen, "line %lu: %s '%s' contains the control byte 0x%02x",
                        (unsigned long)line, what, mn_vec__show(show, in->buf + b, e - b), (unsigned)c);
            return MN_VEC_ESYNTAX;
        }
    }
    memcpy(dst, in->buf + b, e - b);
    dst[e - b] = '\0';
    return MN_VEC_OK;
}

/* Plain decimal digits to size_t. Returns 0 on success, -1 if not digits, -2 on overflow. */
static int mn_vec__size(const char* s, size_t n, size_t* out)
{
    size_t i, v = 0, maxv = (size_t)-1;
    if (n == 0) return -1;
    for (i = 0; i < n; i++) {
        size_t d;
        if (s[i] < '0' || s[i] > '9') return -1;
        d = (size_t)(s[i] - '0');
        if (v > (maxv - d) / 10) return -2;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Parses one number token. Returns 0 and the value, or -1 if strtod does not consume all of it,
   -2 if it overflows a double, -3 if it is longer than any sensible number. */
static int mn_vec__number(const char* s, size_t n, double* out)
{
    /* %.17g needs at most 24 bytes; 63 leaves room for other spellings without being a risk */
    char tmp[64];
    char* end = NULL;
    double d;
    if (n == 0) return -1;
    if (n >= sizeof(tmp)) return -3;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    errno = 0;
    d = strtod(tmp, &end);
    if (end != tmp + n) return -1;
    /* ERANGE also flags harmless underflow (subnormals); only overflow to +-HUGE_VAL is an error */
    if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL)) return -2;
    *out = d;
    return 0;
}

/* Reads the next header line into [*b, *e) (without its '\n') and its number into *line,
   skipping blank and comment lines. Returns 0 at the end of the input. */
static int mn_vec__header_line(mn_vec__in* in, size_t* b, size_t* e, size_t* line)
{
    while (in->pos < in->len) {
        size_t s = in->pos, i = in->pos, ln = in->line;
        while (i < in->len && in->buf[i] != '\n') i++;
        in->pos = i < in->len ? i + 1 : i;
        in->line++;
        while (s < i && mn_vec__isblank(in->buf[s])) s++;
        if (s == i || in->buf[s] == '#') continue;
        *b = s;
        *e = i;
        *line = ln;
        return 1;
    }
    return 0;
}

/* Looks at a header token that is not a keyword and writes the best explanation for it. */
static int mn_vec__unknown(mn_vec__in* in, size_t line, const char* s, size_t n, const char* expected,
                           const char* last_tensor)
{
    char show[48];
    double d;
    if (last_tensor != NULL && mn_vec__number(s, n, &d) == 0) {
        mn_vec__msg(in->err, in->errlen,
                    "line %lu: found the number '%s' where %s was expected (too many values for tensor '%s'?)",
                    (unsigned long)line, mn_vec__show(show, s, n), expected, last_tensor);
    } else {
        mn_vec__msg(in->err, in->errlen, "line %lu: unknown keyword '%s', expected %s",
                    (unsigned long)line, mn_vec__show(show, s, n), expected);
    }
    return MN_VEC_ESYNTAX;
}

/* Parses a `tensor` header line (tokens after the keyword are in buf[p, e)) and then its values.
   The tensor is added to f before the values are read so that the error path frees its data. */
static int mn_vec__tensor(mn_vec__in* in, mn_vec_file* f, size_t line, size_t p, size_t e)
{
    char show[48];
    size_t tb = 0, tl = 0, i, ndim = 0, n = 1, left;
    mn_vec_tensor* t;
    int rc;

    /* t is filled in place in the next free slot; until n_tensor is bumped below, error paths
       must clear it themselves (it owns no memory yet) */
    if (f->n_tensor >= MN_VEC_MAX_TENSOR) {
        mn_vec__msg(in->err, in->errlen, "line %lu: more than %d tensors", (unsigned long)line,
                    MN_VEC_MAX_TENSOR);
        return MN_VEC_ELIMIT;
    }
    t = &f->tensor[f->n_tensor];
    if (!mn_vec__token(in->buf, &p, e, &tb, &tl)) {
        mn_vec__msg(in->err, in->errlen, "line %lu: expected 'tensor <name> <ndim> <dims...>', the name is missing",
                    (unsigned long)line);
        return MN_VEC_ESYNTAX;
    }
    rc = mn_vec__name(in, line, t->name, sizeof(t->name), in->buf + tb, tl, "tensor");
    if (rc != MN_VEC_OK) return rc;
    /* quadratic, but there are at most 64 tensors */
    for (i = 0; i < f->n_tensor; i++) {
        if (strcmp(f->tensor[i].name, t->name) == 0) {
            mn_vec__msg(in->err, in->errlen, "line %lu: duplicate tensor '%s'", (unsigned long)line, t->name);
            memset(t, 0, sizeof(*t));
            return MN_VEC_EDUP;
        }
    }
    if (!mn_vec__token(in->buf, &p, e, &tb, &tl)) {
        mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': ndim is missing", (unsigned long)line, t->name);
        memset(t, 0, sizeof(*t));
        return MN_VEC_ESYNTAX;
    }
    rc = mn_vec__size(in->buf + tb, tl, &ndim);
    if (rc == -1) {
        mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': ndim '%s' is not a non-negative integer",
                    (unsigned long)line, t->name, mn_vec__show(show, in->buf + tb, tl));
        memset(t, 0, sizeof(*t));
        return MN_VEC_ESYNTAX;
    }
    if (rc != 0 || ndim == 0 || ndim > MN_VEC_MAX_NDIM) {
        mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': ndim %s is outside 1..%d",
                    (unsigned long)line, t->name, mn_vec__show(show, in->buf + tb, tl), MN_VEC_MAX_NDIM);
        memset(t, 0, sizeof(*t));
        return MN_VEC_ELIMIT;
    }
    for (i = 0; i < ndim; i++) {
        size_t d = 0;
        if (!mn_vec__token(in->buf, &p, e, &tb, &tl)) {
            mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': ndim is %lu but only %lu dimensions follow",
                        (unsigned long)line, t->name, (unsigned long)ndim, (unsigned long)i);
            memset(t, 0, sizeof(*t));
            return MN_VEC_ESYNTAX;
        }
        rc = mn_vec__size(in->buf + tb, tl, &d);
        if (rc == -1) {
            mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': dimension %lu '%s' is not a non-negative integer",
                        (unsigned long)line, t->name, (unsigned long)i, mn_vec__show(show, in->buf + tb, tl));
            memset(t, 0, sizeof(*t));
            return MN_VEC_ESYNTAX;
        }
        if (rc == 0 && d == 0) {
            mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': dimension %lu is 0 (every dimension must be >= 1)",
                        (unsigned long)line, t->name, (unsigned long)i);
            memset(t, 0, sizeof(*t));
            return MN_VEC_ELIMIT;
        }
        /* n * d <= MAX  <=>  n <= MAX / d (integer division), so this test cannot overflow */
        if (rc != 0 || d > MN_VEC_MAX_ELEMS || n > MN_VEC_MAX_ELEMS / d) {
            mn_vec__msg(in->err, in->errlen,
                        "line %lu: tensor '%s' has more than %lu elements (dimension %lu is '%s')",
                        (unsigned long)line, t->name, (unsigned long)MN_VEC_MAX_ELEMS, (unsigned long)i,
                        mn_vec__show(show, in->buf + tb, tl));
            memset(t, 0, sizeof(*t));
            return MN_VEC_ELIMIT;
        }
        t->dims[i] = d;
        n *= d;
    }
    if (mn_vec__token(in->buf, &p, e, &tb, &tl)) {
        mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': ndim is %lu but more dimensions follow ('%s')",
                    (unsigned long)line, t->name, (unsigned long)ndim, mn_vec__show(show, in->buf + tb, tl));
        memset(t, 0, sizeof(*t));
        return MN_VEC_ESYNTAX;
    }
    t->ndim = ndim;
    t->n = n;

    /* n values need at least 2n-1 bytes (a byte each plus separators). Checking that before the
       allocation keeps a short corrupt file from asking for gigabytes: memory stays within
       4 x the input size. */
    left = in->len - in->pos;
    if (n > left / 2 + 1) {
        mn_vec__msg(in->err, in->errlen,
                    "line %lu: tensor '%s' declares %lu values but only %lu bytes of input remain (file truncated?)",
                    (unsigned long)line, t->name, (unsigned long)n, (unsigned long)left);
        memset(t, 0, sizeof(*t));
        return MN_VEC_ETRUNC;
    }
    t->data = (double*)MN_VEC_MALLOC(n * sizeof(double));
    if (t->data == NULL) {
        mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s': out of memory for %lu values",
                    (unsigned long)line, t->name, (unsigned long)n);
        memset(t, 0, sizeof(*t));
        return MN_VEC_ENOMEM;
    }
    f->n_tensor++; /* from here on the caller's cleanup owns t->data */

    /* Values: whitespace-separated tokens; line breaks carry no meaning except for counting. */
    for (i = 0; i < n; i++) {
        size_t b;
        while (in->pos < in->len && mn_vec__isspace(in->buf[in->pos])) {
            if (in->buf[in->pos] == '\n') in->line++;
            in->pos++;
        }
        if (in->pos >= in->len) {
            mn_vec__msg(in->err, in->errlen,
                        "line %lu: tensor '%s' (line %lu) expects %lu values, the input ends after %lu "
                        "(file truncated?)",
                        (unsigned long)in->line, t->name, (unsigned long)line, (unsigned long)n, (unsigned long)i);
            return MN_VEC_ETRUNC;
        }
        /* the token ends at whitespace or at len, never at a NUL: the buffer may lack one */
        b = in->pos;
        while (in->pos < in->len && !mn_vec__isspace(in->buf[in->pos])) in->pos++;
        rc = mn_vec__number(in->buf + b, in->pos - b, &t->data[i]);
        if (rc != 0) {
            const char* s = in->buf + b;
            size_t sl = in->pos - b;
            /* a keyword here almost always means the block is short, not that a value is bad */
            if (mn_vec__eq(s, sl, "tensor") || mn_vec__eq(s, sl, "end") || mn_vec__eq(s, sl, "attr")) {
                mn_vec__msg(in->err, in->errlen,
                            "line %lu: tensor '%s' (line %lu) expects %lu values, found '%s' after %lu "
                            "(too few values)",
                            (unsigned long)in->line, t->name, (unsigned long)line, (unsigned long)n,
                            mn_vec__show(show, s, sl), (unsigned long)i);
                return MN_VEC_ETRUNC;
            }
            mn_vec__msg(in->err, in->errlen, "line %lu: tensor '%s' value %lu of %lu: '%s' %s",
                        (unsigned long)in->line, t->name, (unsigned long)i, (unsigned long)n,
                        mn_vec__show(show, s, sl),
                        rc == -2 ? "overflows a double" : rc == -3 ? "is too long for a number" : "is not a number");
            return MN_VEC_ENUMBER;
        }
    }
    /* The block must end its line, so that the next header starts on a fresh line. */
    while (in->pos < in->len && mn_vec__isblank(in->buf[in->pos])) in->pos++;
    if (in->pos < in->len && in->buf[in->pos] != '\n') {
        size_t b = in->pos, m = 0;
        while (b + m < in->len && !mn_vec__isspace(in->buf[b + m])) m++;
        mn_vec__msg(in->err, in->errlen,
                    "line %lu: tensor '%s' has more than its %lu values ('%s' follows the last one)",
                    (unsigned long)in->line, t->name, (unsigned long)n, mn_vec__show(show, in->buf + b, m));
        return MN_VEC_ESYNTAX;
    }
    if (in->pos < in->len) {
        in->pos++;
        in->line++;
    }
    return MN_VEC_OK;
}

/* The body of mn_vec_parse; on error the caller frees and zeroes f. */
static int mn_vec__parse(mn_vec__in* in, mn_vec_file* f)
{
    /* where we are in the fixed order op -> source -> attr* -> tensor* -> end */
    enum { WANT_OP, WANT_SOURCE, IN_ATTRS, IN_TENSORS } state = WANT_OP;
    size_t b = 0, e = 0, line = 0, p, tb = 0, tl = 0, i;
    char show[48];
    int rc;

    for (;;) {
        const char* kw;
        const char* last = f->n_tensor > 0 ? f->tensor[f->n_tensor - 1].name : NULL;
        const char* expected = state == WANT_OP       ? "'op <name>' as the first line"
                               : state == WANT_SOURCE ? "'source ...' after the op line"
                               : state == IN_ATTRS    ? "'attr', 'tensor' or 'end'"
                                                      : "'tensor' or 'end'";
        /* running out of input is an error in every state: only `end` finishes a file */
        if (!mn_vec__header_line(in, &b, &e, &line)) {
            if (state == WANT_OP) {
                mn_vec__msg(in->err, in->errlen, "line %lu: missing the 'op <name>' line (empty input?)",
                            (unsigned long)in->line);
            } else if (state == WANT_SOURCE) {
                mn_vec__msg(in->err, in->errlen, "line %lu: missing the 'source' line", (unsigned long)in->line);
            } else {
                mn_vec__msg(in->err, in->errlen, "line %lu: missing the final 'end' line (file truncated?)",
                            (unsigned long)in->line);
                return MN_VEC_ETRUNC;
            }
            return MN_VEC_ESYNTAX;
        }
        /* dispatch on the first token; each keyword checks that it is allowed in this state, so
           the error says what was expected instead of just "syntax error" */
        p = b;
        mn_vec__token(in->buf, &p, e, &tb, &tl); /* cannot fail: the line is not blank */
        kw = in->buf + tb;

        if (mn_vec__eq(kw, tl, "op")) {
            if (state != WANT_OP) {
                mn_vec__msg(in->err, in->errlen, "line %lu: a second 'op' line (expected %s)", (unsigned long)line,
                            expected);
                return MN_VEC_ESYNTAX;
            }
            if (!mn_vec__token(in->buf, &p, e, &tb, &tl)) {
                mn_vec__msg(in->err, in->errlen, "line %lu: 'op' without a name", (unsigned long)line);
                return MN_VEC_ESYNTAX;
            }
            rc = mn_vec__name(in, line, f->op, sizeof(f->op), in->buf + tb, tl, "op");
            if (rc != MN_VEC_OK) return rc;
            if (mn_vec__token(in->buf, &p, e, &tb, &tl)) {
                mn_vec__msg(in->err, in->errlen, "line %lu: unexpected '%s' after the op name", (unsigned long)line,
                            mn_vec__show(show, in->buf + tb, tl));
                return MN_VEC_ESYNTAX;
            }
            state = WANT_SOURCE;
        } else if (state == WANT_OP) {
            mn_vec__msg(in->err, in->errlen, "line %lu: expected %s, found '%s'", (unsigned long)line, expected,
                        mn_vec__show(show, kw, tl));
            return MN_VEC_ESYNTAX;
        } else if (mn_vec__eq(kw, tl, "source")) {
            if (state != WANT_SOURCE) {
                mn_vec__msg(in->err, in->errlen, "line %lu: 'source' out of place (expected %s)", (unsigned long)line,
                            expected);
                return MN_VEC_ESYNTAX;
            }
            rc = mn_vec__rest(in, line, f->source, sizeof(f->source), p, e, "the source text");
            if (rc != MN_VEC_OK) return rc;
            state = IN_ATTRS;
        } else if (state == WANT_SOURCE) {
            mn_vec__msg(in->err, in->errlen, "line %lu: expected %s, found '%s'", (unsigned long)line, expected,
                        mn_vec__show(show, kw, tl));
            return MN_VEC_ESYNTAX;
        } else if (mn_vec__eq(kw, tl, "attr")) {
            if (state != IN_ATTRS) {
                mn_vec__msg(in->err, in->errlen, "line %lu: 'attr' after a tensor (attrs come before all tensors)",
                            (unsigned long)line);
                return MN_VEC_ESYNTAX;
            }
            if (f->n_attr >= MN_VEC_MAX_ATTR) {
                mn_vec__msg(in->err, in->errlen, "line %lu: more than %d attrs", (unsigned long)line, MN_VEC_MAX_ATTR);
                return MN_VEC_ELIMIT;
            }
            if (!mn_vec__token(in->buf, &p, e, &tb, &tl)) {
                mn_vec__msg(in->err, in->errlen, "line %lu: 'attr' without a name", (unsigned long)line);
                return MN_VEC_ESYNTAX;
            }
            /* written into the next slot; n_attr only grows once the name is known to be new */
            rc = mn_vec__name(in, line, f->attr[f->n_attr].name, sizeof(f->attr[0].name), in->buf + tb, tl, "attr");
            if (rc == MN_VEC_OK) rc = mn_vec__rest(in, line, f->attr[f->n_attr].value, sizeof(f->attr[0].value), p, e,
                                                   "the attr value");
            for (i = 0; rc == MN_VEC_OK && i < f->n_attr; i++) {
                if (strcmp(f->attr[i].name, f->attr[f->n_attr].name) == 0) {
                    mn_vec__msg(in->err, in->errlen, "line %lu: duplicate attr '%s'", (unsigned long)line,
                                f->attr[i].name);
                    rc = MN_VEC_EDUP;
                }
            }
            if (rc != MN_VEC_OK) return rc;
            f->n_attr++;
        } else if (mn_vec__eq(kw, tl, "tensor")) {
            state = IN_TENSORS;
            rc = mn_vec__tensor(in, f, line, p, e);
            if (rc != MN_VEC_OK) return rc;
        } else if (mn_vec__eq(kw, tl, "end")) {
            if (mn_vec__token(in->buf, &p, e, &tb, &tl)) {
                mn_vec__msg(in->err, in->errlen, "line %lu: unexpected '%s' after 'end'", (unsigned long)line,
                            mn_vec__show(show, in->buf + tb, tl));
                return MN_VEC_ETRAILING;
            }
            /* the header reader already stepped past end's '\n'; only whitespace may remain */
            for (i = in->pos; i < in->len; i++) {
                if (in->buf[i] == '\n') in->line++;
                if (!mn_vec__isspace(in->buf[i])) {
                    size_t m = 0;
                    while (i + m < in->len && !mn_vec__isspace(in->buf[i + m])) m++;
                    mn_vec__msg(in->err, in->errlen, "line %lu: '%s' after the 'end' line (nothing may follow it)",
                                (unsigned long)in->line, mn_vec__show(show, in->buf + i, m));
                    return MN_VEC_ETRAILING;
                }
            }
            return MN_VEC_OK;
        } else {
            return mn_vec__unknown(in, line, kw, tl, expected, last);
        }
    }
}

int mn_vec_parse(mn_vec_file* f, const char* buf, size_t len, char* err, size_t errlen)
{
    mn_vec__in in;
    int rc;
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (f == NULL) {
        mn_vec__msg(err, errlen, "mn_vec_parse: f is NULL");
        return MN_VEC_EARG;
    }
    /* zero first, so that f is in the documented state on every return path */
    memset(f, 0, sizeof(*f));
    if (buf == NULL && len > 0) {
        mn_vec__msg(err, errlen, "mn_vec_parse: buf is NULL but len is %lu", (unsigned long)len);
        return MN_VEC_EARG;
    }
    in.buf = buf;
    in.len = buf == NULL ? 0 : len;
    in.pos = 0;
    in.line = 1;
    in.err = err;
    in.errlen = errlen;
    /* all failure paths of the parser just return: cleanup happens once, here */
    rc = mn_vec__parse(&in, f);
    if (rc != MN_VEC_OK) mn_vec_free(f); /* frees what was read so far and zeroes f */
    return rc;
}

int mn_vec_load(mn_vec_file* f, const char* path, char* err, size_t errlen)
{
    /* Reads in growing chunks rather than trusting fseek/ftell, so pipes and /dev/stdin work too. */
    FILE* fp;
    char* buf = NULL;
    size_t cap = 0, len = 0;
    int rc;
    if (err != NULL && errlen > 0) err[0] = '\0';
    if (f == NULL || path == NULL) {
        mn_vec__msg(err, errlen, "mn_vec_load: %s is NULL", f == NULL ? "f" : "path");
        return MN_VEC_EARG;
    }
    memset(f, 0, sizeof(*f));
    fp = fopen(path, "rb");
    if (fp == NULL) {
        mn_vec__msg(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return MN_VEC_EIO;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            size_t ncap = cap == 0 ? ((size_t)1 << 16) : cap * 2;
            char* nbuf;
            if (cap >= MN_VEC_MAX_FILE) {
                mn_vec__msg(err, errlen, "'%s' is larger than %lu bytes", path, (unsigned long)MN_VEC_MAX_FILE);
                MN_VEC_FREE(buf);
                fclose(fp);
                return MN_VEC_ELIMIT;
            }
            nbuf = (char*)MN_VEC_MALLOC(ncap);
            if (nbuf == NULL) {
                mn_vec__msg(err, errlen, "out of memory reading '%s'", path);
                MN_VEC_FREE(buf);
                fclose(fp);
                return MN_VEC_ENOMEM;
            }
            if (len > 0) memcpy(nbuf, buf, len);
            MN_VEC_FREE(buf);
            buf = nbuf;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    /* fread returning 0 means EOF or an error; only ferror tells them apart */
    if (ferror(fp)) {
        mn_vec__msg(err, errlen, "error reading '%s'", path);
        MN_VEC_FREE(buf);
        fclose(fp);
        return MN_VEC_EIO;
    }
    fclose(fp);
    rc = mn_vec_parse(f, buf, len, err, errlen);
    MN_VEC_FREE(buf);
    return rc;
}

void mn_vec_free(mn_vec_file* f)
{
    size_t i;
    if (f == NULL) return;
    /* the bound on i guards against a caller passing an uninitialised struct by mistake */
    for (i = 0; i < f->n_tensor && i < MN_VEC_MAX_TENSOR; i++) MN_VEC_FREE(f->tensor[i].data);
    memset(f, 0, sizeof(*f));
}

const mn_vec_tensor* mn_vec_get(const mn_vec_file* f, const char* name)
{
    size_t i;
    if (f == NULL || name == NULL) return NULL;
    for (i = 0; i < f->n_tensor; i++)
        if (strcmp(f->tensor[i].name, name) == 0) return &f->tensor[i];
    return NULL;
}

const char* mn_vec_attr(const mn_vec_file* f, const char* name)
{
    size_t i;
    if (f == NULL || name == NULL) return NULL;
    for (i = 0; i < f->n_attr; i++)
        if (strcmp(f->attr[i].name, name) == 0) return f->attr[i].value;
    return NULL;
}

double mn_vec_attr_f(const mn_vec_file* f, const char* name, double dflt)
{
    const char* v = mn_vec_attr(f, name);
    double d;
    if (v == NULL) return dflt;
    /* the stored value is NUL-terminated and trimmed, so it can go through the token parser as is */
    return mn_vec__number(v, strlen(v), &d) == 0 ? d : dflt;
}

const char* mn_vec_strerror(int code)
{
    switch (code) {
    case MN_VEC_OK: return "ok";
    case MN_VEC_EARG: return "invalid argument";
    case MN_VEC_EIO: return "i/o error";
    case MN_VEC_ENOMEM: return "out of memory";
    case MN_VEC_ESYNTAX: return "syntax error";
    case MN_VEC_ELIMIT: return "limit exceeded";
    case MN_VEC_ENUMBER: return "bad number";
    case MN_VEC_ETRUNC: return "truncated input";
    case MN_VEC_EDUP: return "duplicate name";
    case MN_VEC_ETRAILING: return "data after end";
    default: return "unknown error";
    }
}

#ifdef __cplusplus
}
#endif

#endif /* MN_VECFILE_IMPLEMENTATION_DONE */
#endif /* MN_VECFILE_IMPLEMENTATION */
