//! The ZIP side of an NPZ: the (zip64) end records, the central directory
//! and the members' local headers, each read bounds-checked.
use super::{
    MAX_CENTRAL_DIR, NpzMember, SIG_CENTRAL, SIG_EOCD, SIG_LOCAL, SIG_Z64_EOCD, SIG_Z64_LOC, Z32,
    corrupt, u16_at, u32_at, u64_at,
};
use crate::{
    error::BenchError,
    storage::{RandomAccess, ReadKind},
};

/// Where the central directory lies, from the (zip64) end records.
pub(super) struct CentralDirectory {
    /// Entries the end record announces.
    pub(super) entries: u64,
    /// Offset of the central directory in the file.
    pub(super) offset: u64,
    /// Length of the central directory in bytes.
    pub(super) len: u64,
}

/// A central directory entry, before its local header is read.
pub(super) struct CentralEntry {
    name: String,
    method: u16,
    crc: u32,
    /// Offset of the member's local header.
    header_offset: u64,
    compressed_size: u64,
    size: u64,
}

/// Finds the end-of-central-directory record (and the zip64 one it points
/// to) and checks the central directory lies inside the file. Returns it
/// and the bytes read.
pub(super) fn find_central_directory(
    ra: &dyn RandomAccess,
    path: &str,
    kind: ReadKind,
) -> Result<(CentralDirectory, u64), BenchError> {
    let len = ra.len();
    if len < 22 {
        return Err(corrupt(
            path,
            format!("file of {len} bytes is too short for a ZIP"),
        ));
    }
    let tail_len = len.min(65_535 + 22 + 20);
    let tail = ra.read_bytes(len - tail_len, tail_len as usize, kind)?;
    let mut read = tail_len;
    let eocd = (0..=tail.len() - 22)
        .rev()
        .find(|&i| u32_at(&tail, i) == Some(SIG_EOCD))
        .ok_or_else(|| corrupt(path, "no ZIP end-of-central-directory record"))?;
    let bad = |m: &str| corrupt(path, m.to_owned());
    let mut entries = u64::from(u16_at(&tail, eocd + 10).ok_or_else(|| bad("truncated EOCD"))?);
    let mut cd_len = u64::from(u32_at(&tail, eocd + 12).ok_or_else(|| bad("truncated EOCD"))?);
    let mut cd_off = u64::from(u32_at(&tail, eocd + 16).ok_or_else(|| bad("truncated EOCD"))?);
    if (cd_off == Z32 || cd_len == Z32 || entries == 0xFFFF) && eocd >= 20 {
        let loc = eocd - 20;
        if u32_at(&tail, loc) == Some(SIG_Z64_LOC) {
            let z64 = u64_at(&tail, loc + 8).ok_or_else(|| bad("truncated zip64 locator"))?;
            if z64.checked_add(56).is_none_or(|e| e > len) {
                return Err(bad("zip64 end record offset lies past the end of the file"));
            }
            let mut rec = [0u8; 56];
            ra.read_into(&mut rec, z64, kind)?;
            read += 56;
            if u32_at(&rec, 0) != Some(SIG_Z64_EOCD) {
                return Err(bad("bad zip64 end record signature"));
            }
            entries = u64_at(&rec, 32).unwrap_or(0);
            cd_len = u64_at(&rec, 40).unwrap_or(0);
            cd_off = u64_at(&rec, 48).unwrap_or(0);
        }
    }
    if cd_len > MAX_CENTRAL_DIR || cd_off.checked_add(cd_len).is_none_or(|e| e > len) {
        return Err(corrupt(
            path,
            format!("central directory ({cd_len} B at {cd_off}) lies outside the file ({len} B)"),
        ));
    }
    Ok((
        CentralDirectory {
            entries,
            offset: cd_off,
            len: cd_len,
        },
        read,
    ))
}

/// Parses up to `dir.entries` entries of the central directory `cd` (at
/// most as many as `dir.len` can hold), zip64 extra fields applied.
pub(super) fn parse_central_directory(
    cd: &[u8],
    dir: &CentralDirectory,
    path: &str,
) -> Result<Vec<CentralEntry>, BenchError> {
    let bad = |m: &str| corrupt(path, m.to_owned());
    let mut members = Vec::new();
    let mut p = 0usize;
    for _ in 0..dir.entries.min(dir.len / 46 + 1) {
        if u32_at(cd, p) != Some(SIG_CENTRAL) {
            return Err(bad("bad central directory entry signature"));
        }
        let h = |o: usize| u16_at(cd, p + o).ok_or_else(|| bad("truncated central directory"));
        let w = |o: usize| u32_at(cd, p + o).ok_or_else(|| bad("truncated central directory"));
        let method = h(10)?;
        let crc = w(16)?;
        let mut csize = u64::from(w(20)?);
        let mut size = u64::from(w(24)?);
        let (nlen, xlen, clen) = (h(28)? as usize, h(30)? as usize, h(32)? as usize);
        let mut off = u64::from(w(42)?);
        let name = cd
            .get(p + 46..p + 46 + nlen)
            .ok_or_else(|| bad("truncated central directory"))?;
        let name = String::from_utf8_lossy(name).into_owned();
        let extra = cd
            .get(p + 46 + nlen..p + 46 + nlen + xlen)
            .ok_or_else(|| bad("truncated central directory"))?;
        apply_zip64_extra(extra, [&mut size, &mut csize, &mut off], path)?;
        p += 46 + nlen + xlen + clen;
        members.push(CentralEntry {
            name,
            method,
            crc,
            header_offset: off,
            compressed_size: csize,
            size,
        });
    }
    Ok(members)
}

/// Replaces the `fields` (size, compressed size, offset) that are
/// 0xFFFFFFFF with the values of the zip64 extra field in `extra`, in order.
fn apply_zip64_extra(
    extra: &[u8],
    mut fields: [&mut u64; 3],
    path: &str,
) -> Result<(), BenchError> {
    let mut e = 0;
    while e + 4 <= extra.len() {
        let id = u16_at(extra, e).unwrap_or(0);
        let sz = u16_at(extra, e + 2).unwrap_or(0) as usize;
        if id == 1 {
            let mut q = e + 4;
            for field in fields.iter_mut() {
                if **field == Z32 {
                    **field = u64_at(extra, q)
                        .ok_or_else(|| corrupt(path, "truncated zip64 extra".to_owned()))?;
                    q += 8;
                }
            }
        }
        e += 4 + sz;
    }
    Ok(())
}

/// Reads each entry's local header to find where its data starts, checking
/// the data lies inside the file. Returns the members and the bytes read.
pub(super) fn locate_members(
    ra: &dyn RandomAccess,
    path: &str,
    entries: Vec<CentralEntry>,
    kind: ReadKind,
) -> Result<(Vec<NpzMember>, u64), BenchError> {
    let len = ra.len();
    let mut read = 0;
    let mut out = Vec::new();
    for entry in entries {
        let CentralEntry {
            name,
            method,
            crc,
            header_offset: off,
            compressed_size: csize,
            size,
        } = entry;
        if off.checked_add(30).is_none_or(|e| e > len) {
            return Err(corrupt(
                path,
                format!("member {name}: local header past end of file"),
            ));
        }
        let mut lh = [0u8; 30];
        ra.read_into(&mut lh, off, kind)?;
        read += 30;
        if u32_at(&lh, 0) != Some(SIG_LOCAL) {
            return Err(corrupt(
                path,
                format!("member {name}: bad local header signature"),
            ));
        }
        let data_offset = off
            + 30
            + u64::from(u16_at(&lh, 26).unwrap_or(0))
            + u64::from(u16_at(&lh, 28).unwrap_or(0));
        if data_offset.checked_add(csize).is_none_or(|e| e > len) {
            return Err(corrupt(
                path,
                format!(
                    "member {name}: {csize} B at {data_offset} run past the end of the file ({len} B)"
                ),
            ));
        }
        out.push(NpzMember {
            name,
            method,
            crc,
            data_offset,
            compressed_size: csize,
            size,
        });
    }
    Ok((out, read))
}
