static void test_delta_all(void) {}
#define MN__TEST_MODELS_DELTA
