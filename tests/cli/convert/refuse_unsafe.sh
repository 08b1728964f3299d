ckptconv convert "$TESTDATA/torch/unsafe_os_system.pt" out.pt
status=$?
ls -A
exit $status
