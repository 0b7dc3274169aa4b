//! Where the objects are and how to reach them: the S3 backend's options
//! (with the AWS environment's fallbacks) and its `s3://` URLs.
use super::*;

/// Options of the S3 backend (documented defaults in [`Default`]). Unset
/// fields fall back to the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`/`AWS_ENDPOINT`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
#[derive(Clone, Debug)]
pub struct S3Options {
    /// Endpoint URL, e.g. `http://127.0.0.1:9000`. Default: env / AWS.
    pub endpoint: Option<String>,
    /// Region. Default: env, else `us-east-1`.
    pub region: Option<String>,
    /// Access key id. Default: env.
    pub access_key_id: Option<String>,
    /// Secret access key. Default: env.
    pub secret_access_key: Option<String>,
    /// Allow plain `http://` endpoints. Default: only for loopback endpoints
    /// (127.0.0.0/8, ::1, localhost), or when `AWS_ALLOW_HTTP=true`.
    pub allow_http: Option<bool>,
    /// Virtual-hosted-style requests (bucket in the host name). Default false
    /// (path style, what S3-compatible servers expect).
    pub virtual_hosted: bool,
    /// Whole-request timeout, body included. Default 600 s: object_store's
    /// 30 s default cuts multi-hundred-MiB GETs from slow servers.
    pub request_timeout: Duration,
    /// Connect timeout. Default 5 s.
    pub connect_timeout: Duration,
    /// Retries of failed requests (5xx, connection errors, bodies cut
    /// short: resumed from where they stopped). Default 4.
    pub max_retries: usize,
    /// Give up retrying after this long. Default 60 s.
    pub retry_timeout: Duration,
    /// Reads larger than this are split into parts of this size. Default
    /// 64 MiB: a 99 MiB flux row group is two GETs in parallel. Measured on
    /// loopback s3rver (scripts/bench-s3.sh): 64 MiB × 4 reach 114 % of
    /// curl's best ranged GETs, 128 MiB × 4 102 %. moto copies the whole
    /// object for every GET, so there fewer GETs win (256 MiB × 1: 44 % of
    /// curl; the footer GET alone costs one copy).
    pub part_size: usize,
    /// Part GETs in flight per storage read. Default 4.
    pub parallel_gets: usize,
    /// Advise transparent huge pages (`MADV_HUGEPAGE`) on the read buffers.
    /// Default false: the buffers are reserved and faulted in before the
    /// run, so huge pages could only save TLB misses in the body copies,
    /// and on loopback s3rver they did not (scripts/bench-s3.sh, first
    /// epoch: 990 MiB/s with them, 1,036 without), while faulting in 2 MiB
    /// pages zeroes each whole and needs contiguous memory.
    pub huge_pages: bool,
}

impl Default for S3Options {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: None,
            virtual_hosted: false,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_retries: 4,
            retry_timeout: Duration::from_secs(60),
            part_size: 64 << 20,
            parallel_gets: 4,
            huge_pages: false,
        }
    }
}

/// A parsed `s3://BUCKET[/PREFIX]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    /// Key prefix without leading/trailing slashes ("" for the bucket root).
    pub prefix: String,
}

impl S3Url {
    /// Parse `s3://BUCKET[/PREFIX]`; `None` if `url` is not an s3 URL.
    pub fn parse(url: &str) -> Option<Result<Self, BenchError>> {
        let rest = url.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(BenchError::usage(
                "--data-dir",
                format!("{url}: an S3 data dir needs a bucket: s3://BUCKET/PREFIX"),
            )));
        }
        Some(Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        }))
    }

    /// `s3://bucket/prefix` (no trailing slash).
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Whether `endpoint`'s host is a loopback address.
pub fn is_loopback_endpoint(endpoint: &str) -> bool {
    let rest = endpoint
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(endpoint);
    let authority = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
