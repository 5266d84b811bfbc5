// libFuzzer target for the checkpoint parsers: the safetensors header reader and the
// config.json reader get arbitrary bytes; any crash, leak, overflow or UB is a bug.
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz_safetensors.c -lm
#define MESANET_IMPLEMENTATION
#define MN_LOG(...) ((void)0)
#include "mesanet.h"

int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    mn_tensor_info t[64]; size_t n = 0, ds = 0; char meta[512], pat[256]; mn_config c;
    mn_safetensors_parse(data, size, t, 64, &n, &ds, meta, sizeof meta);
    mn_config_parse_json(&c, (const char*)data, size, pat, sizeof pat);
    return 0;
}
