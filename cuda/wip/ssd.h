// ssd: declarations (wip)
