static void test_mlstm_all(void) {}
#define MN__TEST_MODELS_MLSTM
