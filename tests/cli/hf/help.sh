# --help of both directions.
ckptconv hf2mcore --help | head -n 3
ckptconv mcore2hf --help | head -n 3
