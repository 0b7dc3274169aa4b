use super::*;

#[test]
fn parses_urls_and_keys() {
    let u = S3Url::parse("s3://b/p/q/").unwrap().unwrap();
    assert_eq!(
        u,
        S3Url {
            bucket: "b".into(),
            prefix: "p/q".into()
        }
    );
    assert_eq!(u.url(), "s3://b/p/q");
    assert!(S3Url::parse("/data").is_none());
    assert!(S3Url::parse("s3:///x").unwrap().is_err());
    let root = S3Url::parse("s3://b").unwrap().unwrap();
    assert_eq!(root.prefix, "");
    let st = S3Storage::new(
        u,
        &S3Options {
            endpoint: Some("http://127.0.0.1:1".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        st.key("s3://b/p/q/flux/train/a.parquet"),
        "p/q/flux/train/a.parquet"
    );
    assert_eq!(st.key("./flux/train"), "p/q/flux/train");
    assert_eq!(st.key(""), "p/q");
}

fn memory_storage(part_size: usize, parallel_gets: usize) -> S3Storage {
    let url = S3Url::parse("s3://mem/ds").unwrap().unwrap();
    let opts = S3Options {
        part_size,
        parallel_gets,
        ..Default::default()
    };
    S3Storage::in_memory(url, &opts).unwrap()
}

/// 3 MiB + 5 bytes of a recognisable pattern.
fn pattern() -> Vec<u8> {
    (0..(3 << 20) + 5).map(|i: usize| (i % 251) as u8).collect()
}

#[test]
fn in_memory_round_trip_lists_and_counts_requests() {
    let st = memory_storage(1 << 20, 2);
    let data = pattern();
    st.put("train/a.bin", &data).unwrap();
    let mut w = st.create("train/b.bin").unwrap();
    w.write_all(&data[..10]).unwrap();
    w.write_all(&data[10..]).unwrap();
    w.finish().unwrap();
    assert!(st.is_remote());
    assert_eq!(st.list("train").unwrap(), ["a.bin", "b.bin"]);
    assert!(st.exists("train").unwrap(), "a prefix with objects exists");
    assert!(!st.exists("valid").unwrap());

    let before = st.request_counts().unwrap();
    let ra = st.open("s3://mem/ds/train/b.bin").unwrap();
    assert_eq!(ra.len(), data.len() as u64);
    // Metadata: one small GET, counted apart from data.
    let tail = ra.read_bytes(ra.len() - 8, 8, ReadKind::Metadata).unwrap();
    assert_eq!(&tail[..], &data[data.len() - 8..]);
    // Data: a 3 MiB read split into 1 MiB part GETs, pooled buffer.
    let body = ra.read_range(2, data.len() - 3).unwrap();
    assert_eq!(&body[..], &data[2..data.len() - 1]);
    let mut small = [0u8; 16];
    ra.read_exact_at(&mut small, 100).unwrap();
    assert_eq!(small, data[100..116]);

    let c = st.request_counts().unwrap().since(&before);
    assert_eq!(c.head_requests, 0, "sizes come from the listing");
    assert_eq!(c.metadata_get_requests, 1);
    assert_eq!(c.metadata_get_bytes, 8);
    assert_eq!(c.data_reads, 2);
    assert_eq!(c.data_get_requests, 4 + 1);
    assert_eq!(c.data_get_bytes, (data.len() - 3 + 16) as u64);
    assert_eq!(c.get_requests, 1 + 4 + 1);
}

#[test]
fn reserved_buffers_receive_the_bodies_without_a_second_buffer() {
    let st = memory_storage(1 << 20, 2);
    let data = pattern();
    st.put("a.bin", &data).unwrap();
    st.put("b.bin", &data).unwrap();
    // Two reads in flight of up to the whole object: two buffers.
    assert_eq!(st.reserve_read_buffers(2, data.len() as u64).unwrap(), 2);
    // Tiny fetches are not pooled: nothing to reserve.
    assert_eq!(st.reserve_read_buffers(4, 4096).unwrap(), 0);
    let pooled: Vec<usize> = {
        let (x, y) = (
            st.pool.take(data.len()).unwrap(),
            st.pool.take(data.len()).unwrap(),
        );
        vec![x.base_addr(), y.base_addr()]
    };
    let before = st.read_buffer_stats().unwrap();
    let (a, b) = (st.open("a.bin").unwrap(), st.open("b.bin").unwrap());
    for _epoch in 0..2 {
        let ba = a.read_range(0, data.len()).unwrap();
        let bb = b.read_range(1, data.len() - 1).unwrap();
        assert_eq!(&ba[..], &data[..]);
        assert_eq!(&bb[..], &data[1..]);
        // Each body lies at the start of a reserved buffer: the part
        // GETs wrote it there, nothing was assembled elsewhere.
        for got in [&ba, &bb] {
            assert!(
                pooled.contains(&(got.as_ptr() as usize)),
                "not in a pooled buffer"
            );
        }
        assert_ne!(ba.as_ptr(), bb.as_ptr());
    }
    let s = st.read_buffer_stats().unwrap();
    assert_eq!(
        s.mapped_buffers, before.mapped_buffers,
        "no read mapped a buffer: {s:?}"
    );
    assert_eq!(s.reused_buffers - before.reused_buffers, 4);
    assert_eq!(s.reserved_buffers, 2);
}

#[test]
fn in_memory_errors_name_the_object() {
    let st = memory_storage(1 << 20, 4);
    st.put("x.bin", b"0123456789").unwrap();
    let ra = st.open("x.bin").unwrap();
    let e = ra.read_range(5, 6).unwrap_err().to_string();
    assert!(
        e.contains("s3://mem/ds/x.bin") && e.contains("short read"),
        "{e}"
    );
    let e = st.open("missing.bin").err().unwrap().to_string();
    assert!(e.contains("s3://mem/ds/missing.bin"), "{e}");
    // x.bin's size is known from its PUT; the missing object costs a HEAD.
    assert_eq!(st.request_counts().unwrap().head_requests, 1);
}

#[test]
fn loopback_endpoints() {
    for e in [
        "http://127.0.0.1:9000",
        "http://localhost:1/x",
        "http://[::1]:80",
        "127.0.0.2",
    ] {
        assert!(is_loopback_endpoint(e), "{e}");
    }
    for e in [
        "http://10.0.0.1:9000",
        "https://s3.amazonaws.com",
        "http://example.com",
    ] {
        assert!(!is_loopback_endpoint(e), "{e}");
    }
}
