/* plot.h - tiny line-chart / heatmap PNG writer, stb-style single header.
 *
 *   #define MN_PLOT_IMPLEMENTATION   (in exactly one .c/.cpp file)
 *   #include "plot.h"
 *
 * Uses Debian's libstb-dev: <stb/stb_image_write.h> (implementation lives in
 * libstb.so, link with `pkg-config --libs stb`, i.e. -lstb) and the header-only
 * <stb/stb_easy_font.h> for text. Also needs -lm. Nothing is vendored.
 *
 * Return codes (both functions): 0 ok, -1 bad arguments, -2 nothing to plot,
 * -3 out of memory, -4 could not write/rename the PNG. Never exit()s.
 * The PNG is written to "<path>.tmp" and renamed over <path>, so a failed
 * write leaves any previous plot intact.
 */
#ifndef MN_PLOT_H
#define MN_PLOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line. x may be NULL (then x = 0..n-1). Points whose x or y is not
 * finite (or y <= 0 with logy) are skipped and break the line there.
 * rgb is 0xRRGGBB; 0 picks from the built-in palette by series index. */
typedef struct {
    const char* label;      /* legend text; NULL or "" = not in the legend */
    const float* x;
    const float* y;
    size_t n;
    unsigned int rgb;
} mn_plot_series;

typedef struct {
    const char* title;      /* any of the strings may be NULL */
    const char* xlabel;
    const char* ylabel;
    int width, height;      /* 0 = 800 x 500; otherwise 120..16384 */
    int logy;               /* non-zero: log10 y axis */
} mn_plot_opts;

/* opts may be NULL (defaults). */
int mn_plot_lines(const char* png_path, const mn_plot_opts* opts,
                  const mn_plot_series* series, size_t n_series);

/* values is (rows, cols) row-major; [vmin, vmax] maps onto a white->blue ramp
 * (values outside are clamped), NaN cells are grey. Labels may be NULL
 * (then indices are printed). Each cell shows its value with 2 decimals. */
int mn_plot_heatmap(const char* png_path, const char* title,
                    const float* values, size_t rows, size_t cols,
                    const char* const* row_labels, const char* const* col_labels,
                    float vmin, float vmax);

#ifdef __cplusplus
}
#endif

#endif /* MN_PLOT_H */

#ifdef MN_PLOT_IMPLEMENTATION
#ifndef MN_PLOT__IMPLEMENTED
#define MN_PLOT__IMPLEMENTED

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stb/stb_image_write.h>
#include <stb/stb_easy_font.h>

/* Caps keep w*3 and every pixel coordinate comfortably inside an int. */
#define MN_PLOT__MAX_DIM 16384
/* Ticks live in fixed arrays; nice steps never produce more than ~12. */
#define MN_PLOT__MAX_TICKS 64
/* Grid must differ from background: the legend placer tells data pixels
 * apart from empty ones by comparing against exactly these two colours. */
#define MN_PLOT__BG 0xffffffu
#define MN_PLOT__GRID 0xe3e3e3u
#define MN_PLOT__FG 0x202020u      /* near-black text and frame, softer than 0 */
/* stb_easy_font glyphs: caps occupy rows 0..6, descenders reach row 9. */
#define MN_PLOT__GLYPH_H 10
#define MN_PLOT__CAP_H 7

typedef struct {
    unsigned char* px;          /* RGB, row-major, w*3 bytes a row */
    int w, h;
    int cx0, cy0, cx1, cy1;     /* inclusive clip rectangle for every write */
} mn_plot__img;

/* Hand-rolled instead of isfinite(): that macro is awkward across C99/C++. */
static int mn_plot__finite(double v) { return v == v && v <= DBL_MAX && v >= -DBL_MAX; }

static void mn_plot__clip_all(mn_plot__img* im) {
    im->cx0 = 0; im->cy0 = 0; im->cx1 = im->w - 1; im->cy1 = im->h - 1;
}

static void mn_plot__put(mn_plot__img* im, int x, int y, unsigned rgb) {
    unsigned char* p;
    if (x < im->cx0 || x > im->cx1 || y < im->cy0 || y > im->cy1) return;
    p = im->px + ((size_t)y * (size_t)im->w + (size_t)x) * 3u;
    p[0] = (unsigned char)(rgb >> 16);
    p[1] = (unsigned char)(rgb >> 8);
    p[2] = (unsigned char)rgb;
}

/* Unclipped read; callers stay inside the image (used by legend placement). */
static unsigned mn_plot__get(const mn_plot__img* im, int x, int y) {
    const unsigned char* p = im->px + ((size_t)y * (size_t)im->w + (size_t)x) * 3u;
    return ((unsigned)p[0] << 16) | ((unsigned)p[1] << 8) | (unsigned)p[2];
}

/* Filled rectangle [x0,x1) x [y0,y1), clamped to the clip rect. */
static void mn_plot__rect(mn_plot__img* im, int x0, int y0, int x1, int y1, unsigned rgb) {
    int x, y;
    if (x0 < im->cx0) x0 = im->cx0;
    if (y0 < im->cy0) y0 = im->cy0;
    if (x1 > im->cx1 + 1) x1 = im->cx1 + 1;
    if (y1 > im->cy1 + 1) y1 = im->cy1 + 1;
    for (y = y0; y < y1; ++y)
        for (x = x0; x < x1; ++x) mn_plot__put(im, x, y, rgb);
}

/* 1 px outline of [x0,x1] x [y0,y1] (inclusive corners). */
static void mn_plot__frame(mn_plot__img* im, int x0, int y0, int x1, int y1, unsigned rgb) {
    mn_plot__rect(im, x0, y0, x1 + 1, y0 + 1, rgb);
    mn_plot__rect(im, x0, y1, x1 + 1, y1 + 1, rgb);
    mn_plot__rect(im, x0, y0, x0 + 1, y1 + 1, rgb);
    mn_plot__rect(im, x1, y0, x1 + 1, y1 + 1, rgb);
}

/* Bresenham, 2 px wide: the second pixel goes across the major direction so
 * shallow and steep lines come out equally thick. */
static void mn_plot__line(mn_plot__img* im, int x0, int y0, int x1, int y1, unsigned rgb) {
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy, e2, steep = -dy > dx;   /* err = dx - |dy|: integer-only stepping */
    for (;;) {
        mn_plot__put(im, x0, y0, rgb);
        if (steep) mn_plot__put(im, x0 + 1, y0, rgb);
        else mn_plot__put(im, x0, y0 + 1, rgb);
        if (x0 == x1 && y0 == y1) break;
        e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

/* stb_easy_font indexes a table with (c - 32) and wants a mutable char*, so
 * copy into a local buffer and replace anything outside printable ASCII. */
static void mn_plot__ascii(char* dst, size_t cap, const char* s) {
    size_t i = 0;
    if (s)
        for (; s[i] && i + 1 < cap; ++i) {
            unsigned char c = (unsigned char)s[i];
            dst[i] = (c >= 32 && c < 127) ? (char)c : '?';
        }
    dst[i] = 0;
}

static int mn_plot__text_w(const char* s, int scale) {
    char buf[256];
    mn_plot__ascii(buf, sizeof buf, s);
    return stb_easy_font_width(buf) * scale;
}

/* Rasterises stb_easy_font's quads, scaled by an integer factor. (x,y) is the
 * top-left of the text box; vertical text reads bottom-to-top (rotated 90 deg
 * CCW) and then the box is text_h wide and text_w tall. One glyph at a time
 * keeps the vertex buffer small and fixed-size (no glyph has > 16 quads). */
static void mn_plot__text(mn_plot__img* im, int x, int y, const char* s, int scale,
                          unsigned rgb, int vertical) {
    char buf[256], one[2];
    float vb[16 * 4 * 4];
    int i, q, nq, W, pen = 0;
    mn_plot__ascii(buf, sizeof buf, s);
    W = stb_easy_font_width(buf);      /* rotation maps font x onto W - x */
    one[1] = 0;
    for (i = 0; buf[i]; ++i) {
        one[0] = buf[i];
        nq = stb_easy_font_print((float)pen, 0.f, one, NULL, vb, (int)sizeof vb);
        for (q = 0; q < nq; ++q) {
            /* vertices are 16 bytes (x,y,z,rgba); corners 0 and 2 span the quad */
            int qx0 = (int)floor(vb[q * 16 + 0] + 0.5f), qy0 = (int)floor(vb[q * 16 + 1] + 0.5f);
            int qx1 = (int)floor(vb[q * 16 + 8] + 0.5f), qy1 = (int)floor(vb[q * 16 + 9] + 0.5f);
            if (!vertical)
                mn_plot__rect(im, x + qx0 * scale, y + qy0 * scale, x + qx1 * scale, y + qy1 * scale, rgb);
            else
                mn_plot__rect(im, x + qy0 * scale, y + (W - qx1) * scale, x + qy1 * scale, y + (W - qx0) * scale, rgb);
        }
        pen += stb_easy_font_width(one);   /* same advance stb would apply itself */
    }
}

/* Horizontal text centred on cx. */
static void mn_plot__text_c(mn_plot__img* im, int cx, int y, const char* s, int scale, unsigned rgb) {
    mn_plot__text(im, cx - mn_plot__text_w(s, scale) / 2, y, s, scale, rgb, 0);
}

/* Heckbert-style "nice" step: 1, 2 or 5 times a power of ten, near span/n. */
static double mn_plot__nice_step(double span, int n) {
    double raw = span / (n > 1 ? n : 1), mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

/* Multiples of step inside [lo,hi]; computed as k*step (not by repeated
 * addition) so 0.1+0.2 style drift never shows up in the labels. */
static int mn_plot__ticks(double lo, double hi, double step, double* out) {
    /* the 1e-9 slack keeps a tick that sits exactly on an end despite rounding */
    double k0 = ceil(lo / step - 1e-9), k1 = floor(hi / step + 1e-9), k;
    int n = 0;
    if (!mn_plot__finite(k0) || !mn_plot__finite(k1) || k1 - k0 > MN_PLOT__MAX_TICKS - 1) return 0;
    for (k = k0; k <= k1; k += 1.0) {
        double v = k * step;
        out[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;    /* avoid "-0" and "1e-17" */
    }
    return n;
}

/* %g with enough significant digits to tell neighbouring ticks apart. Whole
 * numbers stay in full below 1e6 ("2000", not "2e+03") and also above it when
 * 3+ digits matter ("1234600", not "1.2346e+06"); round ones go "2e+06". */
static void mn_plot__fmt(char* buf, size_t cap, double v, double step) {
    int prec = 1;
    if (v != 0.0 && step > 0.0) {
        int mag = (int)floor(log10(fabs(v)) + 1e-9);
        prec = mag - (int)floor(log10(step) + 1e-9) + 1;
        if (prec < mag + 1 && mag < 6) prec = mag + 1;   /* %g goes 1e+03 otherwise */
        if (prec < 1) prec = 1;
        if (prec > 12) prec = 12;
        if (step >= 1.0 && prec >= 3 && fabs(v) < 1e12) {
            snprintf(buf, cap, "%.0f", v);
            return;
        }
    }
    snprintf(buf, cap, "%.*g", prec, v);
}

/* One axis: range in plot space (log10 already applied for logy) plus ticks.
 * pos are tick positions in plot space, lab the text printed there. */
typedef struct {
    double lo, hi;
    int n;
    double pos[MN_PLOT__MAX_TICKS];
    char lab[MN_PLOT__MAX_TICKS][32];
} mn_plot__axis;

/* Ticks aiming at `target` intervals. Log axes: whole decades when the range
 * spans several, 1-2-5 steps when it spans about one to a few (decades alone
 * would give one or two ticks), plain linear nice values when narrower. */
static void mn_plot__make_ticks(mn_plot__axis* a, int target, int logy) {
    int i;
    double step, span = a->hi - a->lo, vals[MN_PLOT__MAX_TICKS];
    if (logy && span >= 2.5) {
        /* step in whole decades, so every tick is an exact power of ten */
        step = floor(mn_plot__nice_step(span, target) + 0.5);
        a->n = mn_plot__ticks(a->lo, a->hi, step < 1.0 ? 1.0 : step, a->pos);
        for (i = 0; i < a->n; ++i) snprintf(a->lab[i], sizeof a->lab[i], "%g", pow(10.0, a->pos[i]));
        return;
    }
    if (logy && span >= 0.8) {
        /* about one decade: add 3 too, else only 2-3 ticks would land */
        static const double mant[4] = { 1.0, 2.0, 3.0, 5.0 };
        double d;
        a->n = 0;
        for (d = floor(a->lo); d <= a->hi && a->n < MN_PLOT__MAX_TICKS; d += 1.0)
            for (i = 0; i < 4 && a->n < MN_PLOT__MAX_TICKS; ++i) {
                double p = d + log10(mant[i]);
                if (p < a->lo || p > a->hi || (i == 2 && span >= 1.5)) continue;
                a->pos[a->n] = p;
                snprintf(a->lab[a->n], sizeof a->lab[a->n], "%g", mant[i] * pow(10.0, d));
                ++a->n;
            }
        return;
    }
    if (logy) {
        /* nice values picked in data space, then placed at their log position */
        double lo = pow(10.0, a->lo), hi = pow(10.0, a->hi);
        step = mn_plot__nice_step(hi - lo, target);
        a->n = mn_plot__ticks(lo, hi, step, vals);
        for (i = 0; i < a->n; ++i) {
            mn_plot__fmt(a->lab[i], sizeof a->lab[i], vals[i], step);
            a->pos[i] = log10(vals[i]);
        }
        return;
    }
    step = mn_plot__nice_step(span, target);
    a->n = mn_plot__ticks(a->lo, a->hi, step, a->pos);
    for (i = 0; i < a->n; ++i) mn_plot__fmt(a->lab[i], sizeof a->lab[i], a->pos[i], step);
}

/* Pads [lo,hi] by 5% a side so lines never sit on the frame; a zero-width
 * range (one point, constant y) is widened instead, so the mapping never
 * divides by zero: +-10% of the value, +-1 around 0, +-0.1 decade on log. */
static void mn_plot__pad(double* lo, double* hi, int logspace) {
    double span = *hi - *lo;
    if (!(span > 1e-12 * (fabs(*lo) + fabs(*hi)))) {   /* "zero" relative to magnitude */
        double c = 0.5 * (*lo + *hi);
        double d = logspace ? 0.1 : (c != 0.0 ? fabs(c) * 0.1 : 1.0);
        *lo = c - d; *hi = c + d;
        return;
    }
    *lo -= 0.05 * span;
    *hi += 0.05 * span;
}

/* matplotlib's tab10: familiar, and distinguishable for most readers. */
static const unsigned mn_plot__palette[10] = {
    0x1f77b4u, 0xff7f0eu, 0x2ca02cu, 0xd62728u, 0x9467bdu,
    0x8c564bu, 0xe377c2u, 0x7f7f7fu, 0xbcbd22u, 0x17becfu
};

/* Indexed by series position, so giving one series an explicit colour does
 * not shift the automatic colours of the others. */
static unsigned mn_plot__color(const mn_plot_series* s, size_t i) {
    return s->rgb ? (s->rgb & 0xffffffu) : mn_plot__palette[i % 10];
}

/* Fetches point j of a series in plot space; 0 if it must be skipped. */
static int mn_plot__point(const mn_plot_series* s, size_t j, int logy, double* x, double* y) {
    *x = s->x ? (double)s->x[j] : (double)j;   /* no x: plot against the index */
    *y = (double)s->y[j];
    if (!mn_plot__finite(*x) || !mn_plot__finite(*y)) return 0;
    if (logy) {
        if (*y <= 0.0) return 0;
        *y = log10(*y);
    }
    return 1;
}

/* stbi_write_png() ignores fwrite/fclose errors (a full disk would yield a
 * truncated file that we then rename over a good plot), so encode through
 * the callback API and check every write ourselves. */
typedef struct { FILE* f; int ok; } mn_plot__sink;

static void mn_plot__sink_write(void* ctx, void* data, int size) {
    mn_plot__sink* k = (mn_plot__sink*)ctx;
    if (k->ok && size > 0 && fwrite(data, 1, (size_t)size, k->f) != (size_t)size) k->ok = 0;
}

/* Write to "<path>.tmp" then rename, so a failed write keeps the old file. */
static int mn_plot__save(const char* path, const mn_plot__img* im) {
    size_t len = strlen(path);
    char* tmp = (char*)malloc(len + 5);
    mn_plot__sink k;
    int rc = 0;
    if (!tmp) return -3;
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    k.f = fopen(tmp, "wb");
    k.ok = k.f != NULL;
    if (!k.f) { free(tmp); return -4; }   /* nothing of ours to clean up */
    if (!stbi_write_png_to_func(mn_plot__sink_write, &k, im->w, im->h, 3, im->px, im->w * 3)) k.ok = 0;
    if (fclose(k.f) != 0) k.ok = 0;          /* buffered write errors surface here */
    /* rename() replaces atomically on POSIX: readers see old or new, never half */
    if (!k.ok || rename(tmp, path) != 0) {
        remove(tmp);
        rc = -4;
    }
    free(tmp);
    return rc;
}

/* The only allocation besides the temp name; callers free im->px on every
 * path after this succeeds, and nothing is allocated before it. */
static int mn_plot__alloc(mn_plot__img* im, int w, int h) {
    im->w = w; im->h = h;
    im->px = (unsigned char*)malloc((size_t)w * (size_t)h * 3u);
    if (!im->px) return -3;
    memset(im->px, 0xff, (size_t)w * (size_t)h * 3u);   /* white background */
    mn_plot__clip_all(im);
    return 0;
}

/* Plot space -> pixel; clamped so absurd values cannot overflow an int. */
static int mn_plot__map(double v, double lo, double hi, int p0, int p1) {
    double t = (v - lo) / (hi - lo), p = p0 + t * (p1 - p0);
    if (p < -1e6) p = -1e6;
    if (p > 1e6) p = 1e6;
    return (int)floor(p + 0.5);
}

/* Legend inside the plot, in whichever corner covers the fewest drawn data
 * pixels (counted on the rendered image, so lines count, not just points).
 * Drops to the small font when it would cover much of the plot, and is left
 * out altogether when even that does not fit inside the frame. */
static void mn_plot__legend(mn_plot__img* im, const mn_plot_series* series, size_t n_series,
                            int n_leg, int s, int L, int T, int R, int B) {
    int ls = s, lw, row, sw, bw, bh, best = 0, best_cnt = -1, c, bx, by, yy, xx;
    size_t i;
    for (;;) {
        for (i = 0, lw = 0; i < n_series; ++i)
            if (series[i].label && mn_plot__text_w(series[i].label, ls) > lw) lw = mn_plot__text_w(series[i].label, ls);
        row = MN_PLOT__GLYPH_H * ls + 4 * ls;
        sw = 14 * ls;                                  /* colour swatch length */
        bw = 6 * ls + sw + 4 * ls + lw + 6 * ls;       /* pad, swatch, gap, text, pad */
        bh = 4 * ls + n_leg * row;
        if (ls == 1 || (2 * bw < R - L && 2 * bh < B - T)) break;
        ls = 1;
    }
    if (bw > R - L - 16 || bh > B - T - 16) return;
    /* corners in order of preference: top-right, top-left, bottom-right, bottom-left */
    for (c = 0; c < 4; ++c) {
        int x0 = (c & 1) ? L + 8 : R - 8 - bw, y0 = (c & 2) ? B - 8 - bh : T + 8, cnt = 0;
        for (yy = y0; yy < y0 + bh; ++yy)
            for (xx = x0; xx < x0 + bw; ++xx) {
                unsigned p = mn_plot__get(im, xx, yy);
                cnt += p != MN_PLOT__BG && p != MN_PLOT__GRID;
            }
        if (best_cnt < 0 || cnt < best_cnt) { best_cnt = cnt; best = c; }
    }
    bx = (best & 1) ? L + 8 : R - 8 - bw;
    by = (best & 2) ? B - 8 - bh : T + 8;
    mn_plot__rect(im, bx, by, bx + bw, by + bh, MN_PLOT__BG);
    mn_plot__frame(im, bx, by, bx + bw - 1, by + bh - 1, 0xa0a0a0u);
    yy = by + 4 * ls;
    for (i = 0; i < n_series; ++i) {
        int mid = yy + MN_PLOT__CAP_H * ls / 2;     /* swatch centred on the caps */
        if (!series[i].label || !*series[i].label) continue;
        mn_plot__rect(im, bx + 6 * ls, mid - ls, bx + 6 * ls + sw, mid + ls + 1, mn_plot__color(&series[i], i));
        mn_plot__text(im, bx + 6 * ls + sw + 4 * ls, yy, series[i].label, ls, MN_PLOT__FG, 0);
        yy += row;
    }
}

int mn_plot_lines(const char* png_path, const mn_plot_opts* opts,
                  const mn_plot_series* series, size_t n_series) {
    mn_plot_opts o;
    mn_plot__img im;
    mn_plot__axis ax, ay;
    size_t i, j;
    int any = 0, rc, k, s, ts, th, pad, L, R, T, B, maxw, target, last, n_leg = 0;
    double x, y;

    /* Every check happens before the one allocation, so early returns leak nothing. */
    if (!png_path || !*png_path || (n_series && !series)) return -1;
    if (opts) o = *opts;
    else memset(&o, 0, sizeof o);
    if (!o.width) o.width = 800;     /* each side defaults on its own */
    if (!o.height) o.height = 500;
    if (o.width < 120 || o.height < 120 || o.width > MN_PLOT__MAX_DIM || o.height > MN_PLOT__MAX_DIM) return -1;

    /* Data range over every plottable point, in plot space (log10 y for logy),
     * so skipped points can never stretch the axes. */
    ax.lo = ay.lo = DBL_MAX;
    ax.hi = ay.hi = -DBL_MAX;
    for (i = 0; i < n_series; ++i) {
        if (series[i].n && !series[i].y) return -1;
        for (j = 0; j < series[i].n; ++j) {
            if (!mn_plot__point(&series[i], j, o.logy, &x, &y)) continue;
            any = 1;
            if (x < ax.lo) ax.lo = x;
            if (x > ax.hi) ax.hi = x;
            if (y < ay.lo) ay.lo = y;
            if (y > ay.hi) ay.hi = y;
        }
    }
    if (!any) return -2;
    mn_plot__pad(&ax.lo, &ax.hi, 0);
    mn_plot__pad(&ay.lo, &ay.hi, o.logy);

    /* Text scale follows image size: the easy_font glyph is only 7 px tall. */
    s = (o.width >= 500 && o.height >= 350) ? 2 : 1;
    th = MN_PLOT__GLYPH_H * s;
    pad = 4 + 3 * s;
    ts = mn_plot__text_w(o.title, s + 1) > o.width - 2 * pad ? s : s + 1;   /* long title: smaller */

    /* Vertical layout first (fixed by text heights), then y ticks, whose
     * label widths decide the left margin, then x ticks to fit the width. */
    /* L, R, T, B: the plot frame, inclusive, in pixels */
    T = pad + (o.title && *o.title ? MN_PLOT__GLYPH_H * ts + 8 : 0);
    B = o.height - 1 - (pad + th + 6 + (o.xlabel && *o.xlabel ? th + 6 : 0));
    if (B - T < 30) return -1;                   /* text would leave no room to plot */
    /* short plots get fewer y ticks so labels keep ~3 text heights apart */
    target = (B - T) / (th * 3);
    mn_plot__make_ticks(&ay, target < 2 ? 2 : target > 5 ? 5 : target, o.logy);
    maxw = 0;
    for (k = 0; k < ay.n; ++k)
        if (mn_plot__text_w(ay.lab[k], s) > maxw) maxw = mn_plot__text_w(ay.lab[k], s);
    L = pad + (o.ylabel && *o.ylabel ? th + 8 : 0) + maxw + 10;   /* ylabel, tick text, tick */
    R = o.width - 1 - 16 * s;
    /* fewer x ticks until the widest label plus two glyphs fits between ticks */
    for (target = 5; target >= 1; --target) {
        int gap;
        mn_plot__make_ticks(&ax, target, 0);
        maxw = 0;
        for (k = 0; k < ax.n; ++k)
            if (mn_plot__text_w(ax.lab[k], s) > maxw) maxw = mn_plot__text_w(ax.lab[k], s);
        /* ticks are evenly spaced, so the first gap stands for all of them */
        gap = ax.n > 1 ? mn_plot__map(ax.pos[1], ax.lo, ax.hi, L, R) - mn_plot__map(ax.pos[0], ax.lo, ax.hi, L, R)
                       : R - L;
        if (gap > maxw + 12 * s) break;
    }
    /* x labels are centred on their ticks: keep the outermost ones inside
     * the image (moving an edge inwards only moves those ticks inwards too) */
    if (ax.n) {
        int over = mn_plot__map(ax.pos[ax.n - 1], ax.lo, ax.hi, L, R) + mn_plot__text_w(ax.lab[ax.n - 1], s) / 2 -
                   (o.width - 4);
        if (over > 0) R -= over;
        over = 4 - (mn_plot__map(ax.pos[0], ax.lo, ax.hi, L, R) - mn_plot__text_w(ax.lab[0], s) / 2);
        if (over > 0) L += over;
    }
    if (R - L < 30) return -1;

    if ((rc = mn_plot__alloc(&im, o.width, o.height)) != 0) return rc;

    /* grid, then data clipped to the plot rect, then the frame on top */
    for (k = 0; k < ax.n; ++k) {
        int px = mn_plot__map(ax.pos[k], ax.lo, ax.hi, L, R);
        mn_plot__rect(&im, px, T, px + 1, B + 1, MN_PLOT__GRID);
    }
    for (k = 0; k < ay.n; ++k) {
        int py = mn_plot__map(ay.pos[k], ay.lo, ay.hi, B, T);
        mn_plot__rect(&im, L, py, R + 1, py + 1, MN_PLOT__GRID);
    }
    /* 2 px lines would otherwise spill one pixel over the frame */
    im.cx0 = L + 1; im.cy0 = T + 1; im.cx1 = R - 1; im.cy1 = B - 1;
    for (i = 0; i < n_series; ++i) {
        const mn_plot_series* se = &series[i];
        unsigned c = mn_plot__color(se, i);
        int have_prev = 0, px0 = 0, py0 = 0;
        n_leg += se->label && *se->label;
        for (j = 0; j < se->n; ++j) {
            int px, py, ok = mn_plot__point(se, j, o.logy, &x, &y);
            if (!ok) { have_prev = 0; continue; }      /* gap: never bridge a bad point */
            px = mn_plot__map(x, ax.lo, ax.hi, L, R);
            py = mn_plot__map(y, ay.lo, ay.hi, B, T);
            if (have_prev) mn_plot__line(&im, px0, py0, px, py, c);
            else {
                /* a point with no plottable neighbours would be invisible: dot it */
                double nx, ny;
                if (j + 1 >= se->n || !mn_plot__point(se, j + 1, o.logy, &nx, &ny))
                    mn_plot__rect(&im, px - 2, py - 2, px + 3, py + 3, c);
            }
            px0 = px; py0 = py; have_prev = 1;
        }
    }
    mn_plot__clip_all(&im);                      /* axes text lives outside the frame */
    mn_plot__frame(&im, L, T, R, B, MN_PLOT__FG);

    /* Tick marks and labels. A label that would touch the previous one is
     * left out (its tick and grid line stay): the last line of defence
     * against overlap when ticks are unevenly spaced, as on log axes. */
    /* x labels left to right: `last` is the right edge of the previous one */
    for (k = 0, last = -1000000; k < ax.n; ++k) {
        int px = mn_plot__map(ax.pos[k], ax.lo, ax.hi, L, R), w = mn_plot__text_w(ax.lab[k], s);
        mn_plot__rect(&im, px, B + 1, px + 1, B + 5, MN_PLOT__FG);
        if (px - w / 2 < last + 4 * s) continue;
        mn_plot__text_c(&im, px, B + 8, ax.lab[k], s, MN_PLOT__FG);
        last = px - w / 2 + w;
    }
    /* y ticks run bottom-up, so `last` is the top edge of the label below */
    for (k = 0, last = 1000000; k < ay.n; ++k) {
        int py = mn_plot__map(ay.pos[k], ay.lo, ay.hi, B, T), top = py - MN_PLOT__CAP_H * s / 2;
        mn_plot__rect(&im, L - 4, py, L, py + 1, MN_PLOT__FG);
        if (top + MN_PLOT__CAP_H * s + 3 * s > last) continue;
        mn_plot__text(&im, L - 8 - mn_plot__text_w(ay.lab[k], s), top, ay.lab[k], s, MN_PLOT__FG, 0);
        last = top;
    }
    if (o.title && *o.title) {
        int cx = (L + R) / 2, w = mn_plot__text_w(o.title, ts);
        if (cx + w / 2 > o.width - pad) cx = o.width - pad - w / 2;
        if (cx - w / 2 < pad) cx = pad + w / 2;
        mn_plot__text_c(&im, cx, pad, o.title, ts, MN_PLOT__FG);
    }
    if (o.xlabel && *o.xlabel) mn_plot__text_c(&im, (L + R) / 2, o.height - pad - th, o.xlabel, s, MN_PLOT__FG);
    if (o.ylabel && *o.ylabel) {
        /* rotated: its length runs vertically, centred on the frame */
        int h = mn_plot__text_w(o.ylabel, s), cy = (T + B) / 2 - h / 2;
        mn_plot__text(&im, pad, cy < 2 ? 2 : cy, o.ylabel, s, MN_PLOT__FG, 1);
    }

    /* last, so the corner search sees every line that is already drawn */
    if (n_leg) mn_plot__legend(&im, series, n_series, n_leg, s, L, T, R, B);

    rc = mn_plot__save(png_path, &im);
    free(im.px);
    return rc;
}

/* White -> mid blue -> dark blue (matplotlib "Blues" stops). The middle stop
 * keeps mid values visibly blue; a straight white-navy blend looks grey. */
static unsigned mn_plot__ramp(double t) {
    static const unsigned stops[3] = { 0xf7fbffu, 0x6baed6u, 0x08306bu };
    unsigned a, b, out = 0;
    int sh;
    double u;
    if (!(t > 0.0)) t = 0.0;
    if (t > 1.0) t = 1.0;
    a = t < 0.5 ? stops[0] : stops[1];
    b = t < 0.5 ? stops[1] : stops[2];
    u = t < 0.5 ? t * 2.0 : (t - 0.5) * 2.0;
    for (sh = 0; sh <= 16; sh += 8) {           /* blue, green, red channels */
        double ca = (double)((a >> sh) & 0xffu), cb = (double)((b >> sh) & 0xffu);
        out |= (unsigned)floor(ca + (cb - ca) * u + 0.5) << sh;
    }
    return out;
}

/* Cell text: "NaN" spelled out because printf may say "nan" or "-nan". */
static void mn_plot__cell_fmt(char* buf, size_t cap, float v) {
    if (v != v) snprintf(buf, cap, "NaN");
    else snprintf(buf, cap, "%.2f", (double)v);
}

/* Missing label array: print the index; a NULL entry in an array: blank. */
static const char* mn_plot__label(const char* const* labels, size_t i, char* buf, size_t cap) {
    if (labels) return labels[i] ? labels[i] : "";
    snprintf(buf, cap, "%lu", (unsigned long)i);
    return buf;
}

int mn_plot_heatmap(const char* png_path, const char* title,
                    const float* values, size_t rows, size_t cols,
                    const char* const* row_labels, const char* const* col_labels,
                    float vmin, float vmax) {
    /* no size option: the image is sized to fit its text at the large font */
    const int s = 2, ts = 3, th = MN_PLOT__GLYPH_H * s, pad = 12;
    mn_plot__img im;
    char buf[64], ib[32];
    size_t r, c;
    int rc, cell_w = 0, cell_h = th + 14, row_w = 0, col_w = 0, col_vert, col_h, title_h, cbar_w;
    int gx, gy, W, H;
    double span;

    if (!png_path || !*png_path || !values || !(vmin <= vmax) ||
        !mn_plot__finite(vmin) || !mn_plot__finite(vmax)) return -1;
    if (!rows || !cols) return -2;
    if (rows > 4096 || cols > 4096) return -1;   /* keeps rows*cols and the int maths sane */

    /* size everything from the text it has to hold */
    for (r = 0; r < rows * cols; ++r) {
        mn_plot__cell_fmt(buf, sizeof buf, values[r]);
        if (mn_plot__text_w(buf, s) > cell_w) cell_w = mn_plot__text_w(buf, s);
    }
    cell_w += 16;                                /* 8 px of air either side */
    for (r = 0; r < rows; ++r) {
        int w = mn_plot__text_w(mn_plot__label(row_labels, r, ib, sizeof ib), s);
        if (w > row_w) row_w = w;
    }
    for (c = 0; c < cols; ++c) {
        int w = mn_plot__text_w(mn_plot__label(col_labels, c, ib, sizeof ib), s);
        if (w > col_w) col_w = w;
    }
    /* Column labels wider than a cell are turned vertical rather than
     * widening every cell (model names are long, values are short). */
    col_vert = col_w > cell_w - 4;
    col_h = col_vert ? col_w + 8 : th + 8;
    title_h = title && *title ? MN_PLOT__GLYPH_H * ts + 10 : 0;
    mn_plot__cell_fmt(buf, sizeof buf, vmin);
    cbar_w = mn_plot__text_w(buf, s);
    mn_plot__cell_fmt(buf, sizeof buf, vmax);
    if (mn_plot__text_w(buf, s) > cbar_w) cbar_w = mn_plot__text_w(buf, s);
    cbar_w += 16 * s + 6;                        /* bar, gap, end labels */

    /* gx, gy: top-left of the cell grid */
    gx = pad + row_w + 8;
    gy = pad + title_h + col_h;
    W = gx + (int)cols * cell_w + pad + cbar_w + pad;
    H = gy + (int)rows * cell_h + pad;
    if (title && *title && mn_plot__text_w(title, ts) + 2 * pad > W) W = mn_plot__text_w(title, ts) + 2 * pad;
    if (W > MN_PLOT__MAX_DIM || H > MN_PLOT__MAX_DIM) return -1;
    if ((rc = mn_plot__alloc(&im, W, H)) != 0) return rc;

    if (title && *title) mn_plot__text_c(&im, W / 2, pad, title, ts, MN_PLOT__FG);
    span = (double)vmax - (double)vmin;
    /* row labels right-aligned against the grid, centred on their row */
    for (r = 0; r < rows; ++r) {
        const char* rl = mn_plot__label(row_labels, r, ib, sizeof ib);
        int y0 = gy + (int)r * cell_h;
        mn_plot__text(&im, gx - 8 - mn_plot__text_w(rl, s), y0 + (cell_h - MN_PLOT__CAP_H * s) / 2, rl, s,
                      MN_PLOT__FG, 0);
        for (c = 0; c < cols; ++c) {
            float v = values[r * cols + c];
            int x0 = gx + (int)c * cell_w;
            double t = span > 0.0 ? ((double)v - vmin) / span : 0.5;   /* vmin == vmax: mid */
            unsigned fill = v != v ? 0xbdbdbdu : mn_plot__ramp(t);
            /* dark cells need light text to stay readable */
            unsigned ink = (v == v && t > 0.55) ? 0xffffffu : MN_PLOT__FG;
            mn_plot__rect(&im, x0 + 1, y0 + 1, x0 + cell_w, y0 + cell_h, fill);   /* 1 px white seams */
            mn_plot__cell_fmt(buf, sizeof buf, v);
            mn_plot__text_c(&im, x0 + cell_w / 2 + 1, y0 + (cell_h - MN_PLOT__CAP_H * s) / 2, buf, s, ink);
        }
    }
    for (c = 0; c < cols; ++c) {
        const char* cl = mn_plot__label(col_labels, c, ib, sizeof ib);
        int cx = gx + (int)c * cell_w + cell_w / 2;
        /* vertical labels end just above the grid, reading upwards */
        if (col_vert)
            mn_plot__text(&im, cx - MN_PLOT__CAP_H * s / 2, gy - 6 - mn_plot__text_w(cl, s), cl, s, MN_PLOT__FG, 1);
        else mn_plot__text_c(&im, cx, gy - 6 - MN_PLOT__CAP_H * s, cl, s, MN_PLOT__FG);
    }

    /* colour bar: ramp from vmin (bottom) to vmax (top), labelled at the ends */
    {
        int bx = gx + (int)cols * cell_w + pad, by0 = gy + 1, by1 = gy + (int)rows * cell_h;
        int y;
        for (y = by0; y <= by1; ++y)
            mn_plot__rect(&im, bx, y, bx + 8 * s, y + 1,
                          mn_plot__ramp(by1 > by0 ? (double)(by1 - y) / (by1 - by0) : 0.5));
        mn_plot__frame(&im, bx, by0, bx + 8 * s - 1, by1, 0xa0a0a0u);
        mn_plot__cell_fmt(buf, sizeof buf, vmax);
        mn_plot__text(&im, bx + 8 * s + 6, by0, buf, s, MN_PLOT__FG, 0);
        mn_plot__cell_fmt(buf, sizeof buf, vmin);
        mn_plot__text(&im, bx + 8 * s + 6, by1 - MN_PLOT__CAP_H * s, buf, s, MN_PLOT__FG, 0);
    }

    rc = mn_plot__save(png_path, &im);
    free(im.px);
    return rc;
}

#endif /* MN_PLOT__IMPLEMENTED */
#endif /* MN_PLOT_IMPLEMENTATION */
