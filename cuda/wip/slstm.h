// slstm: declarations (wip)
