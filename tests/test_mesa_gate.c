// The Mesa forget-gate initialisation knob (mn_config.mesa_gate_bias):
//   - the default (0) leaves every parameter as before the knob existed: a_proj.bias = 0;
//   - a bias b sets each Mesa layer's a_proj.bias to b and changes no other parameter (same seed, same
//     draws: the knob writes a constant, it takes nothing from the random stream); layers of other mixers
//     and models without a Mesa layer are untouched;
//   - the initial gamma, computed here from the parameters alone (RMSNorm of the embedding, the gate's
//     row dot product plus the bias, a sigmoid: the layer's first forget gate, written out independently),
//     averages 1/2 by default and 0.95 for b = log 19 (every token and head in (0.90, 0.99));
//   - a value that is not a finite number in [-50, 50] is MN_ERR_CONFIG and builds nothing.
// cc -std=c99 -O2 -Wall -Wextra -Werror -I. -Itests tests/test_mesa_gate.c -o build/test_mesa_gate -lm
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include "testutil.h"

// the first element of the named tensor, or NULL
static const mn_real* tensor(const mn_model* m, const char* name, size_t* numel) {
    size_t i;
    for (i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) {
            if (numel) *numel = m->tensors[i].numel;
            return m->params + m->tensors[i].offset;
        }
    return NULL;
}

static void config(mn_config* c, const char* pattern, double bias) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 40; c->d_model = 64; c->n_layer = 2; c->n_head = 4; c->max_seq_len = 64;
    c->pattern = pattern; c->seed = 7; c->mesa_gate_bias = bias;
}

// gamma = sigmoid(a_proj.weight[h] . rmsnorm(emb[tok]) + a_proj.bias[h]) of layer 0 for every token and head:
// the block's input is the embedding, its mixer reads attn_norm(x) (weight ones at init, eps norm_eps)
static void gammas(const mn_model* m, double* mean, double* lo, double* hi) {
    size_t C = m->cfg.d_model, H = m->cfg.n_head, V = m->cfg.vocab_size, tok, h, i, n = 0;
    const mn_real* emb = tensor(m, "model.embeddings.weight", NULL);
    const mn_real* nw = tensor(m, "model.layers.0.attn_norm.weight", NULL);
    const mn_real* w = tensor(m, "model.layers.0.attn.a_proj.weight", NULL);
    const mn_real* b = tensor(m, "model.layers.0.attn.a_proj.bias", NULL);
    double sum = 0;
    *lo = 1; *hi = 0;
    if (!emb || !nw || !w || !b) { *mean = -1; return; }
    for (tok = 0; tok < V; tok++) {
        double ss = 0, a;
        for (i = 0; i < C; i++) ss += (double)emb[tok * C + i] * emb[tok * C + i];
        double r = 1.0 / sqrt(ss / (double)C + m->cfg.norm_eps);
        for (h = 0; h < H; h++) {
            a = b[h];
            for (i = 0; i < C; i++) a += (double)w[h * C + i] * emb[tok * C + i] * r * nw[i];
            double g = 1.0 / (1.0 + exp(-a));
            sum += g; n++;
            if (g < *lo) *lo = g;
            if (g > *hi) *hi = g;
        }
    }
    *mean = sum / (double)n;
}

int main(void) {
    const double b95 = log(19.0);   // sigmoid(log 19) = 19/20
    // the patterns and, for each, the Mesa layers (whose a_proj.bias is the knob's): "hawk,mesa" cycles
    // hawk, mesa over the two layers; gdn has an a_proj too, but no such bias
    const char* patterns[3] = { "mesa", "hawk,mesa", "gdn" };
    const int mesa_layer[3][2] = { { 1, 1 }, { 0, 1 }, { 0, 0 } };
    size_t p;
    for (p = 0; p < 3; p++) {
        mn_config c0, c1;
        mn_model m0, m1;
        size_t i, l, differ = 0, biases = 0, want = 0;
        config(&c0, patterns[p], 0.0);
        config(&c1, patterns[p], b95);
        TU_CHECK(mn_model_init(&m0, &c0) == MN_OK && mn_model_init(&m1, &c1) == MN_OK, "%s: init", patterns[p]);
        TU_CHECK(m0.n_params == m1.n_params && m0.n_tensors == m1.n_tensors, "%s: same table", patterns[p]);
        for (i = 0; i < m0.n_tensors && i < m1.n_tensors; i++) {
            const mn_tensor_info* t = &m0.tensors[i];
            int gate = 0;
            size_t j;
            for (l = 0; l < 2; l++) {
                char nm[96];
                snprintf(nm, sizeof nm, "model.layers.%zu.attn.a_proj.bias", l);
                if (!strcmp(t->name, nm) && mesa_layer[p][l]) gate = 1;
            }
            for (j = 0; j < t->numel; j++) {
                mn_real a = m0.params[t->offset + j], b = m1.params[t->offset + j];
                if (gate) {
                    biases++;
                    if (a != 0 || b != (mn_real)b95) differ++;
                } else if (memcmp(&a, &b, sizeof a) != 0) differ++;
            }
        }
        for (l = 0; l < 2; l++) want += mesa_layer[p][l] ? 4 : 0;   // one bias per head
        TU_CHECK(differ == 0 && biases == want, "%s: %zu parameters not as expected; %zu gate biases (want %zu)",
                 patterns[p], differ, biases, want);
        if (p == 0) {
            double mean, lo, hi;
            gammas(&m0, &mean, &lo, &hi);
            printf("default: initial gamma of layer 0 mean %.4f, range [%.4f, %.4f]\n", mean, lo, hi);
            TU_CHECK(fabs(mean - 0.5) < 0.02 && lo > 0.3 && hi < 0.7, "default gamma mean %.4f [%.4f, %.4f]", mean, lo,
                     hi);
            gammas(&m1, &mean, &lo, &hi);
            printf("mesa_gate_bias = log 19: initial gamma mean %.4f, range [%.4f, %.4f]\n", mean, lo, hi);
            TU_CHECK(fabs(mean - 0.95) < 0.005 && lo > 0.9 && hi < 0.99, "log 19: gamma mean %.4f [%.4f, %.4f]", mean,
                     lo, hi);
        }
        mn_model_free(&m0); mn_model_free(&m1);
    }
    {   // bad values: a clear error, nothing built
        const double bad[3] = { NAN, INFINITY, 50.5 };
        size_t i;
        for (i = 0; i < 3; i++) {
            mn_config c; mn_model m;
            config(&c, "mesa", bad[i]);
            memset(&m, 0x5a, sizeof m);
            int err = mn_model_init(&m, &c);
            TU_CHECK(err == MN_ERR_CONFIG && m.params == NULL, "mesa_gate_bias %g: error %d", bad[i], err);
        }
        mn_config c; mn_model m;
        config(&c, "mesa", -50.0);
        TU_CHECK(mn_model_init(&m, &c) == MN_OK, "mesa_gate_bias -50 is allowed");
        mn_model_free(&m);
    }
    return tu_finish("test_mesa_gate");
}
