set -e
ckptconv zero-to-fp32 --help
