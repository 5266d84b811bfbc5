// delta: kernels (wip)
