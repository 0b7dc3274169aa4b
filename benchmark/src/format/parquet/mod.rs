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

fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// RLE-hybrid levels for `rows` lists of `n` elements, each a u32 length prefix
/// + runs: repetition (0 then n-1 ones per row), definition (all `max_def`).
fn write_levels(out: &mut Vec<u8>, rows: usize, n: usize, list: bool) {
    if list {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        for _ in 0..rows {
            put_uleb(out, 1 << 1);
            out.push(0);
            if n > 1 {
                put_uleb(out, ((n - 1) as u64) << 1);
                out.push(1);
            }
        }
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    put_uleb(out, ((rows * n) as u64) << 1);
    out.push(if list { 3 } else { 1 });
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

struct ChunkMeta {
    /// The chunk's first byte: its dictionary page.
    offset: u64,
    /// Its first data page.
    data_offset: u64,
    size: u64,
    num_values: u64,
}

/// The one-entry PLAIN dictionary page that opens every column chunk. The
/// data pages stay PLAIN (what pyarrow writes after its dictionary falls
/// back), but readers that locate a chunk by `dictionary_page_offset`, as
/// DLIO's raw Parquet readers do, need the field set.
fn dictionary_page(elem: ElemType) -> Vec<u8> {
    // The value 1 (1.0 for floats) in the column's PLAIN encoding.
    let value: Vec<u8> = match elem {
        ElemType::Float16 => 0x3C00u16.to_le_bytes().to_vec(),
        ElemType::Float32 => 1.0f32.to_le_bytes().to_vec(),
        ElemType::Float64 => 1.0f64.to_le_bytes().to_vec(),
        ElemType::Int8 => 1i32.to_le_bytes().to_vec(),
    };
    let mut h = Writer::new();
    h.begin();
    h.i32(1, PAGE_DICTIONARY);
    h.i32(2, value.len() as i32);
    h.i32(3, value.len() as i32);
    h.begin_struct(7);
    h.i32(1, 1);
    h.i32(2, ENC_PLAIN);
    h.end();
    h.end();
    let mut page = h.buf;
    page.extend_from_slice(&value);
    page
}

/// Write a Parquet file of `schema` with `rows` rows in row groups of
/// `row_group_rows`. List columns hold `gen::flux_row_values(seed, col, row, n)`
/// (f32; other types the same stream through [`fill_values`]), scalar
/// columns `gen::scalar_chunk_values(seed, col, group's first row, ..)`.
/// Returns the file size in bytes.
pub fn write_parquet_file(
    storage: &dyn Storage,
    path: &str,
    schema: &FluxSchema,
    rows: u64,
    row_group_rows: u64,
    seed: u64,
) -> Result<u64, BenchError> {
    if schema.columns.is_empty() || schema.columns.iter().any(|c| c.size == 0) {
        return Err(BenchError::Config(format!(
            "{path}: Parquet schema needs at least one column, each with size >= 1"
        )));
    }
    if schema
        .columns
        .iter()
        .any(|c| c.size.saturating_mul(c.elem.stored_bytes()) > i32::MAX as usize)
    {
        return Err(BenchError::Config(format!(
            "{path}: a Parquet column row is larger than a page can hold"
        )));
    }
    let rg_rows = row_group_rows.max(1);
    let mut out = ChunkedWriter::new(storage.create(path)?);
    let mut pos: u64 = 0;
    out.reserve(4)?.copy_from_slice(MAGIC);
    pos += 4;
    let mut levels: Vec<u8> = Vec::new();
    let dict_pages: Vec<(ElemType, Vec<u8>)> = [
        ElemType::Float16,
        ElemType::Float32,
        ElemType::Float64,
        ElemType::Int8,
    ]
    .into_iter()
    .map(|e| (e, dictionary_page(e)))
    .collect();
    let mut groups: Vec<(u64, Vec<ChunkMeta>)> = Vec::new();
    let mut first = 0u64;
    while first < rows {
        let n_rows = rg_rows.min(rows - first);
        let mut chunks = Vec::with_capacity(schema.columns.len());
        for (ci, col) in schema.columns.iter().enumerate() {
            let n = col.size;
            let elem = col.elem;
            let list = n > 1;
            let row_len = n * elem.stored_bytes();
            // Scalar pages hold PAGE_TARGET / width rows, a multiple of 8
            // values: the chunk's stream continues page to page unchanged.
            let per_page = (PAGE_TARGET / row_len).max(1) as u64;
            let mut stream = row_seed(seed, ci, first);
            let start = pos;
            let dict_page = dict_pages
                .iter()
                .find(|(e, _)| *e == elem)
                .map_or(&[][..], |(_, p)| p.as_slice());
            out.reserve(dict_page.len())?.copy_from_slice(dict_page);
            pos += dict_page.len() as u64;
            let data_offset = pos;
            let mut r = 0;
            while r < n_rows {
                let pr = per_page.min(n_rows - r);
                levels.clear();
                write_levels(&mut levels, pr as usize, n, list);
                let body_len = levels.len() + pr as usize * row_len;
                let mut h = Writer::new();
                h.begin();
                h.i32(1, PAGE_DATA);
                let size = i32::try_from(body_len)
                    .map_err(|_| BenchError::Config(format!("{path}: page too large")))?;
                h.i32(2, size);
                h.i32(3, size);
                h.begin_struct(5);
                h.i32(1, (pr as usize * n) as i32);
                h.i32(2, ENC_PLAIN);
                h.i32(3, ENC_RLE);
                h.i32(4, ENC_RLE);
                h.end();
                h.end();
                // Header, levels and values go straight into the write buffer:
                // the generator fills it in place (no zeroing, no extra copy).
                let page_len = h.buf.len() + body_len;
                let dst = out.reserve(page_len)?;
                let (hdr, rest) = dst.split_at_mut(h.buf.len());
                hdr.copy_from_slice(&h.buf);
                let (lv, values) = rest.split_at_mut(levels.len());
                lv.copy_from_slice(&levels);
                if list {
                    for (row, v) in (first + r..).zip(values.chunks_exact_mut(row_len)) {
                        fill_values(&mut row_seed(seed, ci, row), elem, v);
                    }
                } else {
                    fill_values(&mut stream, elem, values);
                }
                pos += page_len as u64;
                r += pr;
            }
            chunks.push(ChunkMeta {
                offset: start,
                data_offset,
                size: pos - start,
                num_values: n_rows * n as u64,
            });
        }
        groups.push((n_rows, chunks));
        first += n_rows;
    }
    let footer = encode_footer(schema, rows, &groups);
    let tail = out.reserve(footer.len() + 8)?;
    tail[..footer.len()].copy_from_slice(&footer);
    tail[footer.len()..footer.len() + 4].copy_from_slice(&(footer.len() as u32).to_le_bytes());
    tail[footer.len() + 4..].copy_from_slice(MAGIC);
    pos += footer.len() as u64 + 8;
    out.finish()?;
    Ok(pos)
}

/// Buffers output in [`WRITE_CHUNK`]-sized pieces handed to the object
/// writer with one `write_all` each. The buffer is allocated once per file
/// and overwritten in place.
struct ChunkedWriter<'a> {
    w: Box<dyn ObjectWriter + 'a>,
    buf: Vec<u8>,
    used: usize,
}

impl<'a> ChunkedWriter<'a> {
    fn new(w: Box<dyn ObjectWriter + 'a>) -> Self {
        Self {
            w,
            buf: vec![0; WRITE_CHUNK],
            used: 0,
        }
    }

    /// The next `n` bytes of output, to be filled by the caller.
    fn reserve(&mut self, n: usize) -> Result<&mut [u8], BenchError> {
        if self.used + n > self.buf.len() {
            self.flush()?;
            if n > self.buf.len() {
                self.buf.resize(n, 0);
            }
        }
        let at = self.used;
        self.used += n;
        Ok(&mut self.buf[at..at + n])
    }

    fn flush(&mut self) -> Result<(), BenchError> {
        if self.used > 0 {
            self.w.write_all(&self.buf[..self.used])?;
            self.used = 0;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), BenchError> {
        self.flush()?;
        self.w.finish()
    }
}

fn encode_footer(schema: &FluxSchema, rows: u64, groups: &[(u64, Vec<ChunkMeta>)]) -> Vec<u8> {
    let arrow = parquet::arrow::encode_arrow_schema(&arrow_schema(schema));
    let mut t = Writer::new();
    t.begin();
    t.i32(1, 1);
    // schema: root + per column (group, repeated group, leaf) or one leaf
    let elems: usize = 1 + schema
        .columns
        .iter()
        .map(|c| if c.size > 1 { 3 } else { 1 })
        .sum::<usize>();
    t.list(2, ty::STRUCT, elems);
    t.begin();
    t.binary(4, b"schema");
    t.i32(5, schema.columns.len() as i32);
    t.end();
    for c in &schema.columns {
        let name = &c.name;
        if c.size > 1 {
            t.begin();
            t.i32(3, REP_OPTIONAL);
            t.binary(4, name.as_bytes());
            t.i32(5, 1);
            t.i32(6, CONVERTED_LIST);
            t.begin_struct(10);
            t.begin_struct(3);
            t.end();
            t.end();
            t.end();
            t.begin();
            t.i32(3, REP_REPEATED);
            t.binary(4, b"list");
            t.i32(5, 1);
            t.end();
            leaf_element(&mut t, c.elem, b"element");
        } else {
            leaf_element(&mut t, c.elem, name.as_bytes());
        }
    }
    t.i64(3, rows as i64);
    t.list(4, ty::STRUCT, groups.len());
    for (n_rows, chunks) in groups {
        let total: u64 = chunks.iter().map(|c| c.size).sum();
        t.begin();
        t.list(1, ty::STRUCT, chunks.len());
        for (c, ColumnSpec { name, elem, size }) in chunks.iter().zip(&schema.columns) {
            t.begin();
            t.i64(2, c.offset as i64);
            t.begin_struct(3);
            t.i32(1, physical_type(*elem));
            t.list(2, ty::I32, 2);
            t.elem_i32(ENC_PLAIN);
            t.elem_i32(ENC_RLE);
            if *size > 1 {
                t.list(3, ty::BINARY, 3);
                t.elem_binary(name.as_bytes());
                t.elem_binary(b"list");
                t.elem_binary(b"element");
            } else {
                t.list(3, ty::BINARY, 1);
                t.elem_binary(name.as_bytes());
            }
            t.i32(4, CODEC_UNCOMPRESSED);
            t.i64(5, c.num_values as i64);
            t.i64(6, c.size as i64);
            t.i64(7, c.size as i64);
            t.i64(9, c.data_offset as i64);
            t.i64(11, c.offset as i64);
            // Statistics: no nulls (min/max are not tracked by the generator).
            t.begin_struct(12);
            t.i64(3, 0);
            t.end();
            t.end();
            t.end();
        }
        t.i64(2, total as i64);
        t.i64(3, *n_rows as i64);
        t.i64(5, chunks.first().map_or(4, |c| c.offset) as i64);
        t.i64(6, total as i64);
        t.end();
    }
    t.list(5, ty::STRUCT, 1);
    t.begin();
    t.binary(1, b"ARROW:schema");
    t.binary(2, arrow.as_bytes());
    t.end();
    t.binary(6, b"storprof-bench (flux parquet writer)");
    t.end();
    t.buf
}

/// The OPTIONAL leaf SchemaElement of `elem` as pyarrow writes it: float16
/// as FIXED_LEN_BYTE_ARRAY(2) with logical type FLOAT16, int8 as INT32 with
/// converted type INT_8 and logical type INTEGER(8, signed).
fn leaf_element(t: &mut Writer, elem: ElemType, name: &[u8]) {
    t.begin();
    t.i32(1, physical_type(elem));
    if elem == ElemType::Float16 {
        t.i32(2, 2);
    }
    t.i32(3, REP_OPTIONAL);
    t.binary(4, name);
    match elem {
        ElemType::Int8 => {
            t.i32(6, CONVERTED_INT_8);
            t.begin_struct(10);
            t.begin_struct(10); // LogicalType.INTEGER
            t.byte(1, 8);
            t.bool(2, true);
            t.end();
            t.end();
        }
        ElemType::Float16 => {
            t.begin_struct(10);
            t.begin_struct(15); // LogicalType.FLOAT16
            t.end();
            t.end();
        }
        ElemType::Float32 | ElemType::Float64 => {}
    }
    t.end();
}

// ---------------------------------------------------------------- layout

/// One leaf column as described by the schema.
#[derive(Clone, Debug)]
pub struct LeafColumn {
    /// Dotted path (`t5_encodings.list.element`).
    pub path: String,
    /// Top-level field name.
    pub top: String,
    pub physical_type: i32,
    pub max_def: u16,
    pub max_rep: u16,
}

/// Byte range and metadata of one column chunk.
#[derive(Clone, Debug)]
pub struct ChunkLayout {
    /// First byte (dictionary page if any, else first data page).
    pub offset: u64,
    /// Compressed size of the whole chunk.
    pub len: u64,
    pub num_values: u64,
    pub codec: i32,
    pub has_dictionary: bool,
}

/// One row group.
#[derive(Clone, Debug)]
pub struct RowGroupLayout {
    pub num_rows: u64,
    /// Index of the group's first row within the file.
    pub first_row: u64,
    pub chunks: Vec<ChunkLayout>,
}

impl RowGroupLayout {
    /// `[start, end)` covering all column chunks of the group.
    pub fn byte_range(&self) -> (u64, u64) {
        let start = self.chunks.iter().map(|c| c.offset).min().unwrap_or(0);
        let end = self
            .chunks
            .iter()
            .map(|c| c.offset + c.len)
            .max()
            .unwrap_or(0);
        (start, end)
    }
}

/// What the footer says about a Parquet file, validated against its size.
#[derive(Clone, Debug)]
pub struct ParquetLayout {
    pub file_len: u64,
    /// Footer length (thrift bytes, without the 8-byte trailer).
    pub footer_len: u64,
    pub num_rows: u64,
    pub leaves: Vec<LeafColumn>,
    pub row_groups: Vec<RowGroupLayout>,
}

impl ParquetLayout {
    /// Row group holding `row`, by bisecting the cumulative row offsets.
    pub fn row_group_of(&self, row: u64) -> Option<usize> {
        let i = self
            .row_groups
            .partition_point(|g| g.first_row + g.num_rows <= row);
        (i < self.row_groups.len()).then_some(i)
    }
}

/// Read and parse the footer of `ra` (metadata reads). Returns the layout
/// and the bytes read.
pub fn read_layout(ra: &dyn RandomAccess, path: &str) -> Result<(ParquetLayout, u64), BenchError> {
    let len = ra.len();
    if len < 12 {
        return Err(corrupt(path, format!("file of {len} bytes is too short")));
    }
    let tail_len = TAIL_GUESS.min(len);
    let tail = ra.read_bytes(len - tail_len, tail_len as usize, ReadKind::Metadata)?;
    let mut read = tail_len;
    let t = &tail[tail.len() - 8..];
    if &t[4..8] != MAGIC {
        return Err(corrupt(path, "missing PAR1 magic at the end"));
    }
    let flen = u64::from(u32::from_le_bytes([t[0], t[1], t[2], t[3]]));
    if flen + 12 > len {
        return Err(corrupt(
            path,
            format!("footer length {flen} exceeds the file size {len}"),
        ));
    }
    if flen > MAX_FOOTER {
        return Err(corrupt(path, format!("footer length {flen} is absurd")));
    }
    let footer = if flen + 8 <= tail_len {
        tail.slice((tail_len - 8 - flen) as usize..(tail_len - 8) as usize)
    } else {
        read += flen;
        ra.read_bytes(len - 8 - flen, flen as usize, ReadKind::Metadata)?
    };
    let layout = parse_footer(&footer, len, path)?;
    Ok((layout, read))
}

/// Most list elements a footer's parse reserves room for before reading them.
const PRESIZE_MAX: usize = 1 << 16;

/// Parse FileMetaData `footer` of a file of `file_len` bytes.
pub fn parse_footer(footer: &[u8], file_len: u64, path: &str) -> Result<ParquetLayout, BenchError> {
    let tr = |e: ThriftError| corrupt(path, format!("bad footer: {}", e.0));
    // The footer and its 8-byte trailer must fit the file (a caller may
    // pass any pair: a length from a listing, a footer from elsewhere).
    let data_end = file_len
        .checked_sub(8)
        .and_then(|n| n.checked_sub(footer.len() as u64))
        .ok_or_else(|| {
            corrupt(
                path,
                format!(
                    "a footer of {} B and its 8-byte trailer do not fit a file of {file_len} B",
                    footer.len()
                ),
            )
        })?;
    let mut r = Reader::new(footer);
    r.enter().map_err(tr)?;
    let mut last = 0;
    let mut schema: Vec<SchemaEl> = Vec::new();
    let mut num_rows: Option<i64> = None;
    let mut groups: Vec<(i64, Vec<ChunkLayout>)> = Vec::new();
    loop {
        let f = r.field(&mut last).map_err(tr)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (2, ty::LIST) => {
                let (_, n) = r.list().map_err(tr)?;
                for _ in 0..n {
                    schema.push(parse_schema_el(&mut r).map_err(tr)?);
                }
            }
            (3, ty::I64) => num_rows = Some(r.i64().map_err(tr)?),
            (4, ty::LIST) => {
                let (_, n) = r.list().map_err(tr)?;
                groups.reserve(n.min(PRESIZE_MAX));
                for _ in 0..n {
                    groups.push(parse_row_group(&mut r).map_err(tr)?);
                }
            }
            (_, t) => r.skip(t).map_err(tr)?,
        }
    }
    let leaves = leaves_of(&schema).ok_or_else(|| corrupt(path, "malformed schema tree"))?;
    let num_rows = num_rows
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| corrupt(path, "footer lacks a valid num_rows"))?;
    let mut row_groups = Vec::with_capacity(groups.len());
    let mut first = 0u64;
    for (gi, (nr, chunks)) in groups.into_iter().enumerate() {
        let nr = u64::try_from(nr)
            .map_err(|_| corrupt(path, format!("row group {gi}: negative row count")))?;
        if chunks.len() != leaves.len() {
            return Err(corrupt(
                path,
                format!(
                    "row group {gi} has {} column chunks, schema has {} columns",
                    chunks.len(),
                    leaves.len()
                ),
            ));
        }
        for (ci, c) in chunks.iter().enumerate() {
            if c.offset < 4 || c.offset.checked_add(c.len).is_none_or(|e| e > data_end) {
                return Err(corrupt(
                    path,
                    format!(
                        "row group {gi} column {ci}: bytes {}..+{} lie outside the data area (file {file_len} B)",
                        c.offset, c.len
                    ),
                ));
            }
        }
        row_groups.push(RowGroupLayout {
            num_rows: nr,
            first_row: first,
            chunks,
        });
        first = first
            .checked_add(nr)
            .ok_or_else(|| corrupt(path, "row counts overflow"))?;
    }
    if first != num_rows {
        return Err(corrupt(
            path,
            format!("row groups hold {first} rows, footer says {num_rows}"),
        ));
    }
    Ok(ParquetLayout {
        file_len,
        footer_len: footer.len() as u64,
        num_rows,
        leaves,
        row_groups,
    })
}

#[derive(Default, Debug)]
struct SchemaEl {
    ty: Option<i32>,
    repetition: Option<i32>,
    name: String,
    num_children: i32,
}

fn parse_schema_el(r: &mut Reader) -> Result<SchemaEl, ThriftError> {
    let mut el = SchemaEl::default();
    r.enter()?;
    let mut last = 0;
    loop {
        let f = r.field(&mut last)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (1, ty::I32) => el.ty = Some(r.i32()?),
            (3, ty::I32) => el.repetition = Some(r.i32()?),
            (4, ty::BINARY) => el.name = r.string()?,
            (5, ty::I32) => el.num_children = r.i32()?,
            (_, t) => r.skip(t)?,
        }
    }
    r.leave();
    Ok(el)
}

fn leaves_of(schema: &[SchemaEl]) -> Option<Vec<LeafColumn>> {
    fn walk(
        s: &[SchemaEl],
        i: &mut usize,
        path: &mut Vec<String>,
        def: u16,
        rep: u16,
        out: &mut Vec<LeafColumn>,
        depth: u32,
    ) -> Option<()> {
        if depth > 64 {
            return None;
        }
        let el = s.get(*i)?;
        *i += 1;
        let (def, rep) = match el.repetition {
            Some(REP_OPTIONAL) => (def + 1, rep),
            Some(REP_REPEATED) => (def + 1, rep + 1),
            _ => (def, rep),
        };
        path.push(el.name.clone());
        if el.num_children <= 0 {
            out.push(LeafColumn {
                path: path.join("."),
                top: path.first().cloned().unwrap_or_default(),
                physical_type: el.ty?,
                max_def: def,
                max_rep: rep,
            });
        } else {
            for _ in 0..el.num_children {
                walk(s, i, path, def, rep, out, depth + 1)?;
            }
        }
        path.pop();
        Some(())
    }
    let root = schema.first()?;
    let mut out = Vec::new();
    let mut i = 1;
    let mut path = Vec::new();
    for _ in 0..root.num_children.max(0) {
        walk(schema, &mut i, &mut path, 0, 0, &mut out, 0)?;
    }
    (i == schema.len()).then_some(out)
}

fn parse_row_group(r: &mut Reader) -> Result<(i64, Vec<ChunkLayout>), ThriftError> {
    r.enter()?;
    let mut last = 0;
    let mut rows = -1;
    let mut chunks = Vec::new();
    loop {
        let f = r.field(&mut last)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (1, ty::LIST) => {
                let (_, n) = r.list()?;
                // Sized up front (a dlrm group has 200 chunks: growing by
                // doubling copied and faulted in most of the layout twice);
                // `list` bounded n by the bytes left, the cap bounds a lie.
                chunks.reserve(n.min(PRESIZE_MAX));
                for _ in 0..n {
                    chunks.push(parse_column_chunk(r)?);
                }
            }
            (3, ty::I64) => rows = r.i64()?,
            (_, t) => r.skip(t)?,
        }
    }
    r.leave();
    Ok((rows, chunks))
}

fn parse_column_chunk(r: &mut Reader) -> Result<ChunkLayout, ThriftError> {
    r.enter()?;
    let mut last = 0;
    let mut meta = None;
    loop {
        let f = r.field(&mut last)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (3, ty::STRUCT) => meta = Some(parse_column_meta(r)?),
            (_, t) => r.skip(t)?,
        }
    }
    r.leave();
    meta.ok_or_else(|| ThriftError("column chunk without metadata".into()))
}

fn parse_column_meta(r: &mut Reader) -> Result<ChunkLayout, ThriftError> {
    r.enter()?;
    let mut last = 0;
    let (mut codec, mut nv, mut size, mut data_off, mut dict_off) = (0, -1i64, -1i64, -1i64, None);
    loop {
        let f = r.field(&mut last)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (4, ty::I32) => codec = r.i32()?,
            (5, ty::I64) => nv = r.i64()?,
            (7, ty::I64) => size = r.i64()?,
            (9, ty::I64) => data_off = r.i64()?,
            (11, ty::I64) => dict_off = Some(r.i64()?),
            (_, t) => r.skip(t)?,
        }
    }
    r.leave();
    let bad = |what: &str| ThriftError(format!("column metadata: invalid {what}"));
    let data_off = u64::try_from(data_off).map_err(|_| bad("data_page_offset"))?;
    let dict = dict_off
        .and_then(|d| u64::try_from(d).ok())
        .filter(|d| *d > 0 && *d < data_off);
    Ok(ChunkLayout {
        offset: dict.unwrap_or(data_off),
        len: u64::try_from(size).map_err(|_| bad("total_compressed_size"))?,
        num_values: u64::try_from(nv).map_err(|_| bad("num_values"))?,
        codec,
        has_dictionary: dict.is_some(),
    })
}

// ---------------------------------------------------------------- fast decode

/// Why a chunk cannot take the fast path (the caller falls back to arrow-rs's
/// generic reader), or is corrupt.
#[derive(Debug)]
pub enum FastPathError {
    /// Valid Parquet we do not handle here (dictionary, compression, nulls...).
    Unsupported(String),
    /// The bytes contradict themselves.
    Corrupt(String),
}

/// Walk RLE/bit-packed hybrid `data` of `num` values of `bit_width`, calling
/// `run(value, count)` for each run (bit-packed groups as runs of 1).
fn for_each_level_run(
    data: &[u8],
    bit_width: u32,
    num: usize,
    mut run: impl FnMut(u64, usize) -> Result<(), FastPathError>,
) -> Result<(), FastPathError> {
    let c = |m: &str| FastPathError::Corrupt(m.to_owned());
    let vb = bit_width.div_ceil(8) as usize;
    let mut p = 0usize;
    let mut done = 0usize;
    while done < num {
        let mut h = 0u64;
        let mut shift = 0;
        loop {
            let b = *data.get(p).ok_or_else(|| c("levels truncated"))?;
            p += 1;
            if shift > 56 {
                return Err(c("bad level run header"));
            }
            h |= u64::from(b & 0x7F) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        if h & 1 == 0 {
            let count = usize::try_from(h >> 1).map_err(|_| c("level run too long"))?;
            let bytes = data.get(p..p + vb).ok_or_else(|| c("levels truncated"))?;
            p += vb;
            let mut v = 0u64;
            for (i, b) in bytes.iter().enumerate() {
                v |= u64::from(*b) << (8 * i);
            }
            if count == 0 {
                return Err(c("empty level run"));
            }
            let count = count.min(num - done);
            run(v, count)?;
            done += count;
        } else {
            let groups = usize::try_from(h >> 1).map_err(|_| c("level run too long"))?;
            let nbytes = groups
                .checked_mul(bit_width as usize)
                .ok_or_else(|| c("level run too long"))?;
            let bits = data
                .get(p..p.saturating_add(nbytes))
                .ok_or_else(|| c("levels truncated"))?;
            p += nbytes;
            let count = groups.saturating_mul(8).min(num - done);
            for i in 0..count {
                let mut v = 0u64;
                for b in 0..bit_width as usize {
                    let bit = i * bit_width as usize + b;
                    v |= u64::from((bits[bit / 8] >> (bit % 8)) & 1) << b;
                }
                run(v, 1)?;
            }
            done += count;
        }
    }
    Ok(())
}

fn bit_width(max: u16) -> u32 {
    16 - max.leading_zeros()
}

/// Whether [`decode_fixed_list_chunk`] can take this chunk: an uncompressed
/// FLOAT single-level list (checked again, page by page, while decoding).
pub fn is_fast_list(leaf: &LeafColumn, meta: &ChunkLayout) -> bool {
    leaf.physical_type == TYPE_FLOAT && leaf.max_rep == 1 && meta.codec == CODEC_UNCOMPRESSED
}

/// Decode one column chunk (`chunk` = its bytes) of `rows` fixed-size lists of
/// `n` f32 with no nulls, appending values to `out` (little-endian f32 bytes).
/// Levels are checked run by run; values are copied in bulk.
pub fn decode_fixed_list_chunk(
    chunk: &[u8],
    leaf: &LeafColumn,
    meta: &ChunkLayout,
    rows: u64,
    n: usize,
    out: &mut Vec<u8>,
) -> Result<(), FastPathError> {
    let un = |m: String| FastPathError::Unsupported(m);
    let c = |m: &str| FastPathError::Corrupt(m.to_owned());
    if leaf.physical_type != TYPE_FLOAT {
        return Err(un(format!("{} is not FLOAT", leaf.path)));
    }
    if meta.codec != CODEC_UNCOMPRESSED {
        return Err(un(format!("{} is compressed", leaf.path)));
    }
    if leaf.max_rep != 1 || n < 1 {
        return Err(un(format!("{} is not a single-level list", leaf.path)));
    }
    let total = rows
        .checked_mul(n as u64)
        .filter(|t| *t == meta.num_values)
        .ok_or_else(|| un(format!("{}: value count is not rows x {n}", leaf.path)))?;
    let want_bytes = (total * 4) as usize;
    out.reserve(want_bytes);
    let start_len = out.len();
    let rep_bw = bit_width(leaf.max_rep);
    let def_bw = bit_width(leaf.max_def);
    let max_def = u64::from(leaf.max_def);
    let mut p = 0usize;
    let mut pos: u64 = 0; // value position within the chunk
    while pos < total {
        let mut r = Reader::new(&chunk[p..]);
        let h = parse_page_header(&mut r).map_err(|e| FastPathError::Corrupt(e.0))?;
        p += r.pos;
        if h.page_type == PAGE_DICTIONARY && pos == 0 && meta.has_dictionary {
            // PLAIN data pages never refer to it: skip the dictionary.
            let size = usize::try_from(h.compressed).map_err(|_| c("bad page size"))?;
            p = p
                .checked_add(size)
                .filter(|e| *e <= chunk.len())
                .ok_or_else(|| c("dictionary page runs past the chunk"))?;
            continue;
        }
        if h.page_type != PAGE_DATA {
            return Err(un(format!("{}: page type {}", leaf.path, h.page_type)));
        }
        if h.encoding != ENC_PLAIN || h.def_enc != ENC_RLE || h.rep_enc != ENC_RLE {
            return Err(un(format!("{}: non-PLAIN/RLE page", leaf.path)));
        }
        let size = usize::try_from(h.compressed).map_err(|_| c("bad page size"))?;
        let page = chunk
            .get(p..p + size)
            .ok_or_else(|| c("page runs past the chunk"))?;
        p += size;
        let nv = u64::try_from(h.num_values).map_err(|_| c("bad page value count"))?;
        if nv == 0 || pos + nv > total {
            return Err(c("page value counts do not add up"));
        }
        let mut q = 0usize;
        let rep = take_levels(page, &mut q)?;
        let def = take_levels(page, &mut q)?;
        let mut at = pos;
        let nn = n as u64;
        for_each_level_run(rep, rep_bw, nv as usize, |v, cnt| {
            let cnt = cnt as u64;
            let ok = match v {
                0 => at.is_multiple_of(nn) && (cnt == 1 || nn == 1),
                1 => !at.is_multiple_of(nn) && (at % nn) + cnt <= nn,
                _ => false,
            };
            at += cnt;
            if ok {
                Ok(())
            } else {
                Err(FastPathError::Unsupported(format!(
                    "{}: lists are not all of size {n}",
                    leaf.path
                )))
            }
        })?;
        for_each_level_run(def, def_bw, nv as usize, |v, _| {
            if v == max_def {
                Ok(())
            } else {
                Err(FastPathError::Unsupported(format!(
                    "{}: has nulls",
                    leaf.path
                )))
            }
        })?;
        let values = &page[q..];
        if values.len() as u64 != nv * 4 {
            return Err(c("value bytes do not match the page value count"));
        }
        out.extend_from_slice(values);
        pos += nv;
    }
    debug_assert_eq!(out.len() - start_len, want_bytes);
    Ok(())
}

/// Length-prefixed (u32 LE) level block at `*q` of a v1 data page.
fn take_levels<'a>(page: &'a [u8], q: &mut usize) -> Result<&'a [u8], FastPathError> {
    let c = || FastPathError::Corrupt("levels truncated".to_owned());
    let l = page.get(*q..*q + 4).ok_or_else(c)?;
    let l = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
    let s = page
        .get(*q + 4..(*q + 4).checked_add(l).ok_or_else(c)?)
        .ok_or_else(c)?;
    *q += 4 + l;
    Ok(s)
}

struct PageHeader {
    page_type: i32,
    compressed: i32,
    num_values: i32,
    encoding: i32,
    def_enc: i32,
    rep_enc: i32,
}

fn parse_page_header(r: &mut Reader) -> Result<PageHeader, ThriftError> {
    let mut h = PageHeader {
        page_type: -1,
        compressed: -1,
        num_values: -1,
        encoding: -1,
        def_enc: -1,
        rep_enc: -1,
    };
    r.enter()?;
    let mut last = 0;
    loop {
        let f = r.field(&mut last)?;
        match (f.id, f.ty) {
            (_, 0) => break,
            (1, ty::I32) => h.page_type = r.i32()?,
            (3, ty::I32) => h.compressed = r.i32()?,
            (5, ty::STRUCT) => {
                r.enter()?;
                let mut l2 = 0;
                loop {
                    let g = r.field(&mut l2)?;
                    match (g.id, g.ty) {
                        (_, 0) => break,
                        (1, ty::I32) => h.num_values = r.i32()?,
                        (2, ty::I32) => h.encoding = r.i32()?,
                        (3, ty::I32) => h.def_enc = r.i32()?,
                        (4, ty::I32) => h.rep_enc = r.i32()?,
                        (_, t) => r.skip(t)?,
                    }
                }
                r.leave();
            }
            (_, t) => r.skip(t)?,
        }
    }
    r.leave();
    Ok(h)
}

/// Thrift helper re-exported for tests of lying footers.
pub use thrift::Writer as ThriftWriter;

#[cfg(test)]
mod tests {
    use arrow_array::{Array, RecordBatch};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{LogicalType, Type as PhysicalType};

    use super::*;
    use crate::format::r#gen::scalar_chunk_values;
    use crate::storage::LocalStorage;

    fn col(name: &str, elem: ElemType, size: usize) -> ColumnSpec {
        ColumnSpec {
            name: name.into(),
            elem,
            size,
        }
    }

    /// A primitive or fixed-size-list array's value bytes (arrow widths).
    fn arrow_bytes(a: &dyn Array) -> Vec<u8> {
        let d = a.to_data();
        match a.data_type() {
            DataType::FixedSizeList(f, n) => {
                let w = f.data_type().primitive_width().unwrap();
                let c = &d.child_data()[0];
                let first = (d.offset() + c.offset()) * w * *n as usize;
                c.buffers()[0].as_slice()[first..first + a.len() * *n as usize * w].to_vec()
            }
            t => {
                let w = t.primitive_width().unwrap();
                d.buffers()[0].as_slice()[d.offset() * w..(d.offset() + a.len()) * w].to_vec()
            }
        }
    }

    /// Stored (PLAIN) bytes as arrow's native bytes: int8 narrows from INT32.
    fn native(elem: ElemType, stored: &[u8]) -> Vec<u8> {
        match elem {
            ElemType::Int8 => stored.chunks_exact(4).map(|c| c[0]).collect(),
            _ => stored.to_vec(),
        }
    }

    /// The bytes the writer stores for rows `rows` of column `ci`.
    fn expected(
        schema: &FluxSchema,
        seed: u64,
        ci: usize,
        rg_rows: u64,
        total: u64,
        rows: std::ops::Range<u64>,
    ) -> Vec<u8> {
        let c = &schema.columns[ci];
        let w = c.elem.stored_bytes();
        let mut out = Vec::new();
        for row in rows {
            if c.size > 1 {
                let mut b = vec![0u8; c.size * w];
                fill_values(&mut row_seed(seed, ci, row), c.elem, &mut b);
                out.extend(native(c.elem, &b));
            } else {
                let g0 = row / rg_rows * rg_rows;
                let n = rg_rows.min(total - g0) as usize;
                let b = scalar_chunk_values(seed, ci, g0, n, c.elem);
                let at = (row - g0) as usize * w;
                out.extend(native(c.elem, &b[at..at + w]));
            }
        }
        out
    }

    fn read_all(path: &std::path::Path) -> (ParquetRecordBatchReaderBuilder<std::fs::File>, ()) {
        let f = std::fs::File::open(path).unwrap();
        (ParquetRecordBatchReaderBuilder::try_new(f).unwrap(), ())
    }

    fn batch_of(b: ParquetRecordBatchReaderBuilder<std::fs::File>) -> RecordBatch {
        let batches: Vec<RecordBatch> = b
            .with_batch_size(1 << 20)
            .build()
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(batches.len(), 1);
        batches.into_iter().next().unwrap()
    }

    #[test]
    fn every_dtype_round_trips_through_arrow_rs() {
        let d = tempfile::tempdir().unwrap();
        let st = LocalStorage::new(d.path());
        let schema = FluxSchema {
            columns: vec![
                col("h", ElemType::Float16, 1),
                col("f", ElemType::Float32, 1),
                col("d", ElemType::Float64, 1),
                col("b", ElemType::Int8, 1),
                col("hl", ElemType::Float16, 3),
                col("fl", ElemType::Float32, 4),
                col("dl", ElemType::Float64, 2),
                col("bl", ElemType::Int8, 5),
            ],
        };
        let size = write_parquet_file(&st, "t.parquet", &schema, 10, 4, 11).unwrap();
        assert_eq!(
            size,
            std::fs::metadata(d.path().join("t.parquet")).unwrap().len()
        );
        let (b, ()) = read_all(&d.path().join("t.parquet"));
        // Types as pyarrow writes them, and the ARROW:schema hint agrees.
        assert_eq!(b.schema().as_ref(), &arrow_schema(&schema));
        let descr = b.metadata().file_metadata().schema_descr_ptr();
        let leaf = |i: usize| descr.column(i);
        assert_eq!(leaf(0).physical_type(), PhysicalType::FIXED_LEN_BYTE_ARRAY);
        assert_eq!(leaf(0).type_length(), 2);
        assert_eq!(leaf(0).logical_type_ref(), Some(&LogicalType::Float16));
        assert_eq!(leaf(1).physical_type(), PhysicalType::FLOAT);
        assert_eq!(leaf(2).physical_type(), PhysicalType::DOUBLE);
        assert_eq!(leaf(3).physical_type(), PhysicalType::INT32);
        assert_eq!(
            leaf(3).logical_type_ref(),
            Some(&LogicalType::integer(8, true))
        );
        assert_eq!(
            leaf(3).converted_type(),
            parquet::basic::ConvertedType::INT_8
        );
        assert_eq!((leaf(3).max_def_level(), leaf(3).max_rep_level()), (1, 0));
        assert_eq!((leaf(7).max_def_level(), leaf(7).max_rep_level()), (3, 1));
        assert_eq!(b.metadata().num_row_groups(), 3);
        for g in b.metadata().row_groups() {
            for c in g.columns() {
                // Every chunk opens with a dictionary page (DLIO's raw reader needs it).
                assert!(c.dictionary_page_offset().is_some());
                assert_eq!(c.statistics().and_then(|s| s.null_count_opt()), Some(0));
            }
        }
        let batch = batch_of(b);
        for ci in 0..schema.columns.len() {
            assert_eq!(
                arrow_bytes(batch.column(ci).as_ref()),
                expected(&schema, 11, ci, 4, 10, 0..10),
                "column {}",
                schema.columns[ci].name
            );
        }
    }

    #[test]
    fn scalar_chunks_span_pages_with_one_stream() {
        let d = tempfile::tempdir().unwrap();
        let st = LocalStorage::new(d.path());
        // 600,000 rows in one group: 5 DOUBLE, 3 INT32 and 2 FLBA(2) pages.
        let schema = FluxSchema {
            columns: vec![
                col("d", ElemType::Float64, 1),
                col("b", ElemType::Int8, 1),
                col("h", ElemType::Float16, 1),
            ],
        };
        let rows = 600_000;
        write_parquet_file(&st, "p.parquet", &schema, rows, rows, 5).unwrap();
        let (b, ()) = read_all(&d.path().join("p.parquet"));
        let batch = batch_of(b);
        for ci in 0..3 {
            let c = &schema.columns[ci];
            let want = scalar_chunk_values(5, ci, 0, rows as usize, c.elem);
            assert_eq!(
                arrow_bytes(batch.column(ci).as_ref()),
                native(c.elem, &want),
                "{}",
                c.name
            );
        }
    }

    /// A full-size dlrm file's footer: 768 row groups × 200 column chunks,
    /// encoded without writing the 4 GB of data it describes.
    #[test]
    fn dlrm_footer_of_768_row_groups_parses_in_linear_time() {
        // The dtypes of the embedded dlrm_b200.yaml (format sits below config).
        let yaml = include_str!("../config/workloads/dlrm_b200.yaml");
        let schema = FluxSchema {
            columns: yaml
                .lines()
                .filter_map(|l| l.trim().strip_prefix("dtype: "))
                .enumerate()
                .map(|(i, d)| {
                    col(
                        &format!("feature_{i:03}"),
                        ElemType::from_dtype(d).unwrap(),
                        1,
                    )
                })
                .collect(),
        };
        assert_eq!(schema.columns.len(), 200);
        let (rg_rows, rows) = (6144u64, 4_718_592u64);
        let mut pos = 4u64;
        let groups: Vec<(u64, Vec<ChunkMeta>)> = (0..rows / rg_rows)
            .map(|_| {
                let chunks = schema
                    .columns
                    .iter()
                    .map(|c| {
                        let dict = dictionary_page(c.elem).len() as u64;
                        // A page header, the definition levels, the values.
                        let size = dict + 24 + rg_rows * c.elem.stored_bytes() as u64;
                        let m = ChunkMeta {
                            offset: pos,
                            data_offset: pos + dict,
                            size,
                            num_values: rg_rows,
                        };
                        pos += size;
                        m
                    })
                    .collect();
                (rg_rows, chunks)
            })
            .collect();
        assert_eq!(groups.len(), 768);
        let t = std::time::Instant::now();
        let footer = encode_footer(&schema, rows, &groups);
        let encoded = t.elapsed();
        let file_len = pos + footer.len() as u64 + 8;
        let t = std::time::Instant::now();
        let layout = parse_footer(&footer, file_len, "dlrm.parquet").unwrap();
        let parsed = t.elapsed();
        eprintln!(
            "dlrm footer: {} B for a {file_len} B file; encode {encoded:?}, parse {parsed:?}",
            footer.len()
        );
        assert!((footer.len() as u64) < MAX_FOOTER / 2, "{}", footer.len());
        assert_eq!(layout.row_groups.len(), 768);
        assert_eq!(layout.leaves.len(), 200);
        assert_eq!(layout.num_rows, 4_718_592);
        assert_eq!(layout.row_group_of(4_718_591), Some(767));
        assert!(
            layout
                .row_groups
                .iter()
                .all(|g| g.chunks.iter().all(|c| c.has_dictionary))
        );
        // Linear: a tenth of the groups parses in about a tenth of the time
        // (generous bound; quadratic would be ~100x).
        let small = encode_footer(&schema, 76 * rg_rows, &groups[..76]);
        let small_len = groups[75].1[199].offset + groups[75].1[199].size + small.len() as u64 + 8;
        let t = std::time::Instant::now();
        parse_footer(&small, small_len, "small.parquet").unwrap();
        let small_t = t.elapsed();
        assert!(
            parsed < small_t * 40 + std::time::Duration::from_millis(50),
            "{parsed:?} vs {small_t:?}"
        );
    }

    #[test]
    fn a_footer_longer_than_its_file_is_a_clear_error() {
        let err = parse_footer(&[0x15; 40], 44, "f.parquet").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("a footer of 40 B and its 8-byte trailer do not fit a file of 44 B"),
            "{text}"
        );
        assert!(parse_footer(&[], 3, "f.parquet").is_err());
    }
}
