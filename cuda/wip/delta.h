// delta: declarations (wip)
