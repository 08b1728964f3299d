ckptconv inspect "$TESTDATA/torch/unsafe_os_system.pt"
