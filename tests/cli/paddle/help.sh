ckptconv paddle2hf --help | head -n 1
ckptconv hf2paddle --help | head -n 1
ckptconv reshard --help | grep -o "PaddleNLP (IN holds model_state"
ckptconv pd2te --help | grep -o "convert and reshard in one pass"
