// mlstm: declarations (wip)
