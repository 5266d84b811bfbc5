// mlstm: kernels (wip)
