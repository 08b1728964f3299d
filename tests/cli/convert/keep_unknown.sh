set -e
ckptconv convert --keep-unknown-objects "$TESTDATA/torch/unsafe_os_system.pt" out.pt
ckptconv inspect out.pt | grep -c 'posix.system.*UNSAFE'
