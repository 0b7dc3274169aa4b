//! The fast decoder of PLAIN float fixed-size lists without nulls: page
//! headers, level runs checked, values copied out.
use super::*;

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
pub(super) fn for_each_level_run(
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

pub(super) fn bit_width(max: u16) -> u32 {
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
pub(super) fn take_levels<'a>(page: &'a [u8], q: &mut usize) -> Result<&'a [u8], FastPathError> {
    let c = || FastPathError::Corrupt("levels truncated".to_owned());
    let l = page.get(*q..*q + 4).ok_or_else(c)?;
    let l = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
    let s = page
        .get(*q + 4..(*q + 4).checked_add(l).ok_or_else(c)?)
        .ok_or_else(c)?;
    *q += 4 + l;
    Ok(s)
}

pub(super) struct PageHeader {
    page_type: i32,
    compressed: i32,
    num_values: i32,
    encoding: i32,
    def_enc: i32,
    rep_enc: i32,
}

pub(super) fn parse_page_header(r: &mut Reader) -> Result<PageHeader, ThriftError> {
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
