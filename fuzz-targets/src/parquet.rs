//! Parquet: the input is a whole file. The footer (Thrift compact
//! FileMetaData) is located and parsed as `read_layout` does for every file
//! the readers open; each row group the footer places inside the file is
//! then decoded by the fast path (page headers, levels, values). The input
//! is also handed to `parse_footer` directly as a footer, so mutations reach
//! the Thrift reader without keeping a valid trailer.

use crate::{Mem, Seeds, written_seeds};
use storprof_bench::{
    format::{
        ColumnSpec, ElemType, FluxSchema,
        parquet::{parse_footer, read_layout, write_parquet_file},
    },
    reader::decode_row_group,
    storage::LocalStorage,
};

/// Row groups decoded per input (a footer may list millions).
const MAX_GROUPS: usize = 8;

pub fn seeds() -> Seeds {
    let schemas = [
        ("one-column", FluxSchema::float32(&[("x", 4)])),
        ("two-columns", FluxSchema::float32(&[("a", 3), ("b", 1)])),
        (
            "int8-column",
            FluxSchema {
                columns: vec![ColumnSpec {
                    name: "c".into(),
                    elem: ElemType::Int8,
                    size: 2,
                }],
            },
        ),
    ];
    let mut out = written_seeds(|dir| {
        let storage = LocalStorage::new(dir);
        for (name, schema) in &schemas {
            for (rows, rg_rows) in [(1, 1), (5, 2)] {
                let name = format!("seed-{name}-{rows}-{rg_rows}.parquet");
                if let Err(e) = write_parquet_file(&storage, &name, schema, rows, rg_rows, 7) {
                    eprintln!("fuzz seeds: {name}: {e}");
                }
            }
        }
    });
    // The footers alone too, for the direct parse_footer path.
    let footers: Seeds = out
        .iter()
        .filter_map(|(name, bytes)| Some((format!("{name}.footer"), footer_of(bytes)?.to_vec())))
        .collect();
    out.extend(footers);
    out
}

fn footer_of(file: &[u8]) -> Option<&[u8]> {
    let n = file.len();
    let len = u32::from_le_bytes(
        file.get(n.checked_sub(8)?..n.checked_sub(4)?)?
            .try_into()
            .ok()?,
    );
    file.get(n.checked_sub(8 + len as usize)?..n - 8)
}

pub fn run(data: &[u8]) {
    if let Ok((layout, _)) = read_layout(&Mem(data), "fuzz.parquet") {
        for rg in 0..layout.row_groups.len().min(MAX_GROUPS) {
            let (start, end) = layout.row_groups[rg].byte_range();
            let bytes = usize::try_from(start)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(s, e)| data.get(s..e));
            if let Some(bytes) = bytes {
                let _ = decode_row_group(
                    "fuzz.parquet",
                    &layout,
                    rg,
                    &bytes::Bytes::copy_from_slice(bytes),
                );
            }
        }
    }
    // The input as a footer: a file just large enough, and one too small
    // (the size check must refuse it, not wrap).
    let len = data.len() as u64;
    let _ = parse_footer(data, len + 8 + 4096, "fuzz.parquet");
    let _ = parse_footer(data, len, "fuzz.parquet");
}
