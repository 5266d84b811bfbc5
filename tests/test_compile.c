// Compiles the whole header (declarations and implementation) in this translation unit; the
// Makefile builds it as C99 and as C++ (tests/test_compile.cpp), float and double, with
// -Wall -Wextra -Werror, so any warning in either language fails the build.
#define MESANET_IMPLEMENTATION
#include "../mesanet.h"
#include "../mesanet.h"   // a second include must be harmless (include guards)
int main(void) {
    mn_config c, r;
    memset(&c, 0, sizeof c);
    return mn_config_resolve(&r, &c) == MN_OK && r.d_model == 256 && r.d_ff == 688 ? 0 : 1;
}
