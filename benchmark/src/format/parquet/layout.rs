//! The bounds-checked footer parser: each row group's column-chunk byte
//! ranges, from the file's tail (one read when the guess holds).
use super::*;

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
pub(super) const PRESIZE_MAX: usize = 1 << 16;

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
pub(super) struct SchemaEl {
    ty: Option<i32>,
    repetition: Option<i32>,
    name: String,
    num_children: i32,
}

pub(super) fn parse_schema_el(r: &mut Reader) -> Result<SchemaEl, ThriftError> {
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

pub(super) fn leaves_of(schema: &[SchemaEl]) -> Option<Vec<LeafColumn>> {
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

pub(super) fn parse_row_group(r: &mut Reader) -> Result<(i64, Vec<ChunkLayout>), ThriftError> {
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

pub(super) fn parse_column_chunk(r: &mut Reader) -> Result<ChunkLayout, ThriftError> {
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

pub(super) fn parse_column_meta(r: &mut Reader) -> Result<ChunkLayout, ThriftError> {
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
