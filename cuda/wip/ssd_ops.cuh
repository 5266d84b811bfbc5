// ssd: kernels (wip)
