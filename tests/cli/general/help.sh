ckptconv --help
