#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Split an amber image directory into seed inputs of the fuzz targets.

    fuzz/split-image.py AMBER IMAGE_DIR OUT_DIR PREFIX

AMBER is the amber binary (its `show` gives the image's tables as JSON).
Writes OUT_DIR/TARGET/PREFIX-*, in the input formats the targets' headers
describe (fuzz/fuzz_*.c):
  records    [kind][flags][files][u32 root pid] + each record file as it is
  inventory  [flags][u32 length][inventory.img] + [u8 name length][name]
             [u32 length][content] for every file but the pages; and the
             same with an inventory that does not list the pages
  pagemap    [u64 pages size][u8 files][u32 length][mm_entry] + the
             pagemap records as [u32 length][payload] (at most MAX_RUNS)
  vdso       the old vDSO's bytes from pages-PID.img
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

# fuzz_records.c's table
KINDS = {"inventory": 0, "core": 1, "mm": 2, "pagemap": 3, "files": 4,
         "fds": 5, "fs": 6, "ghost": 7, "pstree": 8}
HDR = 8                # image file header: magic, version
PAGES_DATA_OFF = 4096  # where the pages start in pages-PID.img
MAX_RUNS = 256         # pagemap runs kept in a seed
MAX_GHOST = 4096       # bytes of a ghost file kept in a seed


def records(data):
    """The payloads of an image file of records."""
    pos, out = HDR, []
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 12:pos + 12 + n])
        pos += 12 + n
    return out


def varint(data, pos):
    """The varint at pos and the position after it."""
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def without_pages(inv):
    """An inventory message without its pages-* entries (field 8, inventory_file)."""
    pos, out = 0, b""
    while pos < len(inv):
        start = pos
        key, pos = varint(inv, pos)
        if key & 7 == 0:
            _, pos = varint(inv, pos)
        elif key & 7 == 2:
            n, pos = varint(inv, pos)
            body, pos = inv[pos:pos + n], pos + n
            if key >> 3 == 8 and b"pages-" in body:
                continue
        else:
            raise ValueError(f"inventory field type {key & 7}")
        out += inv[start:pos]
    return out


def put(out_dir, target, name, data):
    d = os.path.join(out_dir, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    amber, img, out, prefix = sys.argv[1:5]
    show = json.loads(subprocess.run([amber, "show", img], check=True,
                                     stdout=subprocess.PIPE).stdout)
    inv = show["inventory"]
    root = inv["root_pid"]
    sizes = {f["name"]: f["size"] for f in inv["files"]}
    names = sorted(os.listdir(img))
    nr_files = min(len(show["files"] or []), 255)

    def read(name):
        with open(os.path.join(img, name), "rb") as f:
            return f.read()

    for name in names:
        kind = name.split("-")[0].split(".")[0]
        if kind not in KINDS:  # pages: raw, their part is pagemap's and vdso's
            continue
        data = read(name)
        if kind == "ghost":
            data = data[:MAX_GHOST]
        put(out, "records", f"{prefix}-{name}",
            bytes([KINDS[kind], 0, nr_files]) + struct.pack("<I", root) + data)

    # as it is (refused: its pages are not there), and without the pages listed
    # (accepted; fuzz_inventory puts its record checksum right)
    blob = read("inventory.img")
    (inv,) = records(blob)
    rec = without_pages(inv)
    short = blob[:HDR] + struct.pack("<IQ", len(rec), 0) + rec
    rest = b""
    for name in names:
        if name == "inventory.img" or name.startswith("pages-"):
            continue
        data = read(name)
        rest += bytes([len(name)]) + name.encode() + struct.pack("<I", len(data)) + data
    put(out, "inventory", prefix, bytes([0]) + struct.pack("<I", len(blob)) + blob + rest)
    put(out, "inventory", prefix + "-nopages",
        bytes([0]) + struct.pack("<I", len(short)) + short + rest)

    for task in show["tasks"]:
        pid = task["pid"]
        mm_name, pm_name = f"mm-{pid}.img", f"pagemap-{pid}.img"
        if mm_name not in names or pm_name not in names:
            continue  # a CLONE_VM child: its parent's images hold the memory
        (mm,) = records(read(mm_name))
        psize = sizes.get(f"pages-{pid}.img", 0)
        seed = struct.pack("<QBI", psize, nr_files, len(mm)) + mm
        for rec in records(read(pm_name))[:MAX_RUNS]:
            seed += struct.pack("<I", len(rec)) + rec
        put(out, "pagemap", f"{prefix}-{pid}", seed)

        for vma in task["mm"]["vmas"]:
            if vma["kind"] != "VMA_VDSO":
                continue
            for run in task["pagemap"]:
                if run["vaddr"] == vma["start"] and not run.get("in_parent"):
                    with open(os.path.join(img, f"pages-{pid}.img"), "rb") as f:
                        f.seek(PAGES_DATA_OFF + run["offset"])
                        code = f.read(run["nr_pages"] * 4096)
                    # the same kernel gives the same vDSO: one seed per content
                    put(out, "vdso", "vdso-" + hashlib.sha1(code).hexdigest()[:12], code)


if __name__ == "__main__":
    main()
