ckptconv inspect no_such_file.pt
