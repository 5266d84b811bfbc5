// rglru: kernels (wip)
