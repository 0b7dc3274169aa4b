//! unet3d NPZ: a writer producing what `np.savez(path, x=records, y=[0]*n)`
//! produces (ZIP STORED, zip64 local headers as numpy forces them, `.npy` v1
//! headers padded to 64 bytes), and a bounds-checked parser of the central
//! directory and the `x.npy` header ([`read_layout`]).
use super::r#gen::{fill_bytes, normal_pair};
use crate::{
    error::BenchError,
    storage::{RandomAccess, ReadKind, Storage},
};
use central_dir::{find_central_directory, locate_members, parse_central_directory};

mod central_dir;

const SIG_LOCAL: u32 = 0x0403_4b50;
const SIG_CENTRAL: u32 = 0x0201_4b50;
const SIG_EOCD: u32 = 0x0605_4b50;
const SIG_Z64_EOCD: u32 = 0x0606_4b50;
const SIG_Z64_LOC: u32 = 0x0706_4b50;
const Z32: u64 = 0xFFFF_FFFF;
/// Central directories larger than this are rejected (ours are ~200 B).
pub const MAX_CENTRAL_DIR: u64 = 16 << 20;
/// `.npy` headers larger than this are rejected (numpy's are 128 B).
const MAX_NPY_HEADER: u64 = 1 << 20;

fn corrupt(path: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: path.into(),
        format: "NPZ",
        reason: reason.into(),
    }
}

/// DLIO's `x` dimensions for one file: two independent draws from
/// Normal(√L, stdev/2/√L), clipped to ≥ 1; without stdev both are ⌊√L⌋.
pub fn npz_dims(record_length: f64, stdev: f64, rng_seed: u64) -> (usize, usize) {
    let mean = record_length.max(1.0).sqrt();
    if stdev <= 0.0 {
        let d = (mean as usize).max(1);
        return (d, d);
    }
    let sigma = stdev / 2.0 / mean;
    let (z1, z2) = normal_pair(rng_seed ^ 0x5EED_0FD1_1000);
    let d = |z: f64| ((mean + sigma * z).max(1.0)) as usize;
    (d(z1), d(z2))
}

/// `.npy` v1 header for a C-order array, padded so data starts 64-aligned.
pub fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape_s = match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    let total = (10 + dict.len() + 1).next_multiple_of(64);
    while 10 + dict.len() + 1 < total {
        dict.push(' ');
    }
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h
}

struct Member {
    name: &'static str,
    offset: u64,
    size: u64,
    crc: u32,
}

fn local_header(name: &str, crc: u32, size: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(30 + name.len() + 20);
    h.extend_from_slice(&SIG_LOCAL.to_le_bytes());
    h.extend_from_slice(&45u16.to_le_bytes()); // version needed (zip64)
    h.extend_from_slice(&0u16.to_le_bytes()); // flags
    h.extend_from_slice(&0u16.to_le_bytes()); // STORED
    h.extend_from_slice(&0u16.to_le_bytes()); // time
    h.extend_from_slice(&0x21u16.to_le_bytes()); // date 1980-01-01
    h.extend_from_slice(&crc.to_le_bytes());
    h.extend_from_slice(&(Z32 as u32).to_le_bytes());
    h.extend_from_slice(&(Z32 as u32).to_le_bytes());
    h.extend_from_slice(&(name.len() as u16).to_le_bytes());
    h.extend_from_slice(&20u16.to_le_bytes());
    h.extend_from_slice(name.as_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h
}

/// Write a DLIO unet3d NPZ: `x` uint8 of shape (d1, d2, samples) with random
/// bytes, `y` int64 `zeros[samples]`. Returns the file size in bytes.
pub fn write_npz_file(
    storage: &dyn Storage,
    path: &str,
    dims: (usize, usize),
    samples: usize,
    seed: u64,
) -> Result<u64, BenchError> {
    let shape = [dims.0, dims.1, samples];
    let n = shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or_else(|| BenchError::TooLarge(format!("{path}: NPZ dimensions overflow")))?;
    let mut x = npy_header("|u1", &shape);
    let xh = x.len();
    x.reserve(n);
    fill_bytes(seed, n, &mut x);
    debug_assert_eq!(x.len(), xh + n);
    let mut y = npy_header("<i8", &[samples]);
    y.resize(y.len() + samples * 8, 0);

    let mut w = storage.create(path)?;
    let mut pos = 0u64;
    let mut members = Vec::new();
    for (name, data) in [("x.npy", &x), ("y.npy", &y)] {
        let crc = crc32fast::hash(data);
        let h = local_header(name, crc, data.len() as u64);
        w.write_all(&h)?;
        w.write_all(data)?;
        members.push(Member {
            name,
            offset: pos,
            size: data.len() as u64,
            crc,
        });
        pos += (h.len() + data.len()) as u64;
    }
    let cd_start = pos;
    let mut cd = Vec::new();
    for m in &members {
        let need64 = m.size >= Z32 || m.offset >= Z32;
        cd.extend_from_slice(&SIG_CENTRAL.to_le_bytes());
        cd.extend_from_slice(&(if need64 { 45u16 } else { 20u16 }).to_le_bytes()); // made by
        cd.extend_from_slice(&(if need64 { 45u16 } else { 20u16 }).to_le_bytes()); // needed
        cd.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // flags, method, time
        cd.extend_from_slice(&0x21u16.to_le_bytes());
        cd.extend_from_slice(&m.crc.to_le_bytes());
        let s32 = if need64 { Z32 } else { m.size } as u32;
        cd.extend_from_slice(&s32.to_le_bytes());
        cd.extend_from_slice(&s32.to_le_bytes());
        cd.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
        cd.extend_from_slice(&(if need64 { 28u16 } else { 0 }).to_le_bytes());
        cd.extend_from_slice(&[0; 6]); // comment len, disk, internal attrs
        cd.extend_from_slice(&0x0180_0000u32.to_le_bytes()); // external attrs (0600 file)
        let o32 = if need64 { Z32 } else { m.offset } as u32;
        cd.extend_from_slice(&o32.to_le_bytes());
        cd.extend_from_slice(m.name.as_bytes());
        if need64 {
            cd.extend_from_slice(&1u16.to_le_bytes());
            cd.extend_from_slice(&24u16.to_le_bytes());
            cd.extend_from_slice(&m.size.to_le_bytes());
            cd.extend_from_slice(&m.size.to_le_bytes());
            cd.extend_from_slice(&m.offset.to_le_bytes());
        }
    }
    let cd_len = cd.len() as u64;
    let mut end = Vec::new();
    if cd_start >= Z32 {
        let z64_at = cd_start + cd_len;
        end.extend_from_slice(&SIG_Z64_EOCD.to_le_bytes());
        end.extend_from_slice(&44u64.to_le_bytes());
        end.extend_from_slice(&45u16.to_le_bytes());
        end.extend_from_slice(&45u16.to_le_bytes());
        end.extend_from_slice(&[0; 8]);
        end.extend_from_slice(&(members.len() as u64).to_le_bytes());
        end.extend_from_slice(&(members.len() as u64).to_le_bytes());
        end.extend_from_slice(&cd_len.to_le_bytes());
        end.extend_from_slice(&cd_start.to_le_bytes());
        end.extend_from_slice(&SIG_Z64_LOC.to_le_bytes());
        end.extend_from_slice(&0u32.to_le_bytes());
        end.extend_from_slice(&z64_at.to_le_bytes());
        end.extend_from_slice(&1u32.to_le_bytes());
    }
    end.extend_from_slice(&SIG_EOCD.to_le_bytes());
    end.extend_from_slice(&[0; 4]);
    end.extend_from_slice(&(members.len() as u16).to_le_bytes());
    end.extend_from_slice(&(members.len() as u16).to_le_bytes());
    end.extend_from_slice(&(cd_len as u32).to_le_bytes());
    end.extend_from_slice(&(cd_start.min(Z32) as u32).to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    w.write_all(&cd)?;
    w.write_all(&end)?;
    w.finish()?;
    Ok(cd_start + cd_len + end.len() as u64)
}

// ---------------------------------------------------------------- parsing

/// A member of the archive, located.
#[derive(Clone, Debug)]
pub struct NpzMember {
    pub name: String,
    /// 0 = STORED, 8 = DEFLATE.
    pub method: u16,
    pub crc: u32,
    /// Offset of the member's data (after its local header).
    pub data_offset: u64,
    pub compressed_size: u64,
    pub size: u64,
}

/// An `.npy` array inside a STORED member.
#[derive(Clone, Debug)]
pub struct NpyArray {
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Absolute file offset of the array data.
    pub data_offset: u64,
    pub data_len: u64,
}

/// Central directory + the `x` array header.
#[derive(Clone, Debug)]
pub struct NpzLayout {
    pub file_len: u64,
    pub members: Vec<NpzMember>,
    /// The `x.npy` member.
    pub x_member: NpzMember,
    pub x: NpyArray,
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

/// Locate members and parse `x.npy`'s header (metadata reads). Returns the
/// layout and bytes read.
pub fn read_layout(ra: &dyn RandomAccess, path: &str) -> Result<(NpzLayout, u64), BenchError> {
    read_layout_as(ra, path, ReadKind::Metadata)
}

/// [`read_layout`] whose storage reads are of `kind` (dlio-legacy counts
/// numpy's header reads with its data reads).
pub fn read_layout_as(
    ra: &dyn RandomAccess,
    path: &str,
    kind: ReadKind,
) -> Result<(NpzLayout, u64), BenchError> {
    let len = ra.len();
    let (dir, mut read) = find_central_directory(ra, path, kind)?;
    let cd = ra.read_bytes(dir.offset, dir.len as usize, kind)?;
    read += dir.len;
    let entries = parse_central_directory(&cd, &dir, path)?;
    let (out, lread) = locate_members(ra, path, entries, kind)?;
    read += lread;
    let x_member = stored_x_member(&out, path)?;
    let (x, hread) = read_npy_header(ra, path, x_member.data_offset, x_member.size, kind)?;
    read += hread;
    Ok((
        NpzLayout {
            file_len: len,
            members: out,
            x_member,
            x,
        },
        read,
    ))
}

/// The `x.npy` member, which must be STORED (uncompressed).
fn stored_x_member(members: &[NpzMember], path: &str) -> Result<NpzMember, BenchError> {
    let x_member = members
        .iter()
        .find(|m| m.name == "x.npy")
        .cloned()
        .ok_or_else(|| corrupt(path, "no 'x' array in the archive".to_owned()))?;
    if x_member.method != 0 || x_member.compressed_size != x_member.size {
        return Err(corrupt(
            path,
            format!(
                "member x.npy uses compression method {} (only STORED is supported)",
                x_member.method
            ),
        ));
    }
    Ok(x_member)
}

/// Parse the `.npy` header of a STORED member at `offset` of `size` bytes.
fn read_npy_header(
    ra: &dyn RandomAccess,
    path: &str,
    offset: u64,
    size: u64,
    kind: ReadKind,
) -> Result<(NpyArray, u64), BenchError> {
    let bad = |m: String| corrupt(path, format!("x.npy: {m}"));
    if size < 10 {
        return Err(bad("member too short for a .npy header".into()));
    }
    let mut pre = [0u8; 12];
    let pre_len = size.min(12) as usize;
    ra.read_into(&mut pre[..pre_len], offset, kind)?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad("missing \\x93NUMPY magic".into()));
    }
    let (hlen, start) = match pre[6] {
        1 => (u64::from(u16::from_le_bytes([pre[8], pre[9]])), 10u64),
        2 | 3 => (
            u64::from(u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]])),
            12u64,
        ),
        v => return Err(bad(format!("unsupported .npy version {v}"))),
    };
    if hlen > MAX_NPY_HEADER || start + hlen > size {
        return Err(bad(format!("header length {hlen} is absurd")));
    }
    let mut h = vec![0u8; hlen as usize];
    ra.read_into(&mut h, offset + start, kind)?;
    let text = String::from_utf8_lossy(&h);
    let descr = dict_str(&text, "descr").ok_or_else(|| bad("no 'descr' in header".into()))?;
    let fortran_order = text.contains("'fortran_order': True");
    let shape_s = text
        .split("'shape':")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("no 'shape' in header".into()))?;
    let shape = shape_s
        .trim()
        .trim_start_matches('(')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(format!("bad shape entry '{s}'")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let item = descr
        .trim_start_matches(['<', '>', '|', '='])
        .get(1..)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| bad(format!("unsupported descr '{descr}'")))?;
    let data_len = shape
        .iter()
        .try_fold(item, |a, d| a.checked_mul(*d as u64))
        .ok_or_else(|| bad("shape overflows".into()))?;
    let data_offset = offset + start + hlen;
    if data_len != size - start - hlen {
        return Err(bad(format!(
            "shape {shape:?} needs {data_len} B but the member holds {} B",
            size - start - hlen
        )));
    }
    Ok((
        NpyArray {
            descr,
            fortran_order,
            shape,
            data_offset,
            data_len,
        },
        pre_len as u64 + hlen,
    ))
}

fn dict_str(text: &str, key: &str) -> Option<String> {
    let rest = text.split(&format!("'{key}':")).nth(1)?;
    let rest = rest.trim_start().strip_prefix('\'')?;
    Some(rest.split('\'').next()?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_64_aligned_like_numpy() {
        let h = npy_header("|u1", &[3, 4, 1]);
        assert_eq!(h.len() % 64, 0);
        assert!(String::from_utf8_lossy(&h).contains("'shape': (3, 4, 1), }"));
        let y = npy_header("<i8", &[1]);
        assert!(String::from_utf8_lossy(&y).contains("'shape': (1,), }"));
    }

    #[test]
    fn dims_follow_dlio_distribution() {
        assert_eq!(npz_dims(146_600_628.0, 0.0, 1), (12107, 12107));
        let n = 4000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for s in 0..n {
            let (a, b) = npz_dims(146_600_628.0, 68_341_808.0, s);
            for d in [a as f64, b as f64] {
                sum += d;
                sq += d * d;
            }
        }
        let mean = sum / (2 * n) as f64;
        let sd = (sq / (2 * n) as f64 - mean * mean).sqrt();
        assert!((mean - 12107.9).abs() < 150.0, "mean {mean}");
        assert!((sd - 2822.2).abs() < 150.0, "sd {sd}");
    }
}
