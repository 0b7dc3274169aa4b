//! JPEG (retinanet): a writer of real, decodable baseline JPEGs of an exact
//! byte size, and a bounds-checked header parser ([`parse_jpeg`]).
//!
//! ```text
//!  write_jpeg(target, seed) ─► SOI APP0(JFIF) DQT SOF0 DHT      header, 314 B
//!                              COM × n  (random payload)        padding, bulk of the file
//!                              SOS scan EOI                     256×256 gray mosaic, 1,280 B + 0..3
//!  parse_jpeg(bytes) ─► SOI, walk marker segments (lengths checked) ─► SOF0/1/2 ─► SOS
//!                       ─► scan_offset; the file must end with EOI
//! ```
//!
//! Why this layout: the image is a fixed 256×256 grayscale picture whose
//! blocks carry only a random DC value (an 8×8 mosaic), so its entropy-coded
//! scan is tiny and cheap to produce bit by bit. Everything else needed to
//! reach the configured size is random bytes in COM segments, which every
//! decoder skips by their length, so generation runs at `fill_bytes` speed.
//! The padding sits before SOS (decoders stop walking segments at SOS and
//! would treat bytes after the scan as garbage). A consequence for readers:
//! a header-only parser (Pillow's `Image.open`) reads through the padding,
//! so it reads the whole file, not a few hundred bytes.
//!
//! Exact sizes: the scan has a fixed length for every seed (each block is a
//! DC code of fixed category and an EOB, and the bit patterns can never form
//! a 0xFF byte, so no stuffing changes the length). Padding of 4 B or more is
//! split evenly into COM segments (4..=65,537 B each); padding of 1..3 B,
//! too small for a segment, lengthens the scan instead (8 blocks use a DC
//! category one bit longer per extra byte).
use super::r#gen::{fill_bytes, wyrand};
use crate::{
    error::BenchError,
    storage::{RandomAccess, ReadKind, Storage},
};

/// Image width and height in pixels (multiples of 8: whole blocks only).
const WIDTH: u16 = 256;
const HEIGHT: u16 = 256;
/// 8×8 blocks of the one component.
const BLOCKS: usize = (WIDTH as usize / 8) * (HEIGHT as usize / 8);
/// Bits of one block: DC code (3) + DC magnitude bits (3) + AC EOB (4).
const BLOCK_BITS: usize = 3 + 3 + 4;
/// Entropy-coded bytes without lengthened blocks (the block count makes this
/// a whole number of bytes, so no pad bits are needed).
const SCAN_BYTES: usize = BLOCKS * BLOCK_BITS / 8;
const _: () = assert!((BLOCKS * BLOCK_BITS).is_multiple_of(8));

/// SOI + APP0 + DQT + SOF0 + DHT.
const HEADER_BYTES: usize = 2 + 18 + 69 + 13 + 212;
/// SOS marker segment.
const SOS_BYTES: usize = 10;
/// EOI marker.
const EOI_BYTES: usize = 2;

/// Smallest file [`write_jpeg`] produces: headers + scan + EOI, no padding.
pub const MIN_JPEG_BYTES: u64 = (HEADER_BYTES + SOS_BYTES + SCAN_BYTES + EOI_BYTES) as u64;

/// Largest padding segment: marker (2) + length field (2) + 65,533 B payload.
const MAX_SEGMENT: u64 = 2 + 65_535;
/// Smallest padding segment: marker + length field, empty payload.
const MIN_SEGMENT: u64 = 4;
/// Bytes gathered before handing them to `out` (few large writes: the local
/// writer is unbuffered).
const FLUSH_BYTES: usize = 1 << 20;
/// [`read_info`] refuses files larger than this (it reads the whole file).
pub const MAX_JPEG_FILE: u64 = 1 << 30;

/// Quantized DC values stay within ±this, so the mosaic's gray levels stay
/// in range (DC step 16 × 60 / 8 = ±120 around mid-gray).
const DC_BOUND: i32 = 60;

/// Luminance quantization table of ITU T.81 Annex K.1, natural order.
const QUANT_K1: [u8; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, //
    12, 12, 14, 19, 26, 58, 60, 55, //
    14, 13, 16, 24, 40, 57, 69, 56, //
    14, 17, 22, 29, 51, 87, 80, 62, //
    18, 22, 37, 56, 68, 109, 103, 77, //
    24, 35, 55, 64, 81, 104, 113, 92, //
    49, 64, 78, 87, 103, 121, 120, 101, //
    72, 92, 95, 98, 112, 100, 103, 99,
];

/// Natural-order index of the k-th coefficient in zigzag order (DQT stores
/// tables in zigzag order).
const ZIGZAG: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, //
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, //
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, //
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// Luminance DC Huffman table (T.81 Annex K.3): code counts per length 1..16.
const DC_BITS: [u8; 16] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const DC_VALS: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
/// Luminance AC Huffman table (T.81 Annex K.3).
const AC_BITS: [u8; 16] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d];
const AC_VALS: [u8; 162] = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];
/// Codes of the tables above that the scan uses: DC categories 3 and 4
/// (`100`, `101`) and the AC end-of-block (`1010`).
const DC_CODE_CAT3: u32 = 0b100;
const DC_CODE_CAT4: u32 = 0b101;
const AC_EOB: u32 = 0b1010;

const M_SOF0: u8 = 0xC0;
const M_SOF1: u8 = 0xC1;
const M_SOF2: u8 = 0xC2;
const M_DHT: u8 = 0xC4;
const M_SOI: u8 = 0xD8;
const M_EOI: u8 = 0xD9;
const M_SOS: u8 = 0xDA;
const M_DQT: u8 = 0xDB;
const M_APP0: u8 = 0xE0;
const M_COM: u8 = 0xFE;

/// Salts keeping the scan and padding streams of one seed apart.
const SCAN_SALT: u64 = 0x4A50_4547_5343_414E;
const PAD_SALT: u64 = 0x4A50_4547_5041_4444;

fn corrupt(path: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: path.into(),
        format: "JPEG",
        reason: reason.into(),
    }
}

/// Smallest file [`write_jpeg`] can produce (headers + scan + EOI, no padding).
pub fn min_jpeg_size() -> u64 {
    MIN_JPEG_BYTES
}

/// Append a marker segment: `FF code`, big-endian length (2 + payload), payload.
fn push_segment(h: &mut Vec<u8>, code: u8, payload: &[&[u8]]) {
    let n: usize = payload.iter().map(|p| p.len()).sum();
    h.extend_from_slice(&[0xFF, code]);
    // Our own segments are all far below 64 KiB.
    h.extend_from_slice(&((n + 2) as u16).to_be_bytes());
    for p in payload {
        h.extend_from_slice(p);
    }
}

/// SOI, JFIF APP0, DQT, SOF0 and DHT: identical for every file.
fn header() -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES);
    h.extend_from_slice(&[0xFF, M_SOI]);
    // JFIF 1.01, aspect-ratio-only density 1:1, no thumbnail.
    push_segment(&mut h, M_APP0, &[b"JFIF\0", &[1, 1, 0, 0, 1, 0, 1, 0, 0]]);
    let q = ZIGZAG.map(|nat| QUANT_K1[usize::from(nat)]);
    // Pq = 0 (8-bit), Tq = 0.
    push_segment(&mut h, M_DQT, &[&[0x00], &q]);
    let [hh, hl] = HEIGHT.to_be_bytes();
    let [wh, wl] = WIDTH.to_be_bytes();
    // 8-bit, one component (id 1, 1×1 sampling, quant table 0).
    push_segment(&mut h, M_SOF0, &[&[8, hh, hl, wh, wl, 1, 1, 0x11, 0]]);
    // Class 0 (DC) table 0, then class 1 (AC) table 0.
    push_segment(
        &mut h,
        M_DHT,
        &[&[0x00], &DC_BITS, &DC_VALS, &[0x10], &AC_BITS, &AC_VALS],
    );
    h
}

/// MSB-first bit packer for entropy-coded data, with 0xFF stuffing.
struct BitWriter {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl BitWriter {
    /// Append the low `len` (≤ 16) bits of `bits`.
    fn put(&mut self, bits: u32, len: u32) {
        self.acc = (self.acc << len) | (bits & ((1 << len) - 1));
        self.n += len;
        while self.n >= 8 {
            self.n -= 8;
            let b = (self.acc >> self.n) as u8;
            self.out.push(b);
            if b == 0xFF {
                self.out.push(0);
            }
        }
        self.acc &= (1 << self.n) - 1;
    }

    /// Pad the last byte with 1s (T.81 F.1.2.3) and return the bytes.
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            let pad = 8 - self.n;
            self.put((1 << pad) - 1, pad);
        }
        self.out
    }
}

/// The scan of one file: every block a DC difference of category 3 (or 4
/// for the first `long_blocks` blocks) followed by EOB. Category-3/4 blocks
/// are `10c mmm[m] 1010`: at most six 1 bits in a row, so no 0xFF byte and
/// no stuffing, and the length is exactly `(BLOCKS*10 + long_blocks) / 8`.
fn scan(seed: u64, long_blocks: usize) -> Vec<u8> {
    let mut w = BitWriter {
        out: Vec::with_capacity(SCAN_BYTES + long_blocks / 8 + 8),
        acc: 0,
        n: 0,
    };
    let mut s = seed ^ SCAN_SALT;
    let mut pred: i32 = 0;
    for b in 0..BLOCKS {
        let (code, cat) = if b < long_blocks {
            (DC_CODE_CAT4, 4u32)
        } else {
            (DC_CODE_CAT3, 3u32)
        };
        let r = wyrand(&mut s);
        // Magnitude in [2^(cat-1), 2^cat - 1], the range of the category.
        let half = 1i32 << (cat - 1);
        let mag = half + (r as i32 & (half - 1));
        let mut diff = if r & (1 << 32) != 0 { mag } else { -mag };
        // Turn back at the bound: the mosaic stays inside the gray range.
        if (pred + diff).abs() > DC_BOUND {
            diff = -diff;
        }
        pred += diff;
        // Negative differences are sent as diff + 2^cat - 1 (T.81 F.1.2.1).
        let extra = if diff > 0 {
            diff as u32
        } else {
            (diff + (1 << cat) - 1) as u32
        };
        w.put(code, 3);
        w.put(extra, cat);
        w.put(AC_EOB, 4);
    }
    w.finish()
}

/// How a file of `target_bytes` is laid out: (lengthened scan blocks,
/// padding bytes to spread over COM segments, total size).
fn plan(target_bytes: u64) -> (usize, u64, u64) {
    let total = target_bytes.max(MIN_JPEG_BYTES);
    let pad = total - MIN_JPEG_BYTES;
    if pad < MIN_SEGMENT {
        // 1..3 extra bytes: 8 one-bit-longer blocks per byte (24 ≤ BLOCKS).
        (pad as usize * 8, 0, total)
    } else {
        (0, pad, total)
    }
}

/// Write one whole JPEG file of exactly `max(target_bytes, MIN_JPEG_BYTES)`
/// bytes for `seed` to `out`, in a few large pieces (header and padding
/// gathered up to 1 MiB per call). A target below [`MIN_JPEG_BYTES`] yields
/// the minimum file. Returns the bytes written. Deterministic per seed.
pub fn write_jpeg(
    target_bytes: u64,
    seed: u64,
    out: &mut dyn FnMut(&[u8]) -> Result<(), BenchError>,
) -> Result<u64, BenchError> {
    let (long_blocks, pad, total) = plan(target_bytes);
    let mut buf = header();
    buf.reserve(usize::try_from(pad.min(FLUSH_BYTES as u64 + MAX_SEGMENT)).unwrap_or(0));
    let mut written = 0u64;
    let mut flush = |buf: &mut Vec<u8>, out: &mut dyn FnMut(&[u8]) -> Result<(), BenchError>| {
        written = written
            .checked_add(buf.len() as u64)
            .ok_or_else(|| BenchError::TooLarge("JPEG writer: size overflow".into()))?;
        out(buf)?;
        buf.clear();
        Ok::<(), BenchError>(())
    };
    if pad > 0 {
        // Even split into n segments of 4..=65,537 B: with n = ⌈pad/65,537⌉,
        // pad ≥ 4n holds for every pad ≥ 4, so no segment is too small.
        let n = pad.div_ceil(MAX_SEGMENT);
        let (base, extra) = (pad / n, pad % n);
        let mut s = seed ^ PAD_SALT;
        for i in 0..n {
            let seg = if i < extra { base + 1 } else { base };
            // seg ∈ [4, 65,537], so the payload fits the 16-bit length field.
            let payload = usize::try_from(seg - MIN_SEGMENT)
                .map_err(|_| BenchError::TooLarge("JPEG writer: segment size".into()))?;
            buf.extend_from_slice(&[0xFF, M_COM]);
            buf.extend_from_slice(&((payload + 2) as u16).to_be_bytes());
            fill_bytes(wyrand(&mut s), payload, &mut buf);
            if buf.len() >= FLUSH_BYTES {
                flush(&mut buf, out)?;
            }
        }
    }
    let data = scan(seed, long_blocks);
    // Ns = 1: component 1 with tables DC 0 / AC 0; Ss = 0, Se = 63, Ah/Al = 0.
    push_segment(&mut buf, M_SOS, &[&[1, 1, 0x00, 0, 63, 0]]);
    buf.extend_from_slice(&data);
    buf.extend_from_slice(&[0xFF, M_EOI]);
    flush(&mut buf, out)?;
    if written != total {
        return Err(BenchError::Internal(format!(
            "JPEG writer produced {written} bytes instead of {total}"
        )));
    }
    Ok(written)
}

/// Stream one JPEG of `target_bytes` (see [`write_jpeg`]) to `path` through
/// `storage.create`. Returns the bytes written.
pub fn write_jpeg_file(
    storage: &dyn Storage,
    path: &str,
    target_bytes: u64,
    seed: u64,
) -> Result<u64, BenchError> {
    let mut w = storage.create(path)?;
    let n = write_jpeg(target_bytes, seed, &mut |chunk| w.write_all(chunk))?;
    w.finish()?;
    Ok(n)
}

// ---------------------------------------------------------------- parsing

/// Header facts of a JPEG file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JpegInfo {
    pub width: u16,
    pub height: u16,
    pub components: u8,
    /// Offset of the first entropy-coded byte (right after the SOS segment).
    pub scan_offset: u64,
    pub file_len: u64,
}

fn be16(b: &[u8], i: usize) -> Option<u16> {
    let end = i.checked_add(2)?;
    Some(u16::from_be_bytes(b.get(i..end)?.try_into().ok()?))
}

/// Parse the header of a whole in-memory JPEG file. Walks the marker
/// segments from SOI (every length checked against the buffer, fill bytes
/// before markers allowed), requires a SOF0/SOF1/SOF2 frame before the first
/// SOS, and requires the file to end with EOI. The entropy-coded data itself
/// is not decoded. Errors are [`BenchError::Corrupt`] naming the offset.
pub fn parse_jpeg(bytes: &[u8], path: &str) -> Result<JpegInfo, BenchError> {
    let len = bytes.len();
    let bad = |r: String| corrupt(path, r);
    if bytes.get(0..2) != Some(&[0xFF, M_SOI][..]) {
        return Err(bad(format!(
            "missing SOI (FF D8) at offset 0 (file of {len} bytes)"
        )));
    }
    let mut pos = 2usize;
    // (height, width, components) of the frame header.
    let mut frame: Option<(u16, u16, u8)> = None;
    let scan_offset = loop {
        match bytes.get(pos) {
            Some(0xFF) => {}
            Some(b) => {
                return Err(bad(format!(
                    "expected a marker (FF) at offset {pos}, found 0x{b:02X}"
                )));
            }
            None => {
                return Err(bad(format!(
                    "file ends at offset {pos} before any SOS (truncated header)"
                )));
            }
        }
        // Any marker may be preceded by fill bytes 0xFF (T.81 B.1.1.2).
        let mut m = pos;
        while bytes.get(m.saturating_add(1)) == Some(&0xFF) {
            m = m.saturating_add(1);
        }
        // `m` is the FF right before the marker code, m + 1 < len or None.
        let code_at = m.saturating_add(1);
        let Some(&code) = bytes.get(code_at) else {
            return Err(bad(format!(
                "file ends inside the marker at offset {pos} (truncated header)"
            )));
        };
        match code {
            0x00 => {
                return Err(bad(format!(
                    "stuffed byte FF 00 at offset {m} outside entropy-coded data"
                )));
            }
            M_SOI => return Err(bad(format!("second SOI at offset {m}"))),
            M_EOI => return Err(bad(format!("EOI at offset {m} before any SOS (no image)"))),
            0xD0..=0xD7 => {
                return Err(bad(format!(
                    "restart marker FF {code:02X} at offset {m} outside entropy-coded data"
                )));
            }
            // TEM: a marker without a length.
            0x01 => {
                pos = code_at.saturating_add(1);
                continue;
            }
            _ => {}
        }
        let len_at = code_at.saturating_add(1);
        let seg_len = be16(bytes, len_at).ok_or_else(|| {
            bad(format!(
                "file ends inside the length of marker FF {code:02X} at offset {m}"
            ))
        })?;
        if seg_len < 2 {
            return Err(bad(format!(
                "marker FF {code:02X} at offset {m}: segment length {seg_len} is below 2"
            )));
        }
        let seg_end = len_at
            .checked_add(usize::from(seg_len))
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                bad(format!(
                    "marker FF {code:02X} at offset {m}: segment length {seg_len} runs past \
                     the end of the file ({len} bytes)"
                ))
            })?;
        // seg_end ≤ len and len_at + 2 ≤ seg_end, so this slice is in bounds.
        let body = bytes.get(len_at.saturating_add(2)..seg_end).unwrap_or(&[]);
        match code {
            M_SOF0 | M_SOF1 | M_SOF2 => {
                if frame.is_some() {
                    return Err(bad(format!("second frame header (SOF) at offset {m}")));
                }
                frame = Some(parse_sof(body, code, m).map_err(bad)?);
            }
            0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                return Err(bad(format!(
                    "unsupported frame type SOF{} (FF {code:02X}) at offset {m}: only \
                     baseline, extended and progressive Huffman JPEG are supported",
                    code & 0x0F
                )));
            }
            M_SOS => {
                let Some((_, _, nf)) = frame else {
                    return Err(bad(format!(
                        "SOS at offset {m} before any frame header (SOF)"
                    )));
                };
                let ns = body.first().copied().unwrap_or(0);
                if ns == 0 || ns > nf || body.len() != 4 + 2 * usize::from(ns) {
                    return Err(bad(format!(
                        "SOS at offset {m}: {ns} scan components in a segment of {seg_len} \
                         bytes (frame has {nf} components)"
                    )));
                }
                break seg_end;
            }
            _ => {}
        }
        pos = seg_end;
    };
    let Some((height, width, components)) = frame else {
        return Err(bad("no frame header (SOF) before SOS".into()));
    };
    let eoi_at = len.saturating_sub(2);
    if eoi_at <= scan_offset {
        return Err(bad(format!(
            "no entropy-coded data and EOI after the SOS segment ending at offset \
             {scan_offset} (file of {len} bytes)"
        )));
    }
    if bytes.get(eoi_at..) != Some(&[0xFF, M_EOI][..]) {
        let tail = bytes.get(eoi_at..).unwrap_or(&[]);
        return Err(bad(format!(
            "file does not end with EOI (FF D9): bytes at offset {eoi_at} are {tail:02X?} \
             (truncated?)"
        )));
    }
    Ok(JpegInfo {
        width,
        height,
        components,
        scan_offset: scan_offset as u64,
        file_len: len as u64,
    })
}

/// Frame header body: (height, width, components), checked for a size
/// matching its component count and non-zero dimensions.
fn parse_sof(body: &[u8], code: u8, at: usize) -> Result<(u16, u16, u8), String> {
    let what = format!("frame header SOF{} at offset {at}", code & 0x0F);
    let (Some(&precision), Some(height), Some(width), Some(&nf)) =
        (body.first(), be16(body, 1), be16(body, 3), body.get(5))
    else {
        return Err(format!("{what}: segment too short ({} bytes)", body.len()));
    };
    if !(precision == 8 || (precision == 12 && code != M_SOF0)) {
        return Err(format!("{what}: unsupported sample precision {precision}"));
    }
    if nf == 0 || nf > 4 || body.len() != 6 + 3 * usize::from(nf) {
        return Err(format!(
            "{what}: {nf} components in a segment of {} bytes (1..4 components of 3 bytes each)",
            body.len() + 2
        ));
    }
    if width == 0 || height == 0 {
        return Err(format!(
            "{what}: image size {width}×{height} (zero or DNL-defined height unsupported)"
        ));
    }
    Ok((height, width, nf))
}

/// [`parse_jpeg`] of a stored file, read whole as one metadata read (files
/// are a few hundred KB; larger than [`MAX_JPEG_FILE`] is refused).
pub fn read_info(ra: &dyn RandomAccess, path: &str) -> Result<JpegInfo, BenchError> {
    let len = ra.len();
    if len > MAX_JPEG_FILE {
        return Err(corrupt(
            path,
            format!("file of {len} bytes exceeds the {MAX_JPEG_FILE}-byte JPEG limit"),
        ));
    }
    let n = usize::try_from(len)
        .map_err(|_| corrupt(path, format!("file of {len} bytes does not fit in memory")))?;
    let bytes = ra.read_bytes(0, n, ReadKind::Metadata)?;
    parse_jpeg(&bytes, path)
}

#[cfg(test)]
mod tests;
