static void test_rglru_all(void) {}
#define MN__TEST_MODELS_RGLRU
