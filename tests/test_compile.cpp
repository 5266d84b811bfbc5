// The C++ twin of test_compile.c (stb tests/test_cpp_compilation.cpp).
#include "test_compile.c"
