/* plot_demo: writes a two-curve line chart, a log-y variant and a 3x4 heatmap.
 *   cc -std=c99 -O2 -Wall -Wextra -Werror -Iexamples examples/plot_demo.c \
 *      -o /tmp/plot_demo $(pkg-config --libs stb) -lm
 *   /tmp/plot_demo /tmp/lines.png /tmp/heat.png [/tmp/logy.png]
 */
#define MN_PLOT_IMPLEMENTATION
#include "plot.h"

#include <math.h>
#include <stdio.h>

#define N 200

int main(int argc, char** argv) {
    static float x[N], train[N], val[N];
    static const float heat[3 * 4] = {
        0.91f, 0.42f, 0.77f, 0.05f,
        0.63f, 0.88f, 0.12f, 0.50f,
        0.99f, NAN, 0.34f, 0.71f   /* one NaN to show the grey cell */
    };
    static const char* const rows[3] = { "copy", "reverse", "sort" };
    static const char* const cols[4] = { "tiny", "small", "base", "large" };
    mn_plot_series s[2];
    mn_plot_opts o = { "Synthetic training curves", "step", "loss", 0, 0, 0 };
    int i, rc;

    if (argc < 3) {
        fprintf(stderr, "usage: %s lines.png heatmap.png [logy.png]\n", argv[0]);
        return 2;
    }
    /* two decaying "loss" curves with a little deterministic wiggle */
    for (i = 0; i < N; ++i) {
        x[i] = (float)(i * 50);
        train[i] = (float)(2.5 * exp(-i / 40.0) + 0.05 * sin(i * 0.7) + 0.3);
        val[i] = (float)(2.6 * exp(-i / 50.0) + 0.45 + 0.002 * i);
    }
    s[0].label = "train"; s[0].x = x; s[0].y = train; s[0].n = N; s[0].rgb = 0;
    s[1].label = "validation"; s[1].x = x; s[1].y = val; s[1].n = N; s[1].rgb = 0;

    rc = mn_plot_lines(argv[1], &o, s, 2);
    if (rc) { fprintf(stderr, "mn_plot_lines: %d\n", rc); return 1; }
    if (argc > 3) {
        o.title = "Same curves, log10 y";
        o.logy = 1;
        rc = mn_plot_lines(argv[3], &o, s, 2);
        if (rc) { fprintf(stderr, "mn_plot_lines (logy): %d\n", rc); return 1; }
    }
    rc = mn_plot_heatmap(argv[2], "Accuracy by task and model", heat, 3, 4, rows, cols, 0.0f, 1.0f);
    if (rc) { fprintf(stderr, "mn_plot_heatmap: %d\n", rc); return 1; }
    printf("wrote %s and %s\n", argv[1], argv[2]);
    return 0;
}
