// lm_report: the language-model comparison's tables and plots, from the CSVs that lm_eval (and
// examples/lm_compare.sh) wrote - nothing here needs a checkpoint or a GPU.
//
//   ./build/lm_report --results results/lm/code --corpus code --md /tmp/code.md --png results/lm_code
//
// Reads RESULTS/MODEL/{summary,position,recall,cg,cg_position}.csv and, when there, RESULTS/MODEL/train.csv
// (lm_compare.sh's line on the training run), for the models of --models (comma-separated, in that order;
// default every folder of RESULTS in name order). Writes markdown tables to --md (validation bits per byte,
// NLL by position in bins, recall by distance, the CG trade-off) and the PNGs
//   PNG_position.png      NLL(model) - NLL(baseline) by position, bins of --bin positions (linear axis)
//   PNG_position_log.png  the same against log10(position), four bins per octave
//   PNG_recall.png        exact-copy (argmax) accuracy per byte of the second copy against log2(distance)
//   PNG_recall_nll.png    the second copy's NLL against log2(distance)
//   PNG_cg.png            Mesa models: NLL against mean CG steps per token, fixed counts and tolerances
//   PNG_cg_position.png   Mesa models: mean CG steps per token against log10(position), per tolerance
// The baseline (--baseline, default "transformer") must be one of the models for the position plots and the
// ΔNLL columns; without it they are left out, with a note.
// Other seeds: a model's runs of seed N >= 2 (lm_compare.sh --seed N) lie beside it as RESULTS/MODEL.sN. Every
// table and plot above is of seed 1 (the folder MODEL); only the table "validation bits per byte over seeds"
// reads the seed folders' summary.csv, and only for models that have one - without any it is not written.
// Without --models, a folder MODEL.sN is a seed of MODEL when MODEL is there too, not a model of its own.
// Exit status: 0 done; 1 a file could not be read or written; 2 a bad command line.
#include "examples/common.h"
#define MN_PLOT_IMPLEMENTATION
#include "examples/plot.h"

#define R_MAX_MODELS 32
#define R_MAX_SET 64      // CG settings per model (tolerances x starts + fixed counts + the forward)
#define R_MAX_DIST 32
#define R_MAX_SEEDS 32    // seeds per model besides seed 1

// One run of another seed (the folder MODEL.sN): odd when it was evaluated at another step or on another number
// of bytes than seed 1, so not the same experiment - flagged in the table rather than dropped
typedef struct { int seed, odd; double bpb; } seed_run;
typedef struct {
    char name[64], pattern[128];
    int have_sum, have_pos, have_rec, have_cg, have_train;
    double params, step, tokens_eval, nll, bpb;
    size_t n_seed; seed_run seeds[R_MAX_SEEDS];   // the other seeds' runs (MODEL.sN), by seed
    double* pos; size_t n_pos;                 // (n_pos) mean NLL at positions 1..n_pos
    double* win; size_t n_win;                 // (n_win) each validation window's mean NLL (windows.csv)
    size_t n_dist; double dist[R_MAX_DIST], rec_nll2[R_MAX_DIST], rec_nll1[R_MAX_DIST], rec_acc[R_MAX_DIST],
        rec_exact[R_MAX_DIST];
    size_t n_set; char set_name[R_MAX_SET][32], set_kind[R_MAX_SET][8]; double set_val[R_MAX_SET],
        set_steps[R_MAX_SET], set_nll[R_MAX_SET];
    double* cgp_steps[R_MAX_SET]; size_t cgp_n;   // (cgp_n) per setting: mean CG steps at positions 1..cgp_n
    char train_line[512];                          // train.csv's second line, as is
    char train_head[512];
} model_t;

// ---- CSV: header line, then rows of comma-separated fields (no quoting; lm_eval writes none) ----
typedef struct { FILE* f; char line[4096]; char* field[32]; int n; } csv_t;
static int csv_open(csv_t* c, const char* dir, const char* model, const char* name) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s/%s", dir, model, name);
    c->f = fopen(p, "r");
    if (!c->f) return -1;
    if (!fgets(c->line, sizeof c->line, c->f)) { fclose(c->f); c->f = NULL; return -1; }   // the header
    return 0;
}
static int csv_row(csv_t* c) {   // next row split into fields; 0 at the end
    char* s;
    if (!fgets(c->line, sizeof c->line, c->f)) return 0;
    c->line[strcspn(c->line, "\r\n")] = 0;
    c->n = 0;
    for (s = c->line; c->n < 32;) {
        c->field[c->n++] = s;
        s = strchr(s, ',');
        if (!s) break;
        *s++ = 0;
    }
    return 1;
}
static double num(const csv_t* c, int i) { return i < c->n ? strtod(c->field[i], NULL) : NAN; }

// The standard error of the mean of x (n), or of x - y when y is given (paired); NAN for n < 2.
static double win_se(const double* x, const double* y, size_t n) {
    double m = 0, v = 0;
    size_t i;
    if (n < 2 || !x) return NAN;
    for (i = 0; i < n; i++) m += x[i] - (y ? y[i] : 0);
    m /= (double)n;
    for (i = 0; i < n; i++) { double d = x[i] - (y ? y[i] : 0) - m; v += d * d; }
    return sqrt(v / (double)(n - 1) / (double)n);
}

// Column col of every row of DIR/MODEL/FILE into a growing array (*out, *n); a missing file leaves it empty.
// Returns -1 only when memory runs out.
static int read_column(const char* dir, const char* model, const char* file, int col, double** out, size_t* n) {
    csv_t c;
    size_t cap = 0;
    if (csv_open(&c, dir, model, file) != 0) return 0;
    while (csv_row(&c) && c.n > col) {
        if (*n == cap) {
            double* p = (double*)realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(double));
            if (!p) { fclose(c.f); return -1; }
            *out = p;
        }
        (*out)[(*n)++] = num(&c, col);
    }
    fclose(c.f);
    return 0;
}

static int load_model(model_t* m, const char* dir, const char* name) {
    csv_t c;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    if (csv_open(&c, dir, name, "summary.csv") == 0) {
        if (csv_row(&c) && c.n >= 10) {
            snprintf(m->pattern, sizeof m->pattern, "%s", c.field[1]);
            m->params = num(&c, 2); m->step = num(&c, 3); m->tokens_eval = num(&c, 6); m->nll = num(&c, 7);
            m->bpb = num(&c, 8);
            m->have_sum = 1;
        }
        fclose(c.f);
    }
    if (!m->have_sum) { fprintf(stderr, "lm_report: %s/%s/summary.csv: missing or empty\n", dir, name); return -1; }
    if (read_column(dir, name, "position.csv", 1, &m->pos, &m->n_pos) != 0) return -1;
    m->have_pos = m->n_pos > 0;
    // absent in runs before lm_eval wrote it: no standard errors then
    if (read_column(dir, name, "windows.csv", 2, &m->win, &m->n_win) != 0) return -1;
    if (csv_open(&c, dir, name, "recall.csv") == 0) {
        while (csv_row(&c) && c.n >= 7 && m->n_dist < R_MAX_DIST) {
            size_t k = m->n_dist++;
            m->dist[k] = num(&c, 0); m->rec_nll2[k] = num(&c, 3); m->rec_nll1[k] = num(&c, 4);
            m->rec_acc[k] = num(&c, 5); m->rec_exact[k] = num(&c, 6);
        }
        fclose(c.f);
        m->have_rec = m->n_dist > 0;
    }
    if (csv_open(&c, dir, name, "cg.csv") == 0) {
        while (csv_row(&c) && c.n >= 5) {
            size_t k = m->n_set++;
            if (k == R_MAX_SET) {   // say so rather than draw a table that silently lacks settings
                fprintf(stderr, "lm_report: %s/%s/cg.csv: more than %d settings, the rest left out\n", dir, name,
                        R_MAX_SET);
                m->n_set = R_MAX_SET;
                break;
            }
            snprintf(m->set_name[k], sizeof m->set_name[k], "%s", c.field[0]);
            snprintf(m->set_kind[k], sizeof m->set_kind[k], "%s", c.field[1]);
            m->set_val[k] = num(&c, 2); m->set_steps[k] = num(&c, 3); m->set_nll[k] = num(&c, 4);
        }
        fclose(c.f);
        m->have_cg = m->n_set > 0;
    }
    if (m->have_cg && csv_open(&c, dir, name, "cg_position.csv") == 0) {
        size_t cap = 0, k;
        while (csv_row(&c) && c.n >= 4) {
            size_t p = (size_t)num(&c, 1);
            for (k = 0; k < m->n_set && strcmp(m->set_name[k], c.field[0]); k++) {}
            if (k == m->n_set || p == 0) continue;
            if (p > cap) {   // grow every setting's array together
                size_t nc = p > 2 * cap ? p : 2 * cap, j;
                for (j = 0; j < m->n_set; j++) {
                    double* q = (double*)realloc(m->cgp_steps[j], nc * sizeof(double));
                    if (!q) { fclose(c.f); return -1; }
                    for (size_t i = cap; i < nc; i++) q[i] = NAN;
                    m->cgp_steps[j] = q;
                }
                cap = nc;
            }
            m->cgp_steps[k][p - 1] = num(&c, 3);
            if (p > m->cgp_n) m->cgp_n = p;
        }
        fclose(c.f);
    }
    if (csv_open(&c, dir, name, "train.csv") == 0) {
        snprintf(m->train_head, sizeof m->train_head, "%.511s", c.line);
        m->train_head[strcspn(m->train_head, "\r\n")] = 0;
        if (fgets(m->train_line, sizeof m->train_line, c.f)) {
            m->train_line[strcspn(m->train_line, "\r\n")] = 0;
            m->have_train = 1;
        }
        fclose(c.f);
    }
    return 0;
}
static void free_model(model_t* m) {
    size_t k;
    free(m->pos); free(m->win);
    for (k = 0; k < R_MAX_SET; k++) free(m->cgp_steps[k]);
}

// The seed N of a folder named MODEL.sN (N >= 2, written without leading zeros, so that s2 and s02 cannot both
// claim seed 2), or 0 when entry is not a seed folder of model.
static int seed_of(const char* entry, const char* model) {
    size_t l = strlen(model);
    const char* s;
    long n = 0;
    if (strncmp(entry, model, l) || entry[l] != '.' || entry[l + 1] != 's' || entry[l + 2] < '1' ||
        entry[l + 2] > '9')
        return 0;
    for (s = entry + l + 2; *s; s++) {
        if (*s < '0' || *s > '9' || n > 1000000) return 0;
        n = 10 * n + (*s - '0');
    }
    return n >= 2 ? (int)n : 0;
}
// The name without a seed suffix .sN (N >= 2) into base; 0 when name has none.
static int seed_base(const char* name, char* base, size_t cap) {
    const char* d = strrchr(name, '.');
    if (!d || d == name || (size_t)(d - name) >= cap) return 0;
    snprintf(base, cap, "%.*s", (int)(d - name), name);
    return seed_of(name, base);
}
static int cmp_int(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }
static int cmp_seed(const void* a, const void* b) { return ((const seed_run*)a)->seed - ((const seed_run*)b)->seed; }
static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

// Every model's other seeds: the folders DIR/MODEL.sN that have a summary.csv (a folder without one is a run
// not evaluated yet). Only the bits per byte are read; everything else in the report stays seed 1's.
static void load_seeds(model_t* M, size_t nm, const char* dir) {
    DIR* d = opendir(dir);
    struct dirent* e;
    size_t i;
    if (!d) return;   // main read the models from dir already, so this cannot fail but for a race
    while ((e = readdir(d))) {
        for (i = 0; i < nm; i++) {
            model_t* m = &M[i];
            int s = seed_of(e->d_name, m->name);
            csv_t c;
            if (!s) continue;
            if (csv_open(&c, dir, e->d_name, "summary.csv") != 0) continue;
            if (!csv_row(&c) || c.n < 10)
                fprintf(stderr, "lm_report: %s/%s/summary.csv: empty, seed %d left out\n", dir, e->d_name, s);
            else if (m->n_seed == R_MAX_SEEDS)
                fprintf(stderr, "lm_report: %s: more than %d seeds, %s left out\n", m->name, R_MAX_SEEDS, e->d_name);
            else {
                seed_run* sr = &m->seeds[m->n_seed++];
                sr->seed = s; sr->bpb = num(&c, 8);
                sr->odd = num(&c, 3) != m->step || num(&c, 6) != m->tokens_eval;
                if (sr->odd)
                    fprintf(stderr, "lm_report: %s: step %.0f on %.0f bytes, seed 1: step %.0f on %.0f bytes\n",
                            e->d_name, num(&c, 3), num(&c, 6), m->step, m->tokens_eval);
            }
            fclose(c.f);
        }
    }
    closedir(d);
    for (i = 0; i < nm; i++)   // by seed (readdir's order is the file system's)
        qsort(M[i].seeds, M[i].n_seed, sizeof M[i].seeds[0], cmp_seed);
}

// A CG tolerance for a plot's legend: a power of ten as 1e-3, anything else as %g.
static void tol_str(char* out, size_t cap, double t) {
    double e = t > 0 ? floor(log10(t) + 0.5) : 0;
    if (t > 0 && fabs(t / pow(10.0, e) - 1) < 1e-9) snprintf(out, cap, "1e%d", (int)e);
    else snprintf(out, cap, "%g", t);
}

// Mean of v[lo, hi) (positions lo+1 .. hi), skipping NaN; NaN when none.
static double mean_range(const double* v, size_t lo, size_t hi) {
    double s = 0; size_t n = 0, i;
    for (i = lo; i < hi; i++) if (v[i] == v[i]) { s += v[i]; n++; }
    return n ? s / (double)n : NAN;
}
// Log bins over positions 1..n, four per octave: bin b covers [2^(b/4), 2^((b+1)/4)); fills the edges
// lo[] (0-based start index) and hi[] (end), returns the count.
static size_t log_bins(size_t n, size_t* lo, size_t* hi, size_t cap) {
    size_t nb = 0, a = 1;
    double e = 0;
    while (a <= n && nb < cap) {
        size_t b;
        e += 0.25;
        b = (size_t)floor(pow(2.0, e));
        if (b <= a) continue;   // an empty bin at the start: widen it
        if (b > n + 1) b = n + 1;
        lo[nb] = a - 1; hi[nb] = b - 1; nb++;
        a = b;
    }
    return nb;
}

int main(int argc, char** argv) {
    const char *dir = NULL, *md = NULL, *png = NULL, *corpus = "", *models = NULL, *baseline = "transformer";
    size_t bin = 64, i, k, j, nm = 0;
    int a, rc = 0;
    model_t* M = (model_t*)calloc(R_MAX_MODELS, sizeof(model_t));
    if (!M) return 1;
    for (a = 1; a < argc; a += 2) {   // options come in pairs: NAME VALUE
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: lm_report --results DIR --md FILE --png PREFIX [--corpus NAME] [--models a,b,...] "
                   "[--baseline NAME (transformer)] [--bin N (64)]\n");
            return 0;
        }
        if (!v) { fprintf(stderr, "lm_report: unknown option or missing value: %s\n", o); return 2; }
        if (!strcmp(o, "--results")) dir = v;
        else if (!strcmp(o, "--md")) md = v;
        else if (!strcmp(o, "--png")) png = v;
        else if (!strcmp(o, "--corpus")) corpus = v;
        else if (!strcmp(o, "--models")) models = v;
        else if (!strcmp(o, "--baseline")) baseline = v;
        else if (!strcmp(o, "--bin")) {
            if (ex_parse_size(o, v, &bin) || bin == 0) {
                fprintf(stderr, "lm_report: --bin must be positive\n");
                return 2;
            }
        } else {
            fprintf(stderr, "lm_report: unknown option %s\n", o);
            return 2;
        }
    }
    if (!dir || !md || !png) { fprintf(stderr, "lm_report: --results, --md and --png are needed\n"); return 2; }
    {   // the model list: --models, or every folder of dir that has a summary.csv, in name order, but for
        // the seed folders MODEL.sN of a MODEL that is there (they are read as its seeds, below)
        char* names[R_MAX_MODELS]; size_t n = 0;
        if (models) {
            char buf[2048], *t, *save = NULL;
            snprintf(buf, sizeof buf, "%s", models);
            for (t = strtok_r(buf, ",", &save); t && n < R_MAX_MODELS; t = strtok_r(NULL, ",", &save))
                names[n++] = strdup(t);
        } else {
            DIR* d = opendir(dir); struct dirent* e;
            if (!d) { fprintf(stderr, "lm_report: cannot open %s: %s\n", dir, strerror(errno)); return 1; }
            while ((e = readdir(d)) && n < R_MAX_MODELS) {
                char p[1400], b[256]; struct stat st;
                snprintf(p, sizeof p, "%s/%s/summary.csv", dir, e->d_name);
                if (e->d_name[0] == '.' || stat(p, &st) != 0) continue;
                if (seed_base(e->d_name, b, sizeof b)) {
                    snprintf(p, sizeof p, "%s/%s/summary.csv", dir, b);
                    if (stat(p, &st) == 0) continue;
                }
                names[n++] = strdup(e->d_name);
            }
            closedir(d);
            qsort(names, n, sizeof(char*), ex_cmpstr);
        }
        for (i = 0; i < n; i++) {
            if (load_model(&M[nm], dir, names[i]) == 0) nm++;
            else rc = 1;
            free(names[i]);
        }
        if (rc) { fprintf(stderr, "lm_report: a model's results are missing (above): nothing written\n"); return 1; }
        if (nm == 0) { fprintf(stderr, "lm_report: no model results in %s\n", dir); return 1; }
    }
    load_seeds(M, nm, dir);
    int base = -1;
    for (i = 0; i < nm; i++) if (!strcmp(M[i].name, baseline)) base = (int)i;
    char path[1400];
    FILE* f;
    snprintf(path, sizeof path, "%s.tmp", md);
    if (!(f = fopen(path, "w"))) {
        fprintf(stderr, "lm_report: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }

    // ---- table 1: validation ----
    fprintf(f, "#### %s: validation bits per byte\n\n", corpus);
    fprintf(f, "| model | pattern | parameters | evaluated bytes | NLL (nats/byte) | SE | bits/byte | ΔNLL vs %s "
               "| paired SE |\n", baseline);
    fprintf(f, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (i = 0; i < nm; i++) {
        // SE: the windows' spread / sqrt(n) (windows.csv); paired: of the per-window differences to the
        // baseline on the same windows, which removes the text's own variation from the comparison
        int paired = base >= 0 && (size_t)base != i && M[base].n_win == M[i].n_win;
        double se = win_se(M[i].win, NULL, M[i].n_win), pse = paired ? win_se(M[i].win, M[base].win, M[i].n_win) : NAN;
        fprintf(f, "| %s | `%s` | %.2f M | %.0f | %.4f | ", M[i].name, M[i].pattern, M[i].params / 1e6,
                M[i].tokens_eval, M[i].nll);
        if (isnan(se)) fprintf(f, "- | "); else fprintf(f, "%.4f | ", se);
        fprintf(f, "%.4f | ", M[i].bpb);
        if (base >= 0) fprintf(f, "%+.4f | ", M[i].nll - M[base].nll); else fprintf(f, "- | ");
        if (isnan(pse)) fprintf(f, "- |\n"); else fprintf(f, "%.4f |\n", pse);
    }
    fprintf(f, "\nSE: the standard error of the mean over the validation windows (windows.csv; - where a run "
               "predates it); paired SE: of the per-window difference to %s.\n", baseline);
    if (base < 0)
        fprintf(f, "\n(no model named %s: the ΔNLL columns and the position plots are left out)\n", baseline);
    {   // the training runs, as lm_compare.sh recorded them
        int any = 0;
        for (i = 0; i < nm; i++) any |= M[i].have_train;
        if (any) {
            const char* h = NULL;
            for (i = 0; i < nm && !h; i++) if (M[i].have_train) h = M[i].train_head;
            fprintf(f, "\nTraining runs (train.csv):\n\n| ");
            for (const char* s = h; *s; s++) { if (*s == ',') fprintf(f, " | "); else fputc(*s, f); }
            fprintf(f, " |\n|");
            for (const char* s = h; ; s++) { if (!*s || *s == ',') fprintf(f, " --- |"); if (!*s) break; }
            fprintf(f, "\n");
            for (i = 0; i < nm; i++) if (M[i].have_train) {
                fprintf(f, "| ");
                for (const char* s = M[i].train_line; *s; s++) { if (*s == ',') fprintf(f, " | "); else fputc(*s, f); }
                fprintf(f, " |\n");
            }
        }
    }
    {   // ---- the seeds: bits per byte of every training run of a model, seed 1 and MODEL.sN ----
        // the columns: every seed >= 2 that some model has, so that a seed nobody ran is no empty column
        int col[R_MAX_MODELS * R_MAX_SEEDS], odd = 0;
        size_t nc = 0, c;
        for (i = 0; i < nm; i++)
            for (k = 0; k < M[i].n_seed; k++) {
                for (c = 0; c < nc && col[c] != M[i].seeds[k].seed; c++) {}
                if (c == nc) col[nc++] = M[i].seeds[k].seed;
            }
        qsort(col, nc, sizeof col[0], cmp_int);
        if (nc) {
            fprintf(f, "\n#### %s: validation bits per byte over seeds\n\n| model | seed 1 |", corpus);
            for (c = 0; c < nc; c++) fprintf(f, " seed %d |", col[c]);
            fprintf(f, " n | median | SE over seeds | spread (max - min) |\n| --- | ---: |");
            for (c = 0; c < nc + 4; c++) fprintf(f, " ---: |");
            fprintf(f, "\n");
        }
        for (i = 0; nc && i < nm; i++) {
            double v[R_MAX_SEEDS + 1], med, se;
            size_t n = 0;
            if (!M[i].n_seed) continue;
            v[n++] = M[i].bpb;
            fprintf(f, "| %s | %.4f |", M[i].name, M[i].bpb);
            for (c = 0, k = 0; c < nc; c++) {   // both lists are sorted by seed: walk them together
                if (k < M[i].n_seed && M[i].seeds[k].seed == col[c]) {
                    const seed_run* sr = &M[i].seeds[k++];
                    fprintf(f, " %.4f%s |", sr->bpb, sr->odd ? " *" : "");
                    odd |= sr->odd;
                    v[n++] = sr->bpb;
                } else
                    fprintf(f, " - |");
            }
            se = win_se(v, NULL, n);   // the sample sd / sqrt(n): the same formula as over windows
            qsort(v, n, sizeof v[0], cmp_double);
            med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
            fprintf(f, " %zu | %.4f | ", n, med);
            if (isnan(se)) fprintf(f, "- |"); else fprintf(f, "%.4f |", se);
            fprintf(f, " %.4f |\n", v[n - 1] - v[0]);
        }
        if (nc) {
            fprintf(f, "\nEach column is one training run of the model that differs only in the seed (the "
                       "initialisation and the order of the batches), evaluated on the same validation text. SE over "
                       "seeds: the sample standard deviation of those runs' bits per byte / sqrt(n) (- for n < 2), "
                       "the uncertainty of the mean that comes from training itself - unlike the SE over validation "
                       "windows above, which is of one run's evaluation. Models with only seed 1 are left out.\n");
            if (odd)
                fprintf(f, "\n\\* evaluated at another step or on another number of bytes than seed 1 (a run cut "
                           "short, or other --tokens or --eval arguments): not the same experiment.\n");
        }
    }
    // ---- table 2: NLL by position, in octaves: positions 1, 2-3, 4-7, ... ----
    if (base >= 0 && M[base].have_pos) {
        size_t lo[64], hi[64], nb = 0, n = M[base].n_pos;
        for (k = 1; k <= n && nb < 64; k *= 2) { lo[nb] = k - 1; hi[nb] = 2 * k - 1 < n ? 2 * k - 1 : n; nb++; }
        fprintf(f,
                "\n#### %s: ΔNLL against %s by position (nats/byte, mean over each octave of positions)\n\n| model |",
                corpus, baseline);
        for (k = 0; k < nb; k++) {
            if (hi[k] == lo[k] + 1) fprintf(f, " %zu |", hi[k]);
            else fprintf(f, " %zu-%zu |", lo[k] + 1, hi[k]);
        }
        fprintf(f, "\n| --- |");
        for (k = 0; k < nb; k++) fprintf(f, " ---: |");
        fprintf(f, "\n");
        for (i = 0; i < nm; i++) {
            if (!M[i].have_pos || (int)i == base) continue;
            fprintf(f, "| %s |", M[i].name);
            for (k = 0; k < nb; k++) {
                size_t h = hi[k] < M[i].n_pos ? hi[k] : M[i].n_pos;
                fprintf(f, " %+.3f |", mean_range(M[i].pos, lo[k], h) - mean_range(M[base].pos, lo[k], hi[k]));
            }
            fprintf(f, "\n");
        }
        fprintf(f, "| (%s's own NLL) |", baseline);
        for (k = 0; k < nb; k++) fprintf(f, " %.3f |", mean_range(M[base].pos, lo[k], hi[k]));
        fprintf(f, "\n");
    }
    // ---- table 3: recall ----
    {
        int first = -1;
        for (i = 0; i < nm && first < 0; i++) if (M[i].have_rec) first = (int)i;
        if (first >= 0) {
            const model_t* r = &M[first];
            fprintf(f,
                    "\n#### %s: in-context recall, exact-copy accuracy per byte of the second copy (NLL)\n\n| model |",
                    corpus);
            for (k = 0; k < r->n_dist; k++) fprintf(f, " d = %.0f |", r->dist[k]);
            fprintf(f, "\n| --- |");
            for (k = 0; k < r->n_dist; k++) fprintf(f, " ---: |");
            fprintf(f, "\n");
            for (i = 0; i < nm; i++) {
                if (!M[i].have_rec) continue;
                fprintf(f, "| %s |", M[i].name);
                for (k = 0; k < r->n_dist; k++) {
                    for (j = 0; j < M[i].n_dist && M[i].dist[j] != r->dist[k]; j++) {}
                    if (j < M[i].n_dist) fprintf(f, " %.3f (%.2f) |", M[i].rec_acc[j], M[i].rec_nll2[j]);
                    else fprintf(f, " - |");
                }
                fprintf(f, "\n");
            }
            fprintf(f,
                    "\nThe first copy's NLL (no recall can help there) is in each recall.csv (nll_first); whole-string "
                    "exact copies in acc_exact.\n");
        }
    }
    // ---- table 4: the CG trade-off ----
    // The reference is the largest fixed count that was run (30 in lm_eval's default list): the solve closest to
    // exact, whatever counts --cg_counts gave and in whatever order; none run, the relative columns are '-'.
    for (i = 0; i < nm; i++) {
        double ref = NAN, ref_steps = NAN, ref_val = -1;
        char rl[48] = "the largest fixed count";
        if (!M[i].have_cg) continue;
        for (k = 0; k < M[i].n_set; k++) if (!strcmp(M[i].set_kind[k], "fixed") && M[i].set_val[k] >= ref_val) {
            ref = M[i].set_nll[k]; ref_steps = M[i].set_steps[k]; ref_val = M[i].set_val[k];
        }
        if (ref_val >= 0) snprintf(rl, sizeof rl, "fixed %.0f", ref_val);
        fprintf(f, "\n#### %s: %s, test-time compute (decoding with mn_step)\n\n", corpus, M[i].name);
        fprintf(f, "| setting | mean CG steps per token | NLL | ΔNLL vs %s | steps / %s's |\n", rl, rl);
        fprintf(f, "| --- | ---: | ---: | ---: | ---: |\n");
        for (k = 0; k < M[i].n_set; k++) {
            double d = M[i].set_nll[k] - ref;
            if (!strcmp(M[i].set_kind[k], "train"))   // the parallel forward: its count is nominal, not measured
                fprintf(f, "| parallel forward, the training count | %.0f (fixed) | %.4f | ", M[i].set_steps[k],
                        M[i].set_nll[k]);
            else
                fprintf(f, "| %s | %.2f | %.4f | ", M[i].set_name[k], M[i].set_steps[k], M[i].set_nll[k]);
            if (isnan(d)) fprintf(f, "- | "); else fprintf(f, "%+.4f | ", d);
            // a ratio to fixed 0's zero steps (the only count run) would be infinite: '-' as well
            if (!strcmp(M[i].set_kind[k], "train") || !(ref_steps > 0)) fprintf(f, "- |\n");
            else fprintf(f, "%.2f |\n", M[i].set_steps[k] / ref_steps);
        }
    }
    rc = ferror(f);
    if (fclose(f) != 0 || rc) { fprintf(stderr, "lm_report: cannot write %s\n", path); remove(path); return 1; }
    if (rename(path, md) != 0) {
        fprintf(stderr, "lm_report: cannot rename %s: %s\n", path, strerror(errno));
        return 1;
    }

    // ---- the plots ----
    char title[256], file[1400];
    mn_plot_series S[R_MAX_MODELS * 4];
    float* buf = (float*)malloc((size_t)R_MAX_MODELS * 4 * 2 * 4096 * sizeof(float));
    size_t ns;
    int prc = 0;
    if (!buf) return 1;
#define XY(s, kk) (buf + ((size_t)(s) * 2 + (kk)) * 4096)
    if (base >= 0 && M[base].have_pos) {
        size_t n = M[base].n_pos, nb, lo[64], hi[64];
        mn_plot_opts po; memset(&po, 0, sizeof po);
        // linear axis: bins of `bin` positions
        for (ns = 0, i = 0; i < nm; i++) {
            if (!M[i].have_pos || (int)i == base) continue;
            float *x = XY(ns, 0), *y = XY(ns, 1);
            size_t b, cnt = 0;
            for (b = 0; b * bin < n && cnt < 4096; b++) {
                size_t l = b * bin, h = l + bin < n ? l + bin : n, hm = h < M[i].n_pos ? h : M[i].n_pos;
                x[cnt] = (float)(0.5 * (double)(l + 1 + h)); y[cnt++] = (float)(mean_range(M[i].pos, l, hm) -
                                                                               mean_range(M[base].pos, l, h));
            }
            S[ns].label = M[i].name; S[ns].x = x; S[ns].y = y; S[ns].n = cnt; S[ns].rgb = 0; ns++;
        }
        snprintf(title, sizeof title, "%s: NLL - NLL(%s) by position (bins of %zu)", corpus, baseline, bin);
        po.title = title; po.xlabel = "position (bytes read)"; po.ylabel = "delta NLL (nats/byte)";
        snprintf(file, sizeof file, "%s_position.png", png);
        if (ns && mn_plot_lines(file, &po, S, ns) != 0) {
            fprintf(stderr, "lm_report: cannot draw %s\n", file);
            prc = 1;
        }
        // log axis: four bins per octave
        nb = log_bins(n, lo, hi, 64);
        for (ns = 0, i = 0; i < nm; i++) {
            if (!M[i].have_pos || (int)i == base) continue;
            float *x = XY(ns, 0), *y = XY(ns, 1);
            for (k = 0; k < nb; k++) {
                size_t hm = hi[k] < M[i].n_pos ? hi[k] : M[i].n_pos;
                x[k] = (float)log10(0.5 * (double)(lo[k] + 1 + hi[k]));
                y[k] = (float)(mean_range(M[i].pos, lo[k], hm) - mean_range(M[base].pos, lo[k], hi[k]));
            }
            S[ns].label = M[i].name; S[ns].x = x; S[ns].y = y; S[ns].n = nb; S[ns].rgb = 0; ns++;
        }
        snprintf(title, sizeof title, "%s: NLL - NLL(%s) by position, log axis (4 bins per octave)", corpus, baseline);
        po.xlabel = "log10 position";
        snprintf(file, sizeof file, "%s_position_log.png", png);
        if (ns && mn_plot_lines(file, &po, S, ns) != 0) {
            fprintf(stderr, "lm_report: cannot draw %s\n", file);
            prc = 1;
        }
    }
    {   // recall: accuracy and NLL against log2 distance
        mn_plot_opts po; memset(&po, 0, sizeof po);
        for (int which = 0; which < 2; which++) {
            for (ns = 0, i = 0; i < nm; i++) {
                if (!M[i].have_rec) continue;
                float *x = XY(ns, 0), *y = XY(ns, 1);
                for (k = 0; k < M[i].n_dist; k++) {
                    x[k] = (float)log2(M[i].dist[k]);
                    y[k] = (float)(which ? M[i].rec_nll2[k] : M[i].rec_acc[k]);
                }
                S[ns].label = M[i].name; S[ns].x = x; S[ns].y = y; S[ns].n = M[i].n_dist; S[ns].rgb = 0; ns++;
            }
            snprintf(title, sizeof title,
                     which ? "%s: recall, NLL of the repeated string's bytes 2..L"
                           : "%s: recall, argmax accuracy on the repeated string's bytes 2..L",
                     corpus);
            po.title = title; po.xlabel = "log2 distance between the copies (bytes)";
            po.ylabel = which ? "NLL (nats/byte)" : "accuracy";
            snprintf(file, sizeof file, which ? "%s_recall_nll.png" : "%s_recall.png", png);
            if (ns && mn_plot_lines(file, &po, S, ns) != 0) {
                fprintf(stderr, "lm_report: cannot draw %s\n", file);
                prc = 1;
            }
        }
    }
    {   // the CG trade-off: NLL against steps, one line per Mesa model and kind; steps by position per tolerance
        mn_plot_opts po; memset(&po, 0, sizeof po);
        static char labels[R_MAX_MODELS * 4][128];   // a name (64), a setting or a tolerance range
        for (ns = 0, i = 0; i < nm; i++) {
            if (!M[i].have_cg) continue;
            for (int kind = 0; kind < 2 && ns < R_MAX_MODELS * 4; kind++) {
                float *x = XY(ns, 0), *y = XY(ns, 1);
                size_t cnt = 0, idx[R_MAX_SET];
                char t0[16], t1[16];
                for (k = 0; k < M[i].n_set; k++) {
                    // in the order of more work (counts up, tolerances down), not the file's, so that the line
                    // does not double back when --cg_counts listed the counts out of order (0,1,5,10,30,20)
                    if (strcmp(M[i].set_kind[k], kind ? "tol" : "fixed")) continue;
                    for (j = cnt++; j > 0 && (kind ? M[i].set_val[idx[j - 1]] < M[i].set_val[k]
                                                   : M[i].set_val[idx[j - 1]] > M[i].set_val[k]); j--)
                        idx[j] = idx[j - 1];
                    idx[j] = k;
                }
                if (!cnt) continue;
                for (j = 0; j < cnt; j++) { x[j] = (float)M[i].set_steps[idx[j]]; y[j] = (float)M[i].set_nll[idx[j]]; }
                if (kind) {   // the tolerances that were run, e.g. "tolerance 1e-2..1e-5"
                    tol_str(t0, sizeof t0, M[i].set_val[idx[0]]); tol_str(t1, sizeof t1, M[i].set_val[idx[cnt - 1]]);
                    snprintf(labels[ns], sizeof labels[ns], "%s, tolerance %s%s%s", M[i].name, t0,
                             cnt > 1 ? ".." : "", cnt > 1 ? t1 : "");
                } else
                    snprintf(labels[ns], sizeof labels[ns], "%s, fixed count", M[i].name);
                S[ns].label = labels[ns]; S[ns].x = x; S[ns].y = y; S[ns].n = cnt; S[ns].rgb = 0; ns++;
            }
        }
        snprintf(title, sizeof title, "%s: decoding NLL against mean CG steps per token", corpus);
        po.title = title; po.xlabel = "mean CG steps per token, head and layer"; po.ylabel = "NLL (nats/byte)";
        snprintf(file, sizeof file, "%s_cg.png", png);
        if (ns && mn_plot_lines(file, &po, S, ns) != 0) {
            fprintf(stderr, "lm_report: cannot draw %s\n", file);
            prc = 1;
        }
        for (ns = 0, i = 0; i < nm; i++) {
            size_t lo[64], hi[64], nb;
            if (!M[i].have_cg || !M[i].cgp_n) continue;
            nb = log_bins(M[i].cgp_n, lo, hi, 64);
            for (k = 0; k < M[i].n_set && ns < R_MAX_MODELS * 4; k++) {
                float *x = XY(ns, 0), *y = XY(ns, 1);
                if (strcmp(M[i].set_kind[k], "tol") || !M[i].cgp_steps[k]) continue;
                for (j = 0; j < nb; j++) {
                    x[j] = (float)log10(0.5 * (double)(lo[j] + 1 + hi[j]));
                    y[j] = (float)mean_range(M[i].cgp_steps[k], lo[j], hi[j]);
                }
                snprintf(labels[ns], sizeof labels[ns], "%s, %s", M[i].name, M[i].set_name[k]);
                S[ns].label = labels[ns]; S[ns].x = x; S[ns].y = y; S[ns].n = nb; S[ns].rgb = 0; ns++;
            }
        }
        snprintf(title, sizeof title, "%s: CG steps per token by position (dynamic stop)", corpus);
        po.xlabel = "log10 position"; po.ylabel = "mean CG steps per token";
        snprintf(file, sizeof file, "%s_cg_position.png", png);
        if (ns && mn_plot_lines(file, &po, S, ns) != 0) {
            fprintf(stderr, "lm_report: cannot draw %s\n", file);
            prc = 1;
        }
    }
#undef XY
    printf("lm_report: %zu models from %s: %s and %s_*.png\n", nm, dir, md, png);
    free(buf);
    for (i = 0; i < nm; i++) free_model(&M[i]);
    free(M);
    return prc;
}
