// rglru: declarations (wip)
