//! DLIO Parquet: a streaming writer for fixed-size-list and scalar columns
//! of float16/float32/float64/int8 laid out exactly as pyarrow writes
//! `pa.list_(pa.float32(), n)` (3-level LIST) or `pa.float64()` etc. (an
//! OPTIONAL leaf), PLAIN, UNCOMPRESSED, data page v1, RLE levels,
//! `ARROW:schema` metadata,
//! a bounds-checked footer parser ([`read_layout`]) giving each row group's
//! column-chunk byte ranges, and a fast decoder for PLAIN float fixed-size
//! lists without nulls ([`decode_fixed_list_chunk`]).
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};

use super::{
    ColumnSpec, ElemType, FluxSchema,
    r#gen::{fill_values, row_seed},
    thrift::{self, Reader, ThriftError, Writer, ty},
};
use crate::{
    error::BenchError,
    storage::{ObjectWriter, RandomAccess, ReadKind, Storage},
};

mod decode;
mod layout;
mod write;

pub use decode::*;
pub use layout::*;
pub use write::*;

const MAGIC: &[u8; 4] = b"PAR1";
/// Target data page size; a page always holds whole rows (at least one).
const PAGE_TARGET: usize = 1 << 20;
/// Footers larger than this are rejected as absurd (flux footers are ~2 KiB,
/// a full-size dlrm file's, 768 row groups × 200 column chunks, 8.9 MB).
pub const MAX_FOOTER: u64 = 64 << 20;
/// Bytes the writer buffers before one `write_all` (few, large writes).
const WRITE_CHUNK: usize = 8 << 20;
/// How much of the file tail we read first, hoping it holds the whole footer.
const TAIL_GUESS: u64 = 64 << 10;

// Parquet enum values.
const TYPE_INT32: i32 = 1;
const TYPE_FLOAT: i32 = 4;
const TYPE_DOUBLE: i32 = 5;
const TYPE_FIXED_LEN_BYTE_ARRAY: i32 = 7;
const CONVERTED_INT_8: i32 = 15;
const REP_OPTIONAL: i32 = 1;
const REP_REPEATED: i32 = 2;
const ENC_PLAIN: i32 = 0;
const ENC_RLE: i32 = 3;
const CONVERTED_LIST: i32 = 3;
const PAGE_DATA: i32 = 0;
const PAGE_DICTIONARY: i32 = 2;
const CODEC_UNCOMPRESSED: i32 = 0;

fn corrupt(path: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: path.into(),
        format: "Parquet",
        reason: reason.into(),
    }
}

/// Arrow schema DLIO/pyarrow uses for a schema.
pub fn arrow_schema(schema: &FluxSchema) -> Schema {
    Schema::new(
        schema
            .columns
            .iter()
            .map(|c| Field::new(&c.name, arrow_type(c.elem, c.size), true))
            .collect::<Vec<_>>(),
    )
}

/// Arrow type of a scalar of `elem`.
pub fn arrow_elem_type(elem: ElemType) -> DataType {
    match elem {
        ElemType::Float16 => DataType::Float16,
        ElemType::Float32 => DataType::Float32,
        ElemType::Float64 => DataType::Float64,
        ElemType::Int8 => DataType::Int8,
    }
}

/// `FixedSizeList<element: elem>[n]` (what pyarrow and arrow-rs read back
/// from a 3-level LIST), or the scalar type for n == 1 (as DLIO writes).
pub fn arrow_type(elem: ElemType, n: usize) -> DataType {
    if n == 1 {
        arrow_elem_type(elem)
    } else {
        DataType::FixedSizeList(
            Arc::new(Field::new("element", arrow_elem_type(elem), true)),
            i32::try_from(n).unwrap_or(i32::MAX),
        )
    }
}

/// Parquet physical type of `elem`.
fn physical_type(elem: ElemType) -> i32 {
    match elem {
        ElemType::Float16 => TYPE_FIXED_LEN_BYTE_ARRAY,
        ElemType::Float32 => TYPE_FLOAT,
        ElemType::Float64 => TYPE_DOUBLE,
        ElemType::Int8 => TYPE_INT32,
    }
}

#[cfg(test)]
mod tests;
