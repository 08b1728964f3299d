#!/usr/bin/python3
"""Regenerate the zip fixtures (testdata/zip/) and the zip fuzz seeds
(tests/fuzz/corpora/zip_read/).

Run from anywhere with the Debian torch (1.13): /usr/bin/python3 testdata/gen/gen_zips.py

Fixtures are written by the real torch.save and by Python's zipfile. manifest.tsv lists,
for every fixture, what Python's zipfile reads from it, so the C reader is checked against
an independent implementation. The seeds are those fixtures plus damaged copies: each
hostile seed targets one check of the reader.
"""
import os
import struct
import sys
import warnings
import zipfile

import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ZIP_DIR = os.path.join(ROOT, "testdata", "zip")
SEED_DIR = os.path.join(ROOT, "tests", "fuzz", "corpora", "zip_read")
FIXED_TIME = (1980, 1, 1, 0, 0, 0)

# 21 characters: the first record, "<archive>/data.pkl", is then 30 bytes long and its data
# lands on offset 64 with no padding at all (an "FB" field of length 0).
PAD_ZERO_NAME = "pad_zero_fb_field_x21"


def save_torch_fixtures():
    small = {
        "weight": torch.arange(10, dtype=torch.float32),
        "empty": torch.zeros(0),
        "index": torch.ones(3, dtype=torch.int64),
        "half": torch.linspace(-1, 1, 5).to(torch.float16),
    }
    torch.save(small, os.path.join(ZIP_DIR, "torch_small.pt"))
    torch.save({"x": torch.arange(6, dtype=torch.int32).reshape(2, 3)},
               os.path.join(ZIP_DIR, PAD_ZERO_NAME + ".pt"))


def write_zipfile_fixtures():
    text = "".join("line %04d of a compressible text record\n" % i for i in range(80)).encode()
    with zipfile.ZipFile(os.path.join(ZIP_DIR, "deflated.zip"), "w") as z:
        z.comment = b"written by Python zipfile"
        for name, data, method in (("deflated/data.txt", text, zipfile.ZIP_DEFLATED),
                                   ("deflated/raw.bin", bytes(range(256)), zipfile.ZIP_STORED),
                                   ("deflated/empty", b"", zipfile.ZIP_DEFLATED)):
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = method
            z.writestr(info, data)
    with zipfile.ZipFile(os.path.join(ZIP_DIR, "empty.zip"), "w"):
        pass


def write_manifest():
    lines = ["# file\tentry\tmethod\tcsize\tusize\tcrc32\theader_offset",
             "# torch %s, Python %d.%d zipfile" % (torch.__version__, *sys.version_info[:2])]
    for fname in sorted(os.listdir(ZIP_DIR)):
        if fname == "manifest.tsv":
            continue
        with zipfile.ZipFile(os.path.join(ZIP_DIR, fname)) as z:
            for i in z.infolist():
                lines.append("%s\t%s\t%d\t%d\t%d\t%08x\t%d" % (fname, i.filename, i.compress_type,
                             i.compress_size, i.file_size, i.CRC, i.header_offset))
    with open(os.path.join(ZIP_DIR, "manifest.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def central_entry(data, name):
    """Offset of the central directory entry of `name`."""
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        n = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + n] == name.encode():
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise KeyError(name)


def patched(data, offset, fmt, value):
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def write_seeds():
    def read(name):
        with open(os.path.join(ZIP_DIR, name), "rb") as f:
            return f.read()

    small, deflated = read("torch_small.pt"), read("deflated.zip")
    with zipfile.ZipFile(os.path.join(ZIP_DIR, "torch_small.pt")) as z:
        data0 = z.getinfo("torch_small/data/0")
        data0_start = data0.header_offset + 30 + len(data0.filename) + \
            struct.unpack_from("<H", small, data0.header_offset + 28)[0]
    eocd64 = small.rfind(b"PK\x06\x06")
    locator = small.rfind(b"PK\x06\x07")
    cd_pkl = central_entry(small, "torch_small/data.pkl")
    cd_data0 = central_entry(small, "torch_small/data/0")
    cd_text = central_entry(deflated, "deflated/data.txt")
    text_start = 30 + len("deflated/data.txt")  # first entry, no extra field

    seeds = {
        "torch_small.pt": small,
        "pad_zero.pt": read(PAD_ZERO_NAME + ".pt"),
        "deflated.zip": deflated,
        "empty.zip": read("empty.zip"),
        "truncated_half.pt": small[:len(small) // 2],
        "truncated_in_eocd.pt": small[:-5],
        "bad_crc.pt": patched(small, data0_start, "<B", small[data0_start] ^ 0xFF),
        "local_name_mismatch.pt": patched(small, data0.header_offset + 30, "<B", ord("X")),
        "cd_offset_out_of_range.pt": patched(small, eocd64 + 48, "<Q", 1 << 62),
        "locator_out_of_range.pt": patched(small, locator + 8, "<Q", (1 << 64) - 16),
        "huge_count.pt": patched(patched(small, eocd64 + 24, "<Q", 1 << 40), eocd64 + 32, "<Q", 1 << 40),
        "multi_disk.pt": patched(small, locator + 16, "<I", 3),
        "encrypted.pt": patched(small, cd_pkl + 8, "<H", 0x0809),
        "method_12.pt": patched(small, cd_pkl + 10, "<H", 12),
        "header_offset_out_of_range.pt": patched(small, cd_data0 + 42, "<I", 0xFFFFFFF0),
        "zip64_extra_missing.pt": patched(small, cd_data0 + 20, "<I", 0xFFFFFFFF),
        "deflate_corrupt.zip": patched(deflated, text_start + 20, "<I", 0xDEADBEEF),
        "deflate_size_lie.zip": patched(deflated, cd_text + 24, "<I", 0x7FFFFFFF),
        "deflate_size_short.zip": patched(deflated, cd_text + 24, "<I", 3199),
        "deflate_size_long.zip": patched(deflated, cd_text + 24, "<I", 3201),
    }
    with zipfile.ZipFile(os.path.join(SEED_DIR, "duplicate_names.zip"), "w") as z:
        for _ in range(2):
            z.writestr(zipfile.ZipInfo("dup/data.pkl", FIXED_TIME), b"same name twice")
    for name, data in seeds.items():
        with open(os.path.join(SEED_DIR, name), "wb") as f:
            f.write(data)


def main():
    os.makedirs(ZIP_DIR, exist_ok=True)
    os.makedirs(SEED_DIR, exist_ok=True)
    save_torch_fixtures()
    write_zipfile_fixtures()
    write_manifest()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate on purpose
        write_seeds()


if __name__ == "__main__":
    main()
