static void bench_slstm(void) {}
