static void bench_mlstm(void) {}
