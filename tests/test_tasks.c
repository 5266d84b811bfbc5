// Tests of the synthetic task generators (wip/tasks.h, the >>tasks section of mesanet.h):
//   - every example's labels against an independent computation written differently from the
//     generator: parity by counting ones, modarith by a shunting-yard evaluator over the tokens,
//     modarith_brackets by a recursive-descent parser, z5 by plain sums, s3 by composing
//     permutation arrays, majority(_count) by counting, anbn(cn) by the string's block structure,
//     mqar by scanning for earlier occurrences of each key;
//   - structure common to all tasks: BOS first, n <= len and as long as the grammar allows, PAD
//     and y = -1 after n, every token and target inside the vocabulary, the FINAL metric's last
//     scored position is n-1; lengths 2..40, 64, 127..129, 511, 512, 2047, 2048;
//   - determinism (same seed, same example and rng state), different seeds differ;
//   - mn_task_train_len: range, valid lengths only, both ends reached, fixed for z5 and mqar;
//   - the task table (names, order, vocab, metric, chance), bad input (NULL, unknown names,
//     too-short len leaves the buffers untouched), copies of a task entry;
//   - label distributions: parity, z5, s3, modarith, brackets answers spread; majority answers
//     cover the 4 symbols; majority_count: the symbols each example uses, the answers trained at
//     <= 128 against those at 512 and 2048, clipping rates; mqar slot law against p(g) ~ (g+1)^-0.99.
// cc -std=c99 -O2 -Wall -Wextra -Werror -I. -Itests tests/test_tasks.c -o build/test_tasks -lm
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include "testutil.h"
#include <stdlib.h>
#include <string.h>

#define MAXLEN 2048
static int X[MAXLEN], Y[MAXLEN], X2[MAXLEN], Y2[MAXLEN];

// ------------------------------------------------------------------ shared structure checks
// the n the grammar allows for len (written from the task descriptions, not the generator)
static size_t expected_n(const char* name, size_t len) {
    if (strcmp(name, "modarith") == 0) return len % 2 ? len : len - 1;
    if (strcmp(name, "anbn") == 0) return 2 * ((len - 2) / 2) + 2;      // the longest; samples draw k in the upper half
    if (strcmp(name, "anbncn") == 0) return 3 * ((len - 2) / 3) + 2;
    return len;
}
static size_t shortest(const char* name) {
    const char* two[] = { "parity", "z5", "s3" };
    const char* three[] = { "modarith", "modarith_brackets", "majority", "majority_count" };
    size_t i;
    for (i = 0; i < 3; i++) if (strcmp(name, two[i]) == 0) return 2;
    for (i = 0; i < 4; i++) if (strcmp(name, three[i]) == 0) return 3;
    return strcmp(name, "anbn") == 0 ? 4 : 5;
}
// NULL if the example has the shape every task shares, else what is wrong
static const char* common_check(const mn_task* task, const int* x, const int* y, size_t n, size_t len) {
    size_t t, last = (size_t)-1, scored = 0;
    if (n == 0 || n > len) return "n out of range";
    if (strncmp(task->name, "anbn", 4) != 0 && n != expected_n(task->name, len))
        return "n is not the longest the grammar allows";
    if (x[0] != 1) return "x[0] is not BOS (1)";
    for (t = 0; t < n; t++) {
        if (x[t] <= 0 || x[t] >= task->vocab_size) return "input token PAD or outside the vocabulary";
        if (y[t] < -1 || y[t] >= task->vocab_size) return "target outside the vocabulary";
        if (y[t] == 0) return "target PAD";
        if (y[t] >= 0) { last = t; scored++; }
    }
    for (t = n; t < len; t++) if (x[t] != 0 || y[t] != -1) return "padding is not x=0, y=-1";
    if (scored == 0) return "nothing scored";
    if (task->metric == MN_METRIC_FINAL && last != n - 1) return "FINAL metric: last scored position is not n-1";
    return NULL;
}

// ------------------------------------------------------------------ independent label checks
// parity: y[t] = 2 + (number of ones among bits 1..t) mod 2
static const char* check_parity(const int* x, const int* y, size_t n) {
    size_t t, ones = 0;
    if (y[0] != -1) return "BOS scored";
    for (t = 1; t < n; t++) {
        if (x[t] != 2 && x[t] != 3) return "not a bit";
        ones += (size_t)(x[t] == 3);
        if (y[t] != (ones % 2 ? 3 : 2)) return "running parity wrong";
    }
    return NULL;
}

// modarith: shunting-yard with an operand stack and an operator stack (* before +,-; left assoc)
static int sy_vals[MAXLEN], sy_ops[MAXLEN];
static int apply_op(int a, int b, int op) {
    long v = op == 3 ? (long)a + b : op == 4 ? (long)a - b : (long)a * b;
    return (int)(((v % 5) + 5) % 5);
}
static int prec(int op) { return op == 5 ? 2 : 1; }
static const char* check_modarith(const int* x, const int* y, size_t n) {
    size_t t, nv = 0, no = 0;
    if (n % 2 == 0) return "even length";
    if (x[n - 1] != 2) return "last input is not '='";
    for (t = 1; t + 1 < n; t++) {
        int tok = x[t];
        if (t % 2 == 1) {
            if (tok < 6 || tok > 10) return "digit expected";
            sy_vals[nv++] = tok - 6;
        } else {
            if (tok < 3 || tok > 5) return "operator expected";
            while (no > 0 && prec(sy_ops[no - 1]) >= prec(tok)) {
                int b = sy_vals[--nv], a = sy_vals[--nv];
                sy_vals[nv++] = apply_op(a, b, sy_ops[--no]);
            }
            sy_ops[no++] = tok;
        }
    }
    while (no > 0) { int b = sy_vals[--nv], a = sy_vals[--nv]; sy_vals[nv++] = apply_op(a, b, sy_ops[--no]); }
    if (nv != 1) return "malformed expression";
    for (t = 0; t + 1 < n; t++) if (y[t] != -1) return "a position before '=' is scored";
    if (y[n - 1] != 6 + sy_vals[0]) return "answer differs from the shunting-yard value";
    return NULL;
}

// modarith_brackets: operand := digit | '-' digit | '(' operand [op operand] ')'
static const int* rd_tok;
static size_t rd_pos, rd_end, rd_depth, rd_maxdepth;
static int rd_err;
static int rd_operand(void) {
    int v, w, op;
    if (rd_pos >= rd_end) { rd_err = 1; return 0; }
    if (rd_tok[rd_pos] >= 7 && rd_tok[rd_pos] <= 11) return rd_tok[rd_pos++] - 7;
    if (rd_tok[rd_pos] == 4) {                    // unary minus, only before a digit
        rd_pos++;
        if (rd_pos >= rd_end || rd_tok[rd_pos] < 7 || rd_tok[rd_pos] > 11) { rd_err = 1; return 0; }
        return (5 - (rd_tok[rd_pos++] - 7)) % 5;
    }
    if (rd_tok[rd_pos] != 5) { rd_err = 1; return 0; }
    rd_pos++;
    if (++rd_depth > rd_maxdepth) rd_maxdepth = rd_depth;
    v = rd_operand();
    if (!rd_err && rd_pos < rd_end && (rd_tok[rd_pos] == 3 || rd_tok[rd_pos] == 4)) {
        op = rd_tok[rd_pos++];
        w = rd_operand();
        v = op == 3 ? (v + w) % 5 : (v - w + 5) % 5;
    }
    if (rd_pos >= rd_end || rd_tok[rd_pos] != 6) { rd_err = 1; return 0; }
    rd_pos++;
    rd_depth--;
    return v;
}
static const char* check_brackets(const int* x, const int* y, size_t n) {
    size_t t;
    int v;
    if (x[n - 1] != 2) return "last input is not '='";
    rd_tok = x; rd_pos = 1; rd_end = n - 1; rd_err = 0; rd_depth = 0;
    v = rd_operand();
    if (rd_err || rd_pos != n - 1) return "expression does not parse";
    for (t = 0; t + 1 < n; t++) if (y[t] != -1) return "a position before '=' is scored";
    if (y[n - 1] != 7 + v) return "answer differs from the parser's value";
    return NULL;
}

// z5: y[t] = 2 + (sum of elements 1..t) mod 5, from a plain integer sum
static const char* check_z5(const int* x, const int* y, size_t n) {
    size_t t;
    long sum = 0;
    if (y[0] != -1) return "BOS scored";
    for (t = 1; t < n; t++) {
        if (x[t] < 2 || x[t] > 6) return "not an element";
        sum += x[t] - 2;
        if (y[t] != 2 + (int)(sum % 5)) return "running sum wrong";
    }
    return NULL;
}

// s3: permutation arrays in lexicographic order, composed directly: (a o b)[i] = a[b[i]]
static int perms[6][3];
static void make_perms(void) {
    int a, b, c, k = 0;
    for (a = 0; a < 3; a++) for (b = 0; b < 3; b++) for (c = 0; c < 3; c++)
        if (a != b && b != c && a != c) { perms[k][0] = a; perms[k][1] = b; perms[k][2] = c; k++; }
}
static int perm_index(const int* p) {
    int k;
    for (k = 0; k < 6; k++) if (memcmp(perms[k], p, sizeof perms[k]) == 0) return k;
    return -1;
}
static const char* check_s3(const int* x, const int* y, size_t n) {
    int acc[3] = { 0, 1, 2 }, nxt[3], i;
    size_t t;
    if (y[0] != -1) return "BOS scored";
    for (t = 1; t < n; t++) {
        if (x[t] < 2 || x[t] > 7) return "not an element";
        for (i = 0; i < 3; i++) nxt[i] = acc[perms[x[t] - 2][i]];
        memcpy(acc, nxt, sizeof acc);
        if (y[t] != 2 + perm_index(acc)) return "prefix product wrong";
    }
    return NULL;
}

// majority / majority_count: count the symbols (4 for majority; 64 ranked ones for majority_count,
// answered with the symbol whose rank is the top count, at most 64)
static size_t mc_distinct;   // majority_count: how many different symbols the last example used
static const char* check_majority(const int* x, const int* y, size_t n, int count, int* answer) {
    size_t c[64], t, best = 0, A = count ? 64 : 4;
    int s, arg = -1, nbest = 0;
    memset(c, 0, sizeof c);
    if (x[n - 1] != 2) return "last input is not '='";
    for (t = 1; t + 1 < n; t++) {
        if (x[t] < 3 || x[t] >= 3 + (int)A) return "not a symbol";
        c[x[t] - 3]++;
    }
    for (s = 0; s < (int)A; s++) if (c[s] > best) { best = c[s]; arg = s; }
    for (s = 0; s < (int)A; s++) nbest += c[s] == best;
    for (t = 0; t + 1 < n; t++) if (y[t] != -1) return "a position before '=' is scored";
    if (count) {
        size_t rank = best > 64 ? 64 : best;
        if (y[n - 1] != 3 + (int)rank - 1) return "count wrong";
        *answer = (int)rank;
        for (mc_distinct = 0, s = 0; s < 64; s++) mc_distinct += c[s] > 0;
    } else {
        if (nbest != 1) return "the maximum is not unique";
        if (y[n - 1] != 3 + arg) return "majority symbol wrong";
        *answer = arg;
    }
    return NULL;
}

// anbn / anbncn: S, then blocks of a, b, (c) of one length k, then T; scored exactly at the b/c
// inputs, with the next symbol of the string
static const char* check_anbn(const int* x, const int* y, size_t n, size_t len, int blocks) {
    size_t k = 0, t, b;
    while (1 + k < n && x[1 + k] == 2) k++;
    if (k == 0) return "no a block";
    if (n != (size_t)blocks * k + 2) return "length is not blocks*k + 2";
    // k is drawn from the upper half of what fits: kmax = (len-2)/blocks, k in [ceil(kmax/2), kmax]
    if (k > (len - 2) / (size_t)blocks || 2 * k < (len - 2) / (size_t)blocks)
        return "k outside the upper half of what fits";
    for (b = 0; b < (size_t)blocks; b++)
        for (t = 0; t < k; t++) if (x[1 + b * k + t] != 2 + (int)b) return "block structure wrong";
    if (x[n - 1] != 2 + blocks) return "no T at the end";
    for (t = 0; t < n; t++) {
        int want = -1;
        if (x[t] == 3 || (blocks == 3 && x[t] == 4)) {   // a b or c input: the next symbol is forced
            size_t j = (t - 1) % k;                // index inside its block
            int blk = x[t] - 2;
            want = j + 1 < k ? x[t] : (blk + 1 < blocks ? x[t] + 1 : 2 + blocks);
        }
        if (y[t] != want) return "scored positions or targets wrong";
    }
    return NULL;
}

// mqar: keys 3..255, values 256..511; a key seen again is a query whose target is the token
// that followed its first occurrence
static int first_seen[512];
static size_t slot_hist[MAXLEN];
static const char* check_mqar(const int* x, const int* y, size_t n, size_t len) {
    size_t N = len / 16 > 1 ? len / 16 : 1, t, queries = 0;
    size_t q0 = 1 + 2 * N;
    int i;
    if (N > 253) N = 253, q0 = 1 + 2 * N;
    for (i = 0; i < 512; i++) first_seen[i] = -1;
    for (t = 0; t < N; t++) {
        int k = x[1 + 2 * t], v = x[2 + 2 * t];
        if (k < 3 || k > 255) return "key out of range";
        if (v < 256 || v > 511) return "value out of range";
        if (first_seen[k] >= 0 || first_seen[v] >= 0) return "repeated key or value in the context";
        first_seen[k] = (int)(1 + 2 * t);
        first_seen[v] = (int)(2 + 2 * t);
    }
    for (t = 1; t < n; t++) {
        int tok = x[t], want = -1;
        if (t >= q0) {
            if (tok >= 256) return "value in the query region";
            if (tok != 2) {
                if (tok < 3 || first_seen[tok] < 0) return "unknown key in the query region";
                if ((t - q0) % 2 != 0) return "query at an odd offset";
                want = x[first_seen[tok] + 1];
                first_seen[tok] = -2 - (int)t;     // marks "queried": a second query would fail below
                queries++;
                slot_hist[(t - q0) / 2]++;
            }
        }
        if (y[t] != want) return "target differs from the scanned value";
    }
    if (queries != N) return "not every key is queried exactly once";
    return NULL;
}

static int answer_hist[16][65];   // [task][answer]
static const char* check_task(int id, const mn_task* task, const int* x, const int* y, size_t n, size_t len) {
    const char* e = common_check(task, x, y, n, len);
    int a = 0;
    if (e) return e;
    switch (id) {
    case 0: e = check_parity(x, y, n); a = y[n - 1] - 2; break;
    case 1: e = check_modarith(x, y, n); a = y[n - 1] - 6; break;
    case 2: e = check_brackets(x, y, n); a = y[n - 1] - 7; break;
    case 3: e = check_z5(x, y, n); a = y[n - 1] - 2; break;
    case 4: e = check_s3(x, y, n); a = y[n - 1] - 2; break;
    case 5: e = check_majority(x, y, n, 0, &a); break;
    case 6: e = check_majority(x, y, n, 1, &a); break;
    case 7: e = check_anbn(x, y, n, len, 2); break;
    case 8: e = check_anbn(x, y, n, len, 3); break;
    case 9: e = check_mqar(x, y, n, len); break;
    }
    if (e == NULL && a >= 0 && a <= 64) answer_hist[id][a]++;
    return e;
}

// ------------------------------------------------------------------ tests
static const char* names[10] = { "parity", "modarith", "modarith_brackets", "z5", "s3", "majority",
                                 "majority_count", "anbn", "anbncn", "mqar" };

static void test_table(void) {
    size_t n = 0, i;
    const mn_task* list = mn_task_list(&n);
    const int vocab[10] = { 4, 11, 12, 7, 8, 7, 67, 5, 6, 512 };
    const int metric[10] = { MN_METRIC_FINAL, MN_METRIC_FINAL, MN_METRIC_FINAL, MN_METRIC_FINAL, MN_METRIC_FINAL,
                             MN_METRIC_FINAL, MN_METRIC_FINAL, MN_METRIC_SEQUENCE, MN_METRIC_SEQUENCE,
                             MN_METRIC_TOKEN };
    const double chance[10] = { 0.5, 0.2, 0.2, 0.2, 1.0 / 6, 0.25, 1.0 / 64, 0, 0, 1.0 / 256 };
    const size_t min_len[10] = { 2, 3, 5, 2, 16, 8, 8, 4, 5, 5 };
    TU_CHECK(list != NULL && n == 10, "mn_task_list: %zu tasks", n);
    TU_CHECK(mn_task_list(NULL) == list, "mn_task_list(NULL)");
    for (i = 0; i < 10 && list; i++) {
        const mn_task* t = &list[i];
        TU_CHECK(strcmp(t->name, names[i]) == 0, "task %zu is %s, want %s", i, t->name, names[i]);
        TU_CHECK(mn_task_find(names[i]) == t, "mn_task_find(%s)", names[i]);
        TU_CHECK(t->vocab_size == vocab[i], "%s vocab %d, want %d", t->name, t->vocab_size, vocab[i]);
        TU_CHECK(t->metric == metric[i], "%s metric %d", t->name, t->metric);
        TU_CHECK(fabs(t->chance - chance[i]) < 1e-15, "%s chance %g, want %g", t->name, t->chance, chance[i]);
        TU_CHECK(t->min_len == min_len[i], "%s min_len %zu", t->name, t->min_len);
        TU_CHECK(t->doc != NULL && strlen(t->doc) > 20 && strchr(t->doc, '\n') == NULL, "%s doc line", t->name);
    }
    TU_CHECK(mn_task_find(NULL) == NULL, "find(NULL)");
    TU_CHECK(mn_task_find("nope") == NULL, "find(nope)");
    TU_CHECK(mn_task_find("Parity") == NULL, "find is case-sensitive");
    TU_CHECK(mn_task_find("") == NULL, "find(\"\")");
}

static void test_labels(void) {
    size_t lens[64], nl = 0, l, r;
    int id;
    mn_rng rng;
    for (l = 2; l <= 40; l++) lens[nl++] = l;
    lens[nl++] = 64; lens[nl++] = 127; lens[nl++] = 128; lens[nl++] = 129;
    lens[nl++] = 511; lens[nl++] = 512; lens[nl++] = 2047; lens[nl++] = 2048;
    make_perms();
    TU_CHECK(perm_index(perms[0]) == 0 && perms[0][0] == 0 && perms[0][1] == 1 && perms[0][2] == 2, "identity first");
    for (id = 0; id < 10; id++) {
        const mn_task* task = mn_task_find(names[id]);
        size_t bad = 0, total = 0;
        const char* first = NULL;
        size_t first_len = 0;
        mn_rng_seed(&rng, 1000 + (uint64_t)id);
        for (l = 0; l < nl; l++) {
            size_t len = lens[l], reps = len <= 512 ? 20 : 4;
            if (len < shortest(names[id])) {
                memset(X, 0x55, sizeof X); memset(Y, 0x55, sizeof Y);
                size_t n = mn_task_sample(task, &rng, len, X, Y);
                TU_CHECK(n == 0 && X[0] == 0x55555555 && Y[0] == 0x55555555,
                         "%s len %zu below the shortest example: n = %zu, buffers touched", names[id], len, n);
                continue;
            }
            for (r = 0; r < reps; r++) {
                size_t n = mn_task_sample(task, &rng, len, X, Y);
                const char* e = check_task(id, task, X, Y, n, len);
                total++;
                if (e) { bad++; if (!first) { first = e; first_len = len; } }
            }
        }
        TU_CHECK(bad == 0, "%s: %zu of %zu examples wrong; first at len %zu: %s", names[id], bad, total, first_len,
                 first ? first : "");
        TU_CHECK(mn_task_sample(task, &rng, shortest(names[id]) - 1, X, Y) == 0,
                 "%s: one below the shortest", names[id]);
        TU_CHECK(mn_task_sample(task, &rng, shortest(names[id]), X, Y) == expected_n(names[id], shortest(names[id])),
                 "%s: the shortest", names[id]);
    }
}

// the base forms of the bracket generator, and that it reaches some depth and both operators
static void test_brackets_forms(void) {
    const mn_task* task = mn_task_find("modarith_brackets");
    mn_rng rng;
    size_t i, plus = 0, minus = 0, maxdepth = 0;
    mn_rng_seed(&rng, 5);
    mn_task_sample(task, &rng, 3, X, Y);
    TU_CHECK(X[1] >= 7 && X[2] == 2, "len 3: BOS d =");
    mn_task_sample(task, &rng, 4, X, Y);
    TU_CHECK(X[1] == 4 && X[2] >= 7 && X[3] == 2, "len 4: BOS - d =");
    mn_task_sample(task, &rng, 5, X, Y);
    TU_CHECK(X[1] == 5 && X[2] >= 7 && X[3] == 6, "len 5: BOS ( d ) =");
    mn_task_sample(task, &rng, 6, X, Y);
    TU_CHECK(X[1] == 5 && X[2] == 4 && X[3] >= 7 && X[4] == 6, "len 6: BOS ( - d ) =");
    mn_task_sample(task, &rng, 7, X, Y);
    TU_CHECK(X[1] == 5 && X[2] >= 7 && (X[3] == 3 || X[3] == 4) && X[4] >= 7 && X[5] == 6, "len 7: BOS ( d op d ) =");
    for (i = 0; i < 50; i++) {
        size_t n = mn_task_sample(task, &rng, 2048, X, Y), t;
        rd_maxdepth = 0;
        TU_CHECK(check_brackets(X, Y, n) == NULL, "brackets 2048 #%zu", i);
        if (rd_maxdepth > maxdepth) maxdepth = rd_maxdepth;
        for (t = 2; t + 1 < n; t++) {           // binary operators follow a digit or ')'
            if ((X[t] == 3 || X[t] == 4) && (X[t - 1] == 6 || (X[t - 1] >= 7))) { if (X[t] == 3) plus++; else minus++; }
        }
    }
    printf("brackets at 2048: deepest nesting %zu, binary + %zu, - %zu\n", maxdepth, plus, minus);
    TU_CHECK(maxdepth >= 10 && maxdepth < 600, "nesting depth %zu", maxdepth);
    TU_CHECK(plus > 0 && minus > 0 && plus < 2 * minus && minus < 2 * plus, "operators + %zu - %zu", plus, minus);
}

static void test_determinism(void) {
    int id;
    for (id = 0; id < 10; id++) {
        const mn_task* task = mn_task_find(names[id]);
        size_t lens[3] = { 37, 128, 2048 }, l;
        for (l = 0; l < 3; l++) {
            mn_rng a, b;
            size_t na, nb;
            mn_rng_seed(&a, 42); mn_rng_seed(&b, 42);
            na = mn_task_sample(task, &a, lens[l], X, Y);
            nb = mn_task_sample(task, &b, lens[l], X2, Y2);
            TU_CHECK(na == nb && memcmp(X, X2, sizeof(int) * lens[l]) == 0 &&
                     memcmp(Y, Y2, sizeof(int) * lens[l]) == 0 && a.s == b.s,
                     "%s len %zu: same seed, different example", names[id], lens[l]);
            mn_rng_seed(&b, 43);
            nb = mn_task_sample(task, &b, lens[l], X2, Y2);
            TU_CHECK(memcmp(X, X2, sizeof(int) * lens[l]) != 0,
                     "%s len %zu: seeds 42 and 43 give the same example", names[id], lens[l]);
        }
        // a copy of the table entry behaves like the entry
        {
            mn_task copy = *task;
            mn_rng a, b;
            mn_rng_seed(&a, 9); mn_rng_seed(&b, 9);
            size_t na = mn_task_sample(task, &a, 100, X, Y), nb = mn_task_sample(&copy, &b, 100, X2, Y2);
            TU_CHECK(na == nb && memcmp(X, X2, sizeof(int) * 100) == 0, "%s: a copy of the entry differs", names[id]);
            TU_CHECK(mn_task_train_len(&copy, &a, 128) == mn_task_train_len(task, &b, 128),
                     "%s: copy train_len", names[id]);
        }
    }
}

static void test_train_len(void) {
    int id;
    mn_rng rng;
    mn_rng_seed(&rng, 77);
    for (id = 0; id < 10; id++) {
        const mn_task* task = mn_task_find(names[id]);
        size_t lo = task->min_len, hi = 128, i, seen_lo = 0, seen_hi = 0, out = 0, invalid = 0, mismatch = 0;
        double sum = 0;
        int fixed = (id == 3 || id == 9);
        // the largest valid length <= 128 and the smallest >= min_len
        size_t want_hi = expected_n(names[id], hi), want_lo = fixed ? hi : lo;
        for (i = 0; i < 20000; i++) {
            size_t n = mn_task_train_len(task, &rng, hi);
            sum += (double)n;
            if (n < lo || n > hi) { out++; continue; }
            if (expected_n(names[id], n) != n) invalid++;
            if (n == want_lo) seen_lo++;
            if (n == want_hi) seen_hi++;
            if (i % 50 == 0) {
                size_t got = mn_task_sample(task, &rng, n, X, Y);
                int short_ok = (id == 7 || id == 8) && got < n && got > 0;   // anbn(cn): k from the upper half
                if ((got != n && !short_ok) || check_task(id, task, X, Y, got, n) != NULL) mismatch++;
            }
        }
        TU_CHECK(out == 0 && invalid == 0,
                 "%s train_len: %zu outside [%zu,128], %zu not valid lengths", names[id], out, lo, invalid);
        TU_CHECK(mismatch == 0, "%s: %zu training lengths do not sample to themselves", names[id], mismatch);
        if (fixed) TU_CHECK(seen_hi == 20000, "%s trains at max_len only (%zu of 20000)", names[id], seen_hi);
        else {
            double mean = sum / 20000, mid = 0.5 * ((double)want_lo + (double)want_hi);
            TU_CHECK(seen_lo > 0 && seen_hi > 0, "%s train_len reaches %zu (%zu times) and %zu (%zu times)", names[id],
                     want_lo, seen_lo, want_hi, seen_hi);
            TU_CHECK(fabs(mean - mid) < 2.0, "%s train_len mean %.2f, uniform mean %.2f", names[id], mean, mid);
        }
        TU_CHECK(mn_task_train_len(task, &rng, lo) == (fixed ? lo : want_lo),
                 "%s train_len(max_len = min_len)", names[id]);
        TU_CHECK(mn_task_train_len(task, &rng, lo - 1) == 0, "%s train_len below min_len", names[id]);
        TU_CHECK(mn_task_train_len(task, NULL, 128) == 0, "%s train_len(rng NULL)", names[id]);
    }
    TU_CHECK(mn_task_train_len(NULL, &rng, 128) == 0, "train_len(NULL task)");
}

static void test_bad_input(void) {
    mn_rng rng;
    const mn_task* p = mn_task_find("parity");
    mn_task fake = *p;
    mn_rng_seed(&rng, 1);
    TU_CHECK(mn_task_sample(NULL, &rng, 16, X, Y) == 0, "sample(NULL task)");
    TU_CHECK(mn_task_sample(p, NULL, 16, X, Y) == 0, "sample(NULL rng)");
    TU_CHECK(mn_task_sample(p, &rng, 16, NULL, Y) == 0, "sample(NULL x)");
    TU_CHECK(mn_task_sample(p, &rng, 16, X, NULL) == 0, "sample(NULL y)");
    TU_CHECK(mn_task_sample(p, &rng, 0, X, Y) == 0, "sample(len 0)");
    fake.name = "not_a_task";
    TU_CHECK(mn_task_sample(&fake, &rng, 16, X, Y) == 0, "sample(unknown task)");
    TU_CHECK(mn_task_train_len(&fake, &rng, 128) == 0, "train_len(unknown task)");
    fake.name = NULL;
    TU_CHECK(mn_task_sample(&fake, &rng, 16, X, Y) == 0, "sample(task with NULL name)");
}

// distributions of the answers: balanced where the task is symmetric, spread elsewhere
static void test_distributions(void) {
    mn_rng rng;
    int id, a;
    size_t i;
    memset(answer_hist, 0, sizeof answer_hist);
    mn_rng_seed(&rng, 2024);
    for (id = 0; id < 7; id++) {
        const mn_task* task = mn_task_find(names[id]);
        size_t bad = 0;
        for (i = 0; i < 4000; i++) {
            size_t len = mn_task_train_len(task, &rng, 128);
            size_t n = mn_task_sample(task, &rng, len, X, Y);
            bad += check_task(id, task, X, Y, n, len) != NULL;
        }
        TU_CHECK(bad == 0, "%s: %zu wrong examples at training lengths", names[id], bad);
    }
    {   // parity, z5, s3, majority: uniform answers by symmetry, within 5 binomial sigma
        const int k[4] = { 0, 3, 4, 5 }, m[4] = { 2, 5, 6, 4 };
        for (i = 0; i < 4; i++) {
            double p = 1.0 / m[i], sd = sqrt(4000 * p * (1 - p));
            for (a = 0; a < m[i]; a++)
                TU_CHECK(fabs(answer_hist[k[i]][a] - 4000 * p) < 5 * sd,
                         "%s answer %d: %d of 4000, expected %.0f", names[k[i]], a, answer_hist[k[i]][a], 4000 * p);
        }
    }
    for (id = 1; id <= 2; id++) {   // modarith and brackets: every residue, none below 10%
        printf("%s answers:", names[id]);
        for (a = 0; a < 5; a++) printf(" %d", answer_hist[id][a]);
        printf("\n");
        for (a = 0; a < 5; a++)
            TU_CHECK(answer_hist[id][a] > 400, "%s answer %d: %d of 4000", names[id], a, answer_hist[id][a]);
    }
    {   // majority_count: each example uses k symbols, k uniform in 1..64; the top count is about n/k, so
        // the answers trained at n <= 128 span 1..64 and those at 512 and 2048 are among them
        const mn_task* task = mn_task_find("majority_count");
        size_t seen[65], trained = 0, clipped = 0, distinct_hist[65], d, lens[2] = { 512, 2048 }, l;
        size_t clip[2] = { 0, 0 }, unseen[2] = { 0, 0 }, reps[2] = { 400, 200 }, k1, k40 = 0, bad = 0, ntrain = 100000;
        int ans = 0;
        memset(seen, 0, sizeof seen); memset(distinct_hist, 0, sizeof distinct_hist);
        for (i = 0; i < ntrain; i++) {   // the answers a training run at lengths U[8, 128] asks for
            size_t len = mn_task_train_len(task, &rng, 128), n = mn_task_sample(task, &rng, len, X, Y);
            bad += common_check(task, X, Y, n, len) != NULL || check_majority(X, Y, n, 1, &ans) != NULL;
            seen[ans]++;
        }
        for (a = 1; a <= 64; a++) trained += seen[a] > 0;
        clipped = seen[64];
        for (i = 0; i < 4000; i++) {   // at 128, 126 draws from k symbols use all k (or nearly) when k is small
            size_t n = mn_task_sample(task, &rng, 128, X, Y);
            bad += common_check(task, X, Y, n, 128) != NULL || check_majority(X, Y, n, 1, &ans) != NULL;
            distinct_hist[mc_distinct]++;
        }
        k1 = distinct_hist[1];
        for (d = 40; d <= 64; d++) k40 += distinct_hist[d];
        for (l = 0; l < 2; l++)
            for (i = 0; i < reps[l]; i++) {
                size_t n = mn_task_sample(task, &rng, lens[l], X, Y);
                bad += common_check(task, X, Y, n, lens[l]) != NULL || check_majority(X, Y, n, 1, &ans) != NULL;
                clip[l] += ans == 64;
                unseen[l] += seen[ans] == 0;
            }
        printf("majority_count: %zu of %zu clipped at training lengths, %zu of 64 answers trained; at 128 one symbol"
               " used in %zu of 4000, >= 40 in %zu; clipped %zu of %zu at 512, %zu of %zu at 2048; untrained"
               " answers %zu, %zu\n", clipped, ntrain, trained, k1, k40, clip[0], reps[0], clip[1], reps[1], unseen[0],
               unseen[1]);
        TU_CHECK(bad == 0, "majority_count: %zu wrong examples", bad);
        TU_CHECK(clipped > ntrain / 400 && clipped < ntrain / 40, "majority_count clipped in training: %zu of %zu",
                 clipped, ntrain);
        TU_CHECK(trained == 64, "majority_count: %zu of 64 answers at training lengths", trained);
        // k = 1 with probability 1/64 (62 expected of 4000); k >= 40 in about 25/64 of the examples
        TU_CHECK(k1 > 30 && k1 < 100 && k40 > 1300 && k40 < 1900, "majority_count symbols used: 1 in %zu, >= 40 in %zu",
                 k1, k40);
        // clipped once the top count reaches 64: k <= 9 or so at 512 (about 1/7), k <= 31 or so at 2048 (about 2/3)
        TU_CHECK(clip[0] > 20 && clip[0] < 100 && clip[1] > 100 && clip[1] < 170, "majority_count clipped at 512: %zu,"
                 " at 2048: %zu", clip[0], clip[1]);
        TU_CHECK(unseen[0] + unseen[1] == 0, "majority_count: %zu answers at 512/2048 never asked in training",
                 unseen[0] + unseen[1]);
    }
    {   // mqar: with N = 1 (len 31, S = 14 slots) the slot law is p(g) ~ (g+1)^(0.01-1) exactly
        const mn_task* task = mn_task_find("mqar");
        double z = 0, worst = 0;
        size_t S = 14, reps = 40000, g;
        memset(slot_hist, 0, sizeof slot_hist);
        size_t bad = 0, beyond = 0;
        for (i = 0; i < reps; i++) {
            size_t n = mn_task_sample(task, &rng, 31, X, Y);
            bad += check_mqar(X, Y, n, 31) != NULL;
        }
        TU_CHECK(bad == 0, "mqar len 31: %zu wrong examples", bad);
        for (g = 0; g < S; g++) z += pow((double)g + 1, -0.99);
        for (g = 0; g < S; g++) {
            double p = pow((double)g + 1, -0.99) / z, dev = fabs(slot_hist[g] - reps * p) / sqrt(reps * p * (1 - p));
            if (dev > worst) worst = dev;
        }
        printf("mqar slot law (N=1, S=14, %zu draws): slot 0 %zu (expected %.0f), worst deviation %.2f sigma\n",
               reps, slot_hist[0], reps * (1 / z), worst);
        TU_CHECK(worst < 5, "mqar slot law off by %.2f sigma", worst);
        for (g = S; g < MAXLEN; g++) beyond += slot_hist[g];
        TU_CHECK(beyond == 0, "%zu queries beyond the %zu slots", beyond, S);
        // len 128: N = 8 distinct slots of 55, early slots favoured
        memset(slot_hist, 0, sizeof slot_hist);
        for (i = 0; i < 4000; i++) { size_t n = mn_task_sample(task, &rng, 128, X, Y); check_mqar(X, Y, n, 128); }
        printf("mqar len 128: slot 0 used %zu, slot 10 %zu, slot 54 %zu of 4000\n", slot_hist[0], slot_hist[10],
               slot_hist[54]);
        TU_CHECK(slot_hist[0] > slot_hist[10] && slot_hist[10] > slot_hist[54] && slot_hist[54] > 0,
                 "mqar slot use not decreasing");
    }
}

int main(void) {
    test_table();
    test_labels();
    test_brackets_forms();
    test_determinism();
    test_train_len();
    test_bad_input();
    test_distributions();
    return tu_finish("test_tasks");
}
