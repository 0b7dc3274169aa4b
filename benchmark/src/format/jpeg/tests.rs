use super::*;

fn make(target: u64, seed: u64) -> Vec<u8> {
    let mut v = Vec::new();
    let n = write_jpeg(target, seed, &mut |c| {
        v.extend_from_slice(c);
        Ok(())
    })
    .unwrap();
    assert_eq!(n, v.len() as u64);
    v
}

fn assert_corrupt(bytes: &[u8], what: &str) -> String {
    match parse_jpeg(bytes, "t.jpg") {
        Err(BenchError::Corrupt { format, reason, .. }) => {
            assert_eq!(format, "JPEG");
            reason
        }
        other => panic!("{what}: expected a Corrupt error, got {other:?}"),
    }
}

#[test]
fn header_constants_match() {
    assert_eq!(header().len(), HEADER_BYTES);
    assert_eq!(scan(1, 0).len(), SCAN_BYTES);
    for extra in 1..=3 {
        assert_eq!(scan(9, extra * 8).len(), SCAN_BYTES + extra);
    }
    assert_eq!(min_jpeg_size(), MIN_JPEG_BYTES);
    assert_eq!(MIN_JPEG_BYTES, 1606);
}

#[test]
fn scan_never_needs_stuffing() {
    for seed in 0..200 {
        for long in [0, 8, 16, 24] {
            let s = scan(seed, long);
            assert!(!s.contains(&0xFF), "seed {seed}");
        }
    }
}

#[test]
fn exact_sizes_and_parse() {
    let min = MIN_JPEG_BYTES;
    let mut targets: Vec<u64> = (0..=8).map(|d| min + d).collect();
    targets.extend([
        0,
        1,
        min - 1,
        65_536,
        65_537,
        65_539,
        min + MAX_SEGMENT,
        min + MAX_SEGMENT + 1,
        min + 2 * MAX_SEGMENT,
        322_957,
        1_000_003,
        2_000_000,
    ]);
    for t in targets {
        let f = make(t, t ^ 77);
        assert_eq!(f.len() as u64, t.max(min), "target {t}");
        let info = parse_jpeg(&f, "t.jpg").unwrap();
        assert_eq!(
            info,
            JpegInfo {
                width: 256,
                height: 256,
                components: 1,
                scan_offset: info.scan_offset,
                file_len: f.len() as u64,
            }
        );
        let scan_len = info.file_len - 2 - info.scan_offset;
        // Padding of 1..3 B lengthens the scan; more goes to COM segments.
        let pad = t.saturating_sub(min);
        let extra = if pad < MIN_SEGMENT { pad } else { 0 };
        assert_eq!(scan_len, SCAN_BYTES as u64 + extra, "target {t}");
    }
}

#[test]
fn deterministic_per_seed() {
    assert_eq!(make(322_957, 5), make(322_957, 5));
    assert_ne!(make(322_957, 5), make(322_957, 6));
    // The scan (the picture) differs too, not only the padding.
    assert_ne!(scan(5, 0), scan(6, 0));
}

#[test]
fn corrupt_inputs_are_errors() {
    let f = make(100_000, 3);
    let info = parse_jpeg(&f, "t.jpg").unwrap();
    assert!(assert_corrupt(&[], "empty").contains("SOI"));
    for cut in (1..200).chain([
        HEADER_BYTES,
        HEADER_BYTES + 3,
        HEADER_BYTES + 70_000,
        info.scan_offset as usize - 1,
        info.scan_offset as usize,
        info.scan_offset as usize + 1,
        f.len() - 2,
        f.len() - 1,
    ]) {
        assert_corrupt(&f[..cut], &format!("prefix {cut}"));
    }
    // Missing SOI.
    assert!(assert_corrupt(&f[2..], "no SOI").contains("SOI"));
    let mut g = f.clone();
    g[1] = 0xD9;
    assert_corrupt(&g, "bad SOI");
    // Missing EOI.
    let mut g = f.clone();
    let n = g.len();
    g[n - 1] = 0x00;
    assert!(assert_corrupt(&g, "no EOI").contains("EOI"));
    // Segment length past the end: the APP0 length at offset 4.
    let mut g = f.clone();
    g[4..6].copy_from_slice(&0xFFF0u16.to_be_bytes());
    let short = &g[..20_000];
    assert!(assert_corrupt(short, "long segment").contains("past"));
    // Zero / one segment length.
    for l in [0u16, 1] {
        let mut g = f.clone();
        g[4..6].copy_from_slice(&l.to_be_bytes());
        assert!(assert_corrupt(&g, "tiny length").contains("below 2"));
    }
    // SOS before SOF: move the SOS segment right after SOI.
    let sos_at = info.scan_offset as usize - SOS_BYTES;
    assert_eq!(f[sos_at..sos_at + 2], [0xFF, M_SOS]);
    let mut g = f[..2].to_vec();
    g.extend_from_slice(&f[sos_at..]);
    assert!(assert_corrupt(&g, "SOS first").contains("before any frame"));
    // No marker where one is expected.
    let mut g = f.clone();
    g[2] = 0x12;
    assert!(assert_corrupt(&g, "no marker").contains("offset 2"));
    // Unsupported frame type (SOF3, lossless).
    let sof_at = 2 + 18 + 69;
    assert_eq!(f[sof_at..sof_at + 2], [0xFF, M_SOF0]);
    let mut g = f.clone();
    g[sof_at + 1] = 0xC3;
    assert!(assert_corrupt(&g, "SOF3").contains("unsupported"));
}

#[test]
fn fill_bytes_before_markers_are_accepted() {
    let f = make(5_000, 1);
    let mut g = f[..2].to_vec();
    g.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
    g.extend_from_slice(&f[2..]);
    let info = parse_jpeg(&g, "t.jpg").unwrap();
    assert_eq!(
        info.scan_offset,
        parse_jpeg(&f, "t.jpg").unwrap().scan_offset + 3
    );
}

#[test]
fn header_byte_flips_never_panic() {
    let f = make(20_000, 11);
    let info = parse_jpeg(&f, "t.jpg").unwrap();
    let sos_at = info.scan_offset as usize - SOS_BYTES;
    // The fixed header, the first padding segment's header, and SOS.
    let spots: Vec<usize> = (0..HEADER_BYTES + 4)
        .chain(sos_at..info.scan_offset as usize)
        .collect();
    let mut s = 0x5EED_u64;
    let mut errors = 0;
    for _ in 0..600 {
        let mut g = f.clone();
        for _ in 0..=(wyrand(&mut s) % 3) {
            let at = spots[(wyrand(&mut s) % spots.len() as u64) as usize];
            g[at] ^= (wyrand(&mut s) % 255 + 1) as u8;
        }
        match parse_jpeg(&g, "t.jpg") {
            Ok(i) => assert_eq!(i.file_len, g.len() as u64),
            Err(BenchError::Corrupt { .. }) => errors += 1,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    // Table contents may flip harmlessly; markers and lengths do not.
    assert!(errors > 100, "{errors} errors");
}

#[test]
fn write_file_and_read_info() {
    let dir = tempfile::tempdir().unwrap();
    let storage = crate::storage::LocalStorage::new(dir.path());
    let n = write_jpeg_file(&storage, "sub/img_1.jpg", 322_957, 42).unwrap();
    assert_eq!(n, 322_957);
    let ra = storage.open("sub/img_1.jpg").unwrap();
    assert_eq!(ra.len(), 322_957);
    let info = read_info(ra.as_ref(), "sub/img_1.jpg").unwrap();
    assert_eq!((info.width, info.height, info.components), (256, 256, 1));
    assert_eq!(info.file_len, 322_957);
    let on_disk = std::fs::read(dir.path().join("sub/img_1.jpg")).unwrap();
    assert_eq!(on_disk, make(322_957, 42));
}
