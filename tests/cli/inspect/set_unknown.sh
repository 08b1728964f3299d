# A directory no format and no layout knows.
mkdir empty
ckptconv inspect empty
