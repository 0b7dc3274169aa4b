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
