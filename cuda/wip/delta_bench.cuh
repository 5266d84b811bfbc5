static void bench_delta(void) {}
