# --help teaches the command: what it reads, what it writes, the options.
ckptconv reshard --help
