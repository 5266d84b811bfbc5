static void test_ssd_all(void) {}
#define MN__TEST_MODELS_SSD
