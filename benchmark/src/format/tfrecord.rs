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
        BenchError::Config(format!(
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
        .ok_or_else(|| BenchError::Config(format!("{path}: TFRecord file size overflows")))?;
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
mod tests {
    use super::*;
    use crate::{format::r#gen::fill_bytes, storage::LocalStorage};

    /// Written by TensorFlow 2.21 `tf.io.TFRecordWriter`: records `b""`,
    /// `b"hello"` and an Example {image: bytes(range(10)), size: 338}.
    const TF_REFERENCE: &str = "000000000000000029039807d8ea82a20500000000000000eab2043e68656c6c6fbb1f1c192b00000000000000861bc34b0a290a170a05696d616765120e0a0c0a0a000102030405060708090a0e0a0473697a6512061a040a02d2022aa3ee13";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn frame(data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        push_header(&mut v, data.len() as u64);
        v.extend_from_slice(data);
        v.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        v
    }

    fn example(payload: &[u8], size: u64) -> Vec<u8> {
        let l = ExampleLayout::new(payload.len() as u64, size).unwrap();
        let mut v = Vec::new();
        l.push_head(&mut v);
        v.extend_from_slice(payload);
        l.push_tail(&mut v);
        assert_eq!(v.len() as u64, l.example);
        v
    }

    /// A file held in memory.
    struct Mem(Vec<u8>);

    impl RandomAccess for Mem {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_into(&self, buf: &mut [u8], offset: u64, _: ReadKind) -> Result<(), BenchError> {
            let s = offset as usize;
            let src = self.0.get(s..s + buf.len()).ok_or_else(|| BenchError::Io {
                path: "mem".into(),
                source: std::io::ErrorKind::UnexpectedEof.into(),
            })?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    // --- a minimal protobuf reader, independent of the encoder above

    fn read_varint(b: &[u8], p: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*p];
            *p += 1;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// `(field number, wire type, bytes or varint value)` of a message.
    fn fields(b: &[u8]) -> Vec<(u64, u64, Vec<u8>, u64)> {
        let mut p = 0;
        let mut out = Vec::new();
        while p < b.len() {
            let key = read_varint(b, &mut p);
            match key & 7 {
                0 => out.push((key >> 3, 0, Vec::new(), read_varint(b, &mut p))),
                2 => {
                    let n = read_varint(b, &mut p) as usize;
                    out.push((key >> 3, 2, b[p..p + n].to_vec(), 0));
                    p += n;
                }
                w => panic!("unexpected wire type {w}"),
            }
        }
        out
    }

    /// Decode an Example into (image bytes, size values).
    fn decode_example(b: &[u8]) -> (Vec<u8>, Vec<u64>) {
        let ex = fields(b);
        assert_eq!(ex.len(), 1);
        assert_eq!((ex[0].0, ex[0].1), (1, 2));
        let (mut image, mut size) = (None, None);
        for (f, w, entry, _) in fields(&ex[0].2) {
            assert_eq!((f, w), (1, 2));
            let e = fields(&entry);
            assert_eq!((e[0].0, e[1].0), (1, 2));
            let feature = fields(&e[1].2);
            assert_eq!(feature.len(), 1);
            match (e[0].2.as_slice(), feature[0].0) {
                (b"image", 1) => {
                    let bl = fields(&feature[0].2);
                    assert_eq!(bl.len(), 1);
                    image = Some(bl[0].2.clone());
                }
                (b"size", 3) => {
                    let il = fields(&feature[0].2);
                    let packed = &il[0].2;
                    let mut p = 0;
                    let mut vals = Vec::new();
                    while p < packed.len() {
                        vals.push(read_varint(packed, &mut p));
                    }
                    size = Some(vals);
                }
                (k, f) => panic!("unexpected feature {k:?} kind {f}"),
            }
        }
        (image.unwrap(), size.unwrap())
    }

    #[test]
    fn masked_crc_matches_tensorflow() {
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
        assert_eq!(masked_crc32c(b""), 0xa282_ead8);
        assert_eq!(masked_crc32c(&5u64.to_le_bytes()), 0x3e04_b2ea);
        assert_eq!(masked_crc32c(b"hello"), 0x191c_1fbb);
        // crc32c_append over pieces equals the one-shot CRC the writer uses.
        let c = crc32c::crc32c_append(crc32c::crc32c(b"hel"), b"lo");
        assert_eq!(mask(c), masked_crc32c(b"hello"));
    }

    #[test]
    fn bytes_match_tensorflow_reference() {
        let payload: Vec<u8> = (0..10).collect();
        let mut ours = frame(b"");
        ours.extend(frame(b"hello"));
        ours.extend(frame(&example(&payload, 338)));
        assert_eq!(ours, hex(TF_REFERENCE));
        let spans = read_index(&Mem(ours.clone()), "ref").unwrap();
        assert_eq!(spans.iter().map(|s| s.len).collect::<Vec<_>>(), [0, 5, 43]);
    }

    #[test]
    fn varints_and_large_examples_decode() {
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, u64::MAX] {
            let mut b = Vec::new();
            push_varint(&mut b, v);
            assert_eq!(b.len() as u64, varint_len(v));
            assert_eq!(read_varint(&b, &mut 0), v);
        }
        // Lengths straddling varint widths (127/128 B, 16 KiB).
        for n in [0usize, 1, 100, 127, 128, 16_383, 16_384, 2_900_000] {
            let mut payload = Vec::new();
            fill_bytes(n as u64, n, &mut payload);
            let (img, size) = decode_example(&example(&payload, 1681));
            assert_eq!(img, payload);
            assert_eq!(size, [1681]);
        }
    }

    #[test]
    fn sizes_follow_dlio() {
        // resnet50: ⌊√114660.07⌋² in every sample, as DLIO writes.
        let s = record_sizes(1251, 114_660.07, 0.0, 3);
        assert_eq!(s.len(), 1251);
        assert!(s.iter().all(|&x| x == 338 * 338));
        assert_eq!(size_feature(114_660.07), 338);
        // cosmoflow: one draw per file, mean ≈ record_length.
        let n = 2000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for seed in 0..n {
            let v = record_sizes(2, 2_828_486.0, 71_311.0, seed);
            assert_eq!(v[0], v[1]);
            assert_eq!(v, record_sizes(2, 2_828_486.0, 71_311.0, seed));
            sum += v[0] as f64;
            sq += (v[0] as f64).powi(2);
        }
        let mean = sum / n as f64;
        let sd = (sq / n as f64 - mean * mean).sqrt();
        assert!((mean - 2_828_486.0).abs() < 5_000.0, "mean {mean}");
        // d1·d2 with each dᵢ ~ N(√L, σ/2/√L): sd ≈ σ/√2.
        assert!((sd - 71_311.0 / 2f64.sqrt()).abs() < 5_000.0, "sd {sd}");
        assert!(record_sizes(1, 0.0, 0.0, 0)[0] >= 1);
        assert!(record_sizes(1, f64::NAN, f64::NAN, 0)[0] >= 1);
    }

    #[test]
    fn round_trip_local() {
        let dir = tempfile::tempdir().unwrap();
        let st = LocalStorage::new(dir.path());
        for (samples, mean, stdev) in [
            (7u64, 5000.0, 0.0),
            (1, 40_000.0, 900.0),
            (0, 10.0, 0.0),
            // 447² = 199,809 B: several fill chunks and a ragged tail.
            (2, 200_000.0, 0.0),
        ] {
            let path = format!("t/f_{samples}.tfrecord");
            let n = write_tfrecord_file(&st, &path, samples, mean, stdev, 11).unwrap();
            let ra = st.open(&path).unwrap();
            assert_eq!(ra.len(), n);
            let spans = read_index(ra.as_ref(), &path).unwrap();
            assert_eq!(spans.len() as u64, samples);
            let sizes = record_sizes(samples, mean, stdev, 11);
            let mut next = 0;
            for (i, (sp, &sz)) in spans.iter().zip(&sizes).enumerate() {
                assert_eq!(sp.offset, next);
                assert_eq!(sp.data_offset, sp.offset + HEADER_LEN);
                let b = ra.read_range(sp.data_offset, sp.len as usize + 4).unwrap();
                verify_record(&path, i, &b).unwrap();
                let (img, size) = decode_example(&b[..sp.len as usize]);
                assert_eq!(img.len() as u64, sz);
                assert_eq!(size, [size_feature(mean)]);
                let mut want = Vec::new();
                fill_bytes(sample_seed(11, i as u64), sz as usize, &mut want);
                assert_eq!(img, want);
                next = sp.data_offset + sp.len + FOOTER_LEN;
            }
            assert_eq!(next, n);
        }
    }

    fn small_file() -> Vec<u8> {
        let mut f = Vec::new();
        for (i, n) in [30usize, 0, 200].into_iter().enumerate() {
            let mut p = Vec::new();
            fill_bytes(i as u64, n, &mut p);
            f.extend(frame(&example(&p, 7)));
        }
        f
    }

    #[test]
    fn truncation_is_an_error_at_every_cut() {
        let f = small_file();
        let spans = read_index(&Mem(f.clone()), "f").unwrap();
        let bounds: Vec<u64> = spans.iter().map(|s| s.offset).collect();
        for cut in 0..f.len() {
            let r = read_index(&Mem(f[..cut].to_vec()), "f");
            if bounds.contains(&(cut as u64)) {
                // A cut between records is a shorter valid file.
                assert_eq!(
                    r.unwrap().len(),
                    bounds.iter().filter(|&&b| b < cut as u64).count()
                );
            } else {
                let e = r.unwrap_err().to_string();
                assert!(e.contains("TFRecord") && e.contains("record "), "{e}");
            }
        }
    }

    #[test]
    fn corrupt_headers_and_data() {
        let f = small_file();
        let spans = read_index(&Mem(f.clone()), "f").unwrap();
        // Flipped byte in record 1's length: length CRC mismatch.
        let mut g = f.clone();
        g[spans[1].offset as usize] ^= 0x01;
        let e = read_index(&Mem(g), "f").unwrap_err().to_string();
        assert!(
            e.contains("record 1 at byte") && e.contains("length CRC"),
            "{e}"
        );
        // Flipped length CRC byte.
        let mut g = f.clone();
        g[spans[2].offset as usize + 9] ^= 0x80;
        let e = read_index(&Mem(g), "f").unwrap_err().to_string();
        assert!(e.contains("record 2") && e.contains("length CRC"), "{e}");
        // Huge lengths with valid CRCs: past the end, no overflow.
        for huge in [u64::MAX, u64::MAX - 12, 1 << 40, f.len() as u64] {
            let mut g = f.clone();
            let o = spans[1].offset as usize;
            let mut h = Vec::new();
            push_header(&mut h, huge);
            g[o..o + 12].copy_from_slice(&h);
            let e = read_index(&Mem(g), "f").unwrap_err().to_string();
            assert!(e.contains("record 1") && e.contains("past the end"), "{e}");
        }
        // Flipped data byte: framing fine, data CRC fails.
        let mut g = f.clone();
        let sp = spans[2];
        g[sp.data_offset as usize + 50] ^= 0x10;
        assert_eq!(read_index(&Mem(g.clone()), "f").unwrap(), spans);
        let rec = &g[sp.data_offset as usize..(sp.data_offset + sp.len + 4) as usize];
        let e = verify_record("f", 2, rec).unwrap_err().to_string();
        assert!(e.contains("record 2") && e.contains("data CRC"), "{e}");
        // Too short to hold a CRC.
        assert!(verify_record("f", 0, &[1, 2, 3]).is_err());
        verify_record("f", 0, &masked_crc32c(b"").to_le_bytes()).unwrap();
    }

    /// A file claiming more records than [`MAX_RECORDS`]: every 16 bytes an
    /// empty record.
    struct Endless;

    impl RandomAccess for Endless {
        fn len(&self) -> u64 {
            16 * (MAX_RECORDS as u64 + 10)
        }
        fn read_into(&self, buf: &mut [u8], _: u64, _: ReadKind) -> Result<(), BenchError> {
            let mut h = Vec::new();
            push_header(&mut h, 0);
            buf.copy_from_slice(&h[..buf.len()]);
            Ok(())
        }
    }

    #[test]
    fn record_count_is_capped() {
        let e = read_index(&Endless, "f").unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
    }
}
