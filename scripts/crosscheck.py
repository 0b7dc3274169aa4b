#!/usr/bin/env python3
"""Cross-check our writers against pyarrow / numpy (run by scripts/bench-readers.sh
or alone): `crosscheck.py DIR` reads every *.parquet and *.npz in DIR.

Parquet: the schema must be the flux/DLIO one (fixed_size_list<float32> per
column, as pyarrow reads back its own `pa.list_(pa.float32(), n)` files), every
row group must decode, values must be in [1, 2) (our generator's range) and the
file must equal what pyarrow itself writes for the same table (schema + values).
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


def check_parquet(path):
    pf = pq.ParquetFile(path)
    for field in pf.schema_arrow:
        t = field.type
        assert pa.types.is_fixed_size_list(t) or t == pa.float32(), f"{path}: {field}"
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
            assert v.size and (v >= 1.0).all() and (v < 2.0).all(), f"{path}: values out of range"
            assert arr.null_count == 0
    assert rows == pf.metadata.num_rows
    # pyarrow writing the same table reads back with the same schema and values.
    t = pq.read_table(path)
    with tempfile.TemporaryDirectory() as d:
        ref = os.path.join(d, "ref.parquet")
        pq.write_table(t, ref, compression=None)
        r = pq.read_table(ref)
        assert r.schema == t.schema, f"{path}: schema {t.schema} vs pyarrow {r.schema}"
        assert r.equals(t), f"{path}: values differ after pyarrow round trip"
    print(f"ok parquet {path}: {pf.metadata.num_rows} rows, {pf.num_row_groups} row groups, schema {t.schema.types}")


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


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    n = 0
    for p in sorted(glob.glob(os.path.join(d, "*.parquet"))):
        check_parquet(p)
        n += 1
    for p in sorted(glob.glob(os.path.join(d, "*.npz"))):
        check_npz(p)
        n += 1
    if n == 0:
        sys.exit(f"no .parquet/.npz files in {d}")


if __name__ == "__main__":
    main()
