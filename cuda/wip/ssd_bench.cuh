static void bench_ssd(void) {}
