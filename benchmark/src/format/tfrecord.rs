//! TFRecord (resnet50, cosmoflow): a writer producing what DLIO's
//! `TFRecordGenerator` writes with `tf.io.TFRecordWriter`, and a
//! bounds-checked parser of the record framing ([`read_index`]).
//!
//! ```text
//!  file   = record*                      (no file header, no footer)
//!  record = u64 len (LE) │ u32 masked_crc32c(len bytes) │ data[len] │ u32 masked_crc32c(data)
//!  data   = serialized tf.train.Example {
//!             features.feature["image"] = BytesList([payload])   (random bytes)
//!             features.feature["size"]  = Int64List([⌊√record_length⌋])
//!           }
//! ```
//!
//! Data flow: datagen ─► [`write_tfrecord_file`] builds one record buffer
//! (header, Example head, payload, Example tail, CRC) and, per sample,
//! refills the payload in place with wyrand, updates the data CRC
//! (hardware CRC32C) and streams the buffer through `Storage::create`;
//! readers ─►
//! [`read_index`] walks the 12-byte headers (metadata reads) to get each
//! record's byte range, then read `data + crc` and may [`verify_record`].
//!
//! Sizes follow DLIO (dlio_benchmark `data_generator/tf_generator.py` and
//! `get_dimension`): one `(dim1, dim2)` pair per *file*, drawn from
//! Normal(√L, stdev/2/√L) (or ⌊√L⌋ without stdev), and every sample of the
//! file is a `dim1 × dim2` byte image; the `size` feature is the constant
//! ⌊√L⌋ (DLIO's `args.dimension`). So resnet50's record_length 114,660.07
//! gives 338 × 338 = 114,244-byte images, as DLIO writes them.
use super::{r#gen::wyrand, npz::npz_dims};
use crate::{
    error::BenchError,
    storage::{RandomAccess, ReadKind, Storage},
};

/// Bytes of a record header: u64 length + u32 masked CRC of the length.
pub const HEADER_LEN: u64 = 12;
/// Bytes of a record trailer: u32 masked CRC of the data.
pub const FOOTER_LEN: u64 = 4;
/// [`read_index`] rejects files with more records than this, so a corrupt
/// or hostile file cannot make it allocate without bound (DLIO files hold
/// 1251 records at most; 4 Mi spans are 96 MiB).
pub const MAX_RECORDS: usize = 1 << 22;

/// TFRecord's CRC mask constant (from the TFRecord format definition).
const MASK_DELTA: u32 = 0xa282_ead8;

fn corrupt(path: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: path.into(),
        format: "TFRecord",
        reason: reason.into(),
    }
}

/// Mask a CRC32C as TFRecord stores it: rotate right by 15 and add a
/// constant (so CRCs of data that itself holds CRCs stay well distributed).
#[inline]
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Masked CRC32C as TFRecord stores it (hardware CRC32C via the `crc32c`
/// crate).
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c::crc32c(data))
}

/// The image size of every sample of one file: DLIO draws one
/// `(dim1, dim2)` pair per file (the same distribution [`npz_dims`]
/// implements) and writes `dim1 × dim2` bytes for each sample.
fn file_record_size(mean: f64, stdev: f64, seed: u64) -> u64 {
    let (d1, d2) = npz_dims(mean, stdev, seed);
    (d1 as u64).saturating_mul(d2 as u64).max(1)
}

/// DLIO's `size` feature: `int(sqrt(record_length))`, the same for every
/// sample and file.
fn size_feature(mean: f64) -> u64 {
    (mean.max(1.0).sqrt() as u64).max(1)
}

/// Sample payload sizes for a file (deterministic per seed): `samples`
/// copies of the file's `dim1 × dim2` (see the module doc: DLIO varies the
/// size per file, not per sample).
pub fn record_sizes(samples: u64, mean: f64, stdev: f64, seed: u64) -> Vec<u64> {
    let size = file_record_size(mean, stdev, seed);
    (0..samples).map(|_| size).collect()
}

// ------------------------------------------------------ Example encoding

/// Bytes of `v` as a protobuf varint.
fn varint_len(v: u64) -> u64 {
    // 7 payload bits per byte; 0 still takes one byte.
    u64::from((64 - v.leading_zeros()).max(1).div_ceil(7))
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Size of a length-delimited field with a one-byte tag and `n` content bytes.
fn ld(n: u64) -> Option<u64> {
    n.checked_add(1 + varint_len(n))
}

/// Nested message sizes of one Example; every field number here is < 16,
/// so every tag is one byte.
struct ExampleLayout {
    payload: u64,
    size_value: u64,
    /// BytesList { value: [payload] }
    bytes_list: u64,
    /// Feature { bytes_list: .. }
    image_feature: u64,
    /// map entry { key: "image", value: Feature }
    image_entry: u64,
    /// Int64List { value: [size] } (packed)
    int64_list: u64,
    /// Feature { int64_list: .. }
    size_feature: u64,
    /// map entry { key: "size", value: Feature }
    size_entry: u64,
    /// Features { feature: {image, size} }
    features: u64,
    /// Example { features: .. }: the record's data length.
    example: u64,
}

const KEY_IMAGE: &[u8] = b"image";
const KEY_SIZE: &[u8] = b"size";
/// Tag of field 1 / 2 / 3, wire type 2 (length-delimited).
const TAG1: u8 = 0x0a;
const TAG2: u8 = 0x12;
const TAG3: u8 = 0x1a;

impl ExampleLayout {
    fn new(payload: u64, size_value: u64) -> Option<Self> {
        let bytes_list = ld(payload)?;
        let image_feature = ld(bytes_list)?;
        let image_entry = ld(KEY_IMAGE.len() as u64)?.checked_add(ld(image_feature)?)?;
        let int64_list = ld(varint_len(size_value))?;
        let size_feature = ld(int64_list)?;
        let size_entry = ld(KEY_SIZE.len() as u64)?.checked_add(ld(size_feature)?)?;
        let features = ld(image_entry)?.checked_add(ld(size_entry)?)?;
        let example = ld(features)?;
        Some(Self {
            payload,
            size_value,
            bytes_list,
            image_feature,
            image_entry,
            int64_list,
            size_feature,
            size_entry,
            features,
            example,
        })
    }

    /// Everything of the Example before the image bytes. Map entries go in
    /// key order, as protobuf's serializer emits them for this map.
    fn push_head(&self, out: &mut Vec<u8>) {
        out.push(TAG1); // Example.features
        push_varint(out, self.features);
        out.push(TAG1); // Features.feature (map entry)
        push_varint(out, self.image_entry);
        out.push(TAG1); // entry.key
        push_varint(out, KEY_IMAGE.len() as u64);
        out.extend_from_slice(KEY_IMAGE);
        out.push(TAG2); // entry.value
        push_varint(out, self.image_feature);
        out.push(TAG1); // Feature.bytes_list
        push_varint(out, self.bytes_list);
        out.push(TAG1); // BytesList.value
        push_varint(out, self.payload);
    }

    /// Everything of the Example after the image bytes: the `size` entry.
    fn push_tail(&self, out: &mut Vec<u8>) {
        out.push(TAG1); // Features.feature (map entry)
        push_varint(out, self.size_entry);
        out.push(TAG1); // entry.key
        push_varint(out, KEY_SIZE.len() as u64);
        out.extend_from_slice(KEY_SIZE);
        out.push(TAG2); // entry.value
        push_varint(out, self.size_feature);
        out.push(TAG3); // Feature.int64_list
        push_varint(out, self.int64_list);
        out.push(TAG1); // Int64List.value, packed
        push_varint(out, varint_len(self.size_value));
        push_varint(out, self.size_value);
    }
}

/// Append a record header for `len` data bytes.
fn push_header(out: &mut Vec<u8>, len: u64) {
    let l = len.to_le_bytes();
    out.extend_from_slice(&l);
    out.extend_from_slice(&masked_crc32c(&l).to_le_bytes());
}

/// Payload bytes filled and checksummed per step (a multiple of 8, so the
/// wyrand stream runs on across chunks as in one
/// [`fill_bytes`](super::r#gen::fill_bytes) call).
const FILL_CHUNK: usize = 64 << 10;

/// Overwrite `dst` with the next bytes of wyrand stream `state`: the bytes
/// [`fill_bytes`](super::r#gen::fill_bytes) appends, without its zero-fill
/// (`dst` is reused).
fn fill_in_place(state: &mut u64, dst: &mut [u8]) {
    let mut chunks = dst.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&wyrand(state).to_le_bytes());
    }
    let rem = chunks.into_remainder();
    if !rem.is_empty() {
        let last = wyrand(state).to_le_bytes();
        let k = rem.len();
        rem.copy_from_slice(&last[..k]);
    }
}

/// Stream seed of sample `i`'s payload, so any sample can be recomputed.
fn sample_seed(seed: u64, i: u64) -> u64 {
    let mut s = seed ^ 0x7F4A_7C15_0000_0000 ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    wyrand(&mut s)
}

/// Write a TFRecord file of `samples` `tf.train.Example` records through
/// `storage.create(path)`, one record at a time in one reused buffer (never
/// the whole file); returns total bytes written.
pub fn write_tfrecord_file(
    storage: &dyn Storage,
    path: &str,
    samples: u64,
    mean: f64,
    stdev: f64,
    seed: u64,
) -> Result<u64, BenchError> {
    let payload = file_record_size(mean, stdev, seed);
    let too_big = || {
        BenchError::TooLarge(format!(
            "{path}: TFRecord sample of {payload} B is too large"
        ))
    };
    let layout = ExampleLayout::new(payload, size_feature(mean)).ok_or_else(too_big)?;
    let payload_usize = usize::try_from(payload).map_err(|_| too_big())?;
    let record_len = layout
        .example
        .checked_add(HEADER_LEN + FOOTER_LEN)
        .ok_or_else(too_big)?;
    let total = record_len
        .checked_mul(samples)
        .ok_or_else(|| BenchError::TooLarge(format!("{path}: TFRecord file size overflows")))?;
    let cap = usize::try_from(record_len).map_err(|_| too_big())?;

    // Every record of a file has the same size (see the module doc), so
    // the header and the Example's head and tail are built once; per record
    // only the payload and the data CRC are rewritten in place.
    let mut buf = Vec::with_capacity(cap);
    push_header(&mut buf, layout.example);
    let data_start = buf.len();
    layout.push_head(&mut buf);
    let payload_start = buf.len();
    buf.resize(payload_start + payload_usize, 0);
    let payload_end = buf.len();
    layout.push_tail(&mut buf);
    let crc_at = buf.len();
    buf.extend_from_slice(&[0; FOOTER_LEN as usize]);
    debug_assert_eq!(buf.len() as u64, record_len);
    let head_crc = crc32c::crc32c(&buf[data_start..payload_start]);

    let mut w = storage.create(path)?;
    for i in 0..samples {
        let mut state = sample_seed(seed, i);
        let mut crc = head_crc;
        // Fill and checksum chunk by chunk while the chunk is still in cache
        // (one cosmoflow sample is larger than L2).
        for chunk in buf[payload_start..payload_end].chunks_mut(FILL_CHUNK) {
            fill_in_place(&mut state, chunk);
            crc = crc32c::crc32c_append(crc, chunk);
        }
        crc = crc32c::crc32c_append(crc, &buf[payload_end..crc_at]);
        buf[crc_at..].copy_from_slice(&mask(crc).to_le_bytes());
        w.write_all(&buf)?;
    }
    w.finish()?;
    Ok(total)
}

// ---------------------------------------------------------------- parsing

/// One record's place in the file: `offset` of its 12-byte header,
/// `data_offset`, `len` of the data (the data CRC follows at
/// `data_offset + len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    pub offset: u64,
    pub data_offset: u64,
    pub len: u64,
}

/// Walk the framing of a whole file: reads the 12-byte headers only
/// (metadata reads), checks each length CRC and that every record, with its
/// data CRC, lies inside the file. An empty file holds no records.
pub fn read_index(ra: &dyn RandomAccess, path: &str) -> Result<Vec<RecordSpan>, BenchError> {
    let file_len = ra.len();
    let mut spans = Vec::new();
    let mut pos = 0u64;
    while pos < file_len {
        let i = spans.len();
        if i >= MAX_RECORDS {
            return Err(corrupt(
                path,
                format!("more than {MAX_RECORDS} records (record {i} at byte {pos})"),
            ));
        }
        let remain = file_len - pos;
        if remain < HEADER_LEN {
            return Err(corrupt(
                path,
                format!(
                    "record {i} at byte {pos}: {remain} trailing bytes, too short for a {HEADER_LEN}-byte header"
                ),
            ));
        }
        let mut h = [0u8; HEADER_LEN as usize];
        ra.read_into(&mut h, pos, ReadKind::Metadata)?;
        let (len_bytes, crc_bytes) = h.split_at(8);
        let mut l = [0u8; 8];
        l.copy_from_slice(len_bytes);
        let mut c = [0u8; 4];
        c.copy_from_slice(crc_bytes);
        let (len, stored) = (u64::from_le_bytes(l), u32::from_le_bytes(c));
        let computed = masked_crc32c(len_bytes);
        if stored != computed {
            return Err(corrupt(
                path,
                format!(
                    "record {i} at byte {pos}: length CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
                ),
            ));
        }
        let data_offset = pos + HEADER_LEN; // ≤ file_len, checked above
        let end = data_offset
            .checked_add(len)
            .and_then(|e| e.checked_add(FOOTER_LEN))
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                corrupt(
                    path,
                    format!(
                        "record {i} at byte {pos}: {len} data bytes and CRC run past the end of the file ({file_len} B)"
                    ),
                )
            })?;
        spans.push(RecordSpan {
            offset: pos,
            data_offset,
            len,
        });
        pos = end;
    }
    Ok(spans)
}

/// Check one record's data CRC given its bytes (data followed by the 4-byte
/// masked CRC); `index` names the record in the error.
pub fn verify_record(path: &str, index: usize, data_and_crc: &[u8]) -> Result<(), BenchError> {
    let n = data_and_crc.len();
    let Some(split) = n.checked_sub(FOOTER_LEN as usize) else {
        return Err(corrupt(
            path,
            format!("record {index}: {n} bytes, too short to hold its {FOOTER_LEN}-byte data CRC"),
        ));
    };
    let (data, crc) = data_and_crc.split_at(split);
    let mut c = [0u8; 4];
    c.copy_from_slice(crc);
    let stored = u32::from_le_bytes(c);
    let computed = masked_crc32c(data);
    if stored != computed {
        return Err(corrupt(
            path,
            format!(
                "record {index}: data CRC mismatch over {split} bytes (stored {stored:#010x}, computed {computed:#010x})"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
