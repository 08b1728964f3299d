ckptconv paddle2hf --help | head -n 1
ckptconv hf2paddle --help | head -n 1
ckptconv reshard --help | grep -c PaddleNLP
