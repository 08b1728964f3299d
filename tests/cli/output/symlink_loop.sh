# A symbolic link loop is not "no such file": the error says what stopped the open.
ln -s loop loop
ckptconv convert loop o.pt
echo "exit $?"
ckptconv inspect loop
echo "exit $?"
ckptconv zero-to-fp32 loop o
echo "exit $?"
ckptconv reshard loop o --tp 1
echo "exit $?"
ckptconv hf2mcore loop o
echo "exit $?"
ls -A
