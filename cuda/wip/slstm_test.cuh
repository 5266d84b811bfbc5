static void test_slstm_all(void) {}
#define MN__TEST_MODELS_SLSTM
