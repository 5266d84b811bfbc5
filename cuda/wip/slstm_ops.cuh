// slstm: kernels (wip)
