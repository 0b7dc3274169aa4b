//! Writing a DLIO Parquet file as pyarrow does: levels, a dictionary
//! page where pyarrow writes one, data pages streamed in chunks, and the
//! Thrift footer with the `ARROW:schema` metadata.
use super::*;

pub(super) fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// RLE-hybrid levels for `rows` lists of `n` elements, each a u32 length prefix
/// + runs: repetition (0 then n-1 ones per row), definition (all `max_def`).
pub(super) fn write_levels(out: &mut Vec<u8>, rows: usize, n: usize, list: bool) {
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

pub(super) struct ChunkMeta {
    /// The chunk's first byte: its dictionary page.
    pub(super) offset: u64,
    /// Its first data page.
    pub(super) data_offset: u64,
    pub(super) size: u64,
    pub(super) num_values: u64,
}

/// The one-entry PLAIN dictionary page that opens every column chunk. The
/// data pages stay PLAIN (what pyarrow writes after its dictionary falls
/// back), but readers that locate a chunk by `dictionary_page_offset`, as
/// DLIO's raw Parquet readers do, need the field set.
pub(super) fn dictionary_page(elem: ElemType) -> Vec<u8> {
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
        return Err(BenchError::usage(
            "dataset.parquet.columns",
            format!("{path}: Parquet schema needs at least one column, each with size >= 1"),
        ));
    }
    if schema
        .columns
        .iter()
        .any(|c| c.size.saturating_mul(c.elem.stored_bytes()) > i32::MAX as usize)
    {
        return Err(BenchError::TooLarge(format!(
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
                    .map_err(|_| BenchError::TooLarge(format!("{path}: page too large")))?;
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
pub(super) struct ChunkedWriter<'a> {
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

pub(super) fn encode_footer(
    schema: &FluxSchema,
    rows: u64,
    groups: &[(u64, Vec<ChunkMeta>)],
) -> Vec<u8> {
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
pub(super) fn leaf_element(t: &mut Writer, elem: ElemType, name: &[u8]) {
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
