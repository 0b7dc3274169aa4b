#!/usr/bin/env python3
"""Cross-check our writers against the readers users have (run by
scripts/crosscheck.sh): `crosscheck.py DIR` reads every *.parquet, *.npz,
*.jpeg and *.tfrecord in DIR and its subfolders; `crosscheck.py --layout
MODEL_DIR` checks DLIO's split directories.

Parquet: the schema must be the flux/DLIO one (fixed_size_list<float32> per
column, as pyarrow reads back its own `pa.list_(pa.float32(), n)` files), every
row group must decode, values must be in [1, 2) (our generator's range) and the
file must equal what pyarrow itself writes for the same table (schema + values).
Every column-chunk field DLIO's readers use is set wherever pyarrow sets it
in its own file, and the byte range the mlcommons fork's raw Parquet reader
(`ParquetReaderFileIterable._rg_byte_range`) computes lies in the file.
JPEG: Pillow decodes it (a real decoder, as DLIO's ImageReader uses).
TFRecord: TensorFlow iterates every record (its CRC checks on) and parses
each as DLIO's tf_reader does ('image' bytes, 'size' int64).
NPZ: `np.load` must give x uint8 (d1, d2, samples) and y int64 zeros, with
zipfile's CRC check passing.
Exit status 1 on any mismatch.
"""
import glob
import os
import sys
import tempfile
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


SCALARS = {pa.float16(), pa.float32(), pa.float64(), pa.int8()}


def check_parquet(path):
    pf = pq.ParquetFile(path)
    for field in pf.schema_arrow:
        t = field.type
        assert pa.types.is_fixed_size_list(t) or t in SCALARS, f"{path}: {field}"
        if pa.types.is_fixed_size_list(t):
            assert t.value_type == pa.float32(), f"{path}: {field}"
    rows = 0
    for rg in range(pf.num_row_groups):
        tab = pf.read_row_group(rg)
        rows += tab.num_rows
        for col in tab.columns:
            arr = col.combine_chunks()
            vals = arr.flatten() if pa.types.is_fixed_size_list(arr.type) else arr
            v = vals.to_numpy(zero_copy_only=False)
            assert v.size and arr.null_count == 0, f"{path}: empty or null values"
            if vals.type == pa.float32():
                assert (v >= 1.0).all() and (v < 2.0).all(), f"{path}: values out of range"
            elif pa.types.is_floating(vals.type):
                assert np.isfinite(v).all(), f"{path}: non-finite values"
    assert rows == pf.metadata.num_rows
    # pyarrow writing the same table reads back with the same schema and values.
    t = pq.read_table(path)
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "ref.parquet")
        pq.write_table(t, ref, compression=None, row_group_size=pf.metadata.row_group(0).num_rows)
        r = pq.read_table(ref)
        assert r.schema == t.schema, f"{path}: schema {t.schema} vs pyarrow {r.schema}"
        assert r.equals(t), f"{path}: values differ after pyarrow round trip"
        check_parquet_metadata(path, pf.metadata, pq.ParquetFile(ref).metadata)
    kinds = sorted({str(x) for x in t.schema.types})
    print(f"ok parquet {path}: {pf.metadata.num_rows} rows, {pf.num_row_groups} row groups, "
          f"{len(t.schema)} columns of {', '.join(kinds)}")


# ColumnChunkMetaData fields DLIO's Parquet readers (pyarrow-based and raw)
# read, compared with pyarrow's own file of the same table.
CHUNK_FIELDS = ["file_offset", "data_page_offset", "dictionary_page_offset", "has_dictionary_page",
                "total_compressed_size", "total_uncompressed_size", "num_values", "is_stats_set",
                "physical_type", "compression", "path_in_schema"]


def dlio_fork_rg_range(path, meta, rg):
    """The mlcommons DLIO fork's raw reader: each chunk starts at its
    dictionary page when the offset is above 0, else at its first data page."""
    g = meta.row_group(rg)
    start = end = None
    for c in range(g.num_columns):
        cm = g.column(c)
        s = cm.dictionary_page_offset if cm.dictionary_page_offset > 0 else cm.data_page_offset
        e = s + cm.total_compressed_size
        start = s if start is None or s < start else start
        end = e if end is None or e > end else end
    return start, end


def check_parquet_metadata(path, ours, ref):
    assert ours.num_row_groups == ref.num_row_groups and ours.num_columns == ref.num_columns
    assert (ours.metadata or {}).keys() >= {b"ARROW:schema"}, f"{path}: no ARROW:schema key"
    size = os.path.getsize(path)
    for rg in range(ours.num_row_groups):
        g, rg_ref = ours.row_group(rg), ref.row_group(rg)
        assert g.num_rows == rg_ref.num_rows and g.total_byte_size > 0
        for c in range(g.num_columns):
            cm, cref = g.column(c), rg_ref.column(c)
            for f in CHUNK_FIELDS:
                if getattr(cref, f) is not None:
                    assert getattr(cm, f) is not None, f"{path}: rg {rg} col {c}: {f} unset (pyarrow sets it)"
            assert cm.dictionary_page_offset < cm.data_page_offset, f"{path}: dictionary page after data"
            if cref.statistics is not None:
                assert cm.statistics is not None and cm.statistics.null_count == 0, f"{path}: statistics"
        start, end = dlio_fork_rg_range(path, ours, rg)
        assert 4 <= start < end <= size - 8, f"{path}: DLIO's raw range {start}..{end} of {size}"
        with open(path, "rb") as f:
            f.seek(start)
            assert len(f.read(end - start)) == end - start


def check_npz(path):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        assert bad is None, f"{path}: CRC mismatch in {bad}"
        for i in z.infolist():
            assert i.compress_type == zipfile.ZIP_STORED
    with np.load(path) as z:
        x, y = z["x"], z["y"]
        assert x.dtype == np.uint8 and x.ndim == 3, f"{path}: x {x.dtype} {x.shape}"
        assert y.dtype == np.int64 and y.shape == (x.shape[2],) and not y.any()
    print(f"ok npz {path}: x {x.shape} {x.dtype}, y {y.shape} {y.dtype}")


def check_jpeg(path, want_bytes):
    from PIL import Image
    size = os.path.getsize(path)
    if want_bytes:
        assert size == want_bytes, f"{path}: {size} bytes, the record length is {want_bytes}"
    with Image.open(path) as im:
        assert im.format == "JPEG", f"{path}: Pillow sees {im.format}"
        im.load()
        px = np.asarray(im)
    assert px.size > 0 and px.std() > 0, f"{path}: decoded to a blank image"
    print(f"ok jpeg {path}: {size} bytes, {im.size[0]}x{im.size[1]} {im.mode}")


def check_tfrecord(path):
    import tensorflow as tf
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "size": tf.io.FixedLenFeature([], tf.int64)}
    n, lens = 0, set()
    for rec in tf.data.TFRecordDataset(path):
        ex = tf.io.parse_single_example(rec, spec)
        # DLIO's 'size' is the image side (floor(sqrt(record_length))), not a byte count.
        assert int(ex["size"]) > 0 and len(ex["image"].numpy()) > 0, f"{path}: record {n}"
        lens.add(len(ex["image"].numpy()))
        n += 1
    assert n > 0, f"{path}: no records"
    assert len(lens) == 1, f"{path}: DLIO draws one image size per file, got {sorted(lens)}"
    print(f"ok tfrecord {path}: {n} records of {lens.pop()} B")


def check_column_subset(path, config):
    """dlrm: the YAML's dtypes are the file's, and the `read: true` columns
    read alone (what DLIO's column selection asks pyarrow for)."""
    import yaml
    cols = yaml.safe_load(open(config))["dataset"]["parquet"]["columns"]
    pf = pq.ParquetFile(path)
    names = {"float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64(), "int8": pa.int8()}
    for c in cols:
        assert pf.schema_arrow.field(c["name"]).type == names[c["dtype"]], f"{path}: {c}"
    want = [c["name"] for c in cols if c.get("read", True)]
    t = pf.read_row_group(0, columns=want)
    assert t.column_names == want and t.num_rows == pf.metadata.row_group(0).num_rows
    print(f"ok parquet columns {path}: {len(cols)} dtypes as configured, {len(want)} read alone")


def check_layout(model_dir):
    for split in ("train", "valid", "test"):
        d = os.path.join(model_dir, split)
        assert os.path.isdir(d), f"{d}: missing (DLIO and mlpstorage expect it)"
    print(f"ok layout {model_dir}: train/ valid/ test/")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--layout":
        check_layout(sys.argv[2])
        return
    if len(sys.argv) > 3 and sys.argv[1] == "--columns":
        check_column_subset(sys.argv[2], sys.argv[3])
        return
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    want_jpeg_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    n = 0
    checks = [("parquet", check_parquet), ("npz", check_npz),
              ("jpeg", lambda p: check_jpeg(p, want_jpeg_bytes)), ("tfrecord", check_tfrecord)]
    for ext, check in checks:
        for p in sorted(glob.glob(os.path.join(d, f"*.{ext}")) + glob.glob(os.path.join(d, f"*/*.{ext}"))):
            check(p)
            n += 1
    if n == 0:
        sys.exit(f"no .parquet/.npz/.jpeg/.tfrecord files in {d}")


if __name__ == "__main__":
    main()
