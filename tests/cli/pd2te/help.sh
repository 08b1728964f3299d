ckptconv pd2te --help
ckptconv te2pd --help | grep -e '--num-attention-heads' -e '--fused-qkv' -e '--unfused-ffn'
