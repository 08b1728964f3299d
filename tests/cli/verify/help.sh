# --help teaches the command: what it runs, what passes, the options and the config flags.
ckptconv verify --help
