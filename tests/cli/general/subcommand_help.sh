set -e
ckptconv inspect --help | head -n 1
ckptconv convert --help | head -n 1
