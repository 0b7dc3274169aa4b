use super::*;

#[test]
fn dlio_file_names() {
    assert_eq!(
        file_name("img", 2121, 2126, "parquet"),
        "img_2121_of_2126.parquet"
    );
    assert_eq!(
        file_name("img", 7, 2126, "parquet"),
        "img_0007_of_2126.parquet"
    );
    assert_eq!(file_name("img", 0, 4, "npz"), "img_0_of_4.npz");
    assert_eq!(file_name("img", 3, 10, "npz"), "img_03_of_10.npz");
}

#[test]
fn flux_schema_from_config() {
    let cfg = config::load(Some(Workload::Flux), Accelerator::B200, None, &[])
        .unwrap()
        .to_config()
        .unwrap();
    assert_eq!(parquet_schema(&cfg).unwrap(), FluxSchema::flux_b200());
    let cfg = config::load(
        Some(Workload::Flux),
        Accelerator::B200,
        None,
        &[
            "dataset.parquet.columns=[{name: a, dtype: float64, size: 2}, {name: b, dtype: int64}]"
                .to_string(),
        ],
    )
    .unwrap()
    .to_config()
    .unwrap();
    let e = parquet_schema(&cfg).unwrap_err().to_string();
    assert!(e.contains("dataset.parquet.columns[1].dtype"), "{e}");
}

#[test]
fn dlrm_schema_from_config() {
    let cfg = config::load(Some(Workload::Dlrm), Accelerator::B200, None, &[])
        .unwrap()
        .to_config()
        .unwrap();
    let s = parquet_schema(&cfg).unwrap();
    assert_eq!(s.columns.len(), 200);
    assert!(s.columns.iter().all(|c| c.size == 1));
    let count = |e| s.columns.iter().filter(|c| c.elem == e).count();
    assert_eq!(
        [
            count(ElemType::Float16),
            count(ElemType::Float32),
            count(ElemType::Float64),
            count(ElemType::Int8)
        ],
        [50, 56, 49, 45]
    );
    // The columns' own widths add up to DLIO's record_length_bytes.
    assert_eq!(s.row_bytes(), 761);
    assert_eq!(
        (s.columns[2].name.as_str(), s.columns[2].elem),
        ("feature_002", ElemType::Float64)
    );
}
