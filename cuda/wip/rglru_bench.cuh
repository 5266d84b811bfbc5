static void bench_rglru(void) {}
