//! Maps read a batch of entries per system call (`BPF_MAP_LOOKUP_BATCH`,
//! Linux 5.6), where aya 0.14 reads a hash map with two calls per entry
//! and an array with one per index.
//!
//! Data flow: the per-second snapshot reads every thread's accumulator and
//! syscall counts, hundreds of calls a tick on a PyTorch job; here a map
//! comes back in a few calls. A kernel (or map type) without batches
//! answers an error, and the caller reads the map entry by entry as
//! before, so nothing depends on batches being there.
use std::{
    io,
    mem::MaybeUninit,
    os::fd::{AsFd, AsRawFd},
};

use aya::{
    Pod,
    maps::{Map, MapData},
};

use super::{ProbeError, ProbeSet};

/// `BPF_MAP_LOOKUP_BATCH` in the kernel's `enum bpf_cmd`.
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
/// `BPF_MAP_UPDATE_BATCH` in the kernel's `enum bpf_cmd`.
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

/// Entries asked for per call at first; a hash bucket holding more makes
/// the kernel answer `ENOSPC`, and it is asked again with twice the room.
const FIRST_BATCH: usize = 256;
/// Room beyond which a bucket is not chased (the caller falls back).
const MAX_BATCH: usize = 1 << 16;

/// The `batch` member of the kernel's `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// The data behind a hash or array map (None for other types).
fn map_data(map: &Map) -> Option<&MapData> {
    match map {
        Map::HashMap(data) | Map::LruHashMap(data) | Map::Array(data) => Some(data),
        _ => None,
    }
}

/// What one batch call brought.
struct Batch {
    /// Entries written to the front of the buffers.
    count: usize,
    /// Where the next call starts (the kernel's opaque position: a hash
    /// bucket, an array's last index).
    next: u64,
    /// No entries are left after these.
    done: bool,
}

/// One `BPF_MAP_LOOKUP_BATCH` call on `map` from position `from` (None:
/// the start) into `keys` and `values` (as many entries as `keys` holds).
fn lookup_batch<K: Pod, V: Pod>(
    map: &MapData,
    from: Option<u64>,
    keys: &mut [MaybeUninit<K>],
    values: &mut [MaybeUninit<V>],
) -> io::Result<Batch> {
    let room = keys.len().min(values.len());
    let from_word = from.unwrap_or(0);
    let mut next: u64 = 0;
    let mut attr = BatchAttr {
        in_batch: from.map_or(0, |_| std::ptr::from_ref(&from_word) as u64),
        out_batch: std::ptr::from_mut(&mut next) as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: room as u32,
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        ..BatchAttr::default()
    };
    // SAFETY: `attr` is a valid `bpf_attr` batch member of the size given;
    // the kernel writes at most `count` keys and values into buffers that
    // hold `room` of each (the map's key and value sizes are those of K
    // and V, checked by the caller through aya), the position into the
    // 8-byte words (hash maps use 4 bytes of it, arrays their 4-byte
    // key), and the number it wrote into `attr.count`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_BATCH,
            std::ptr::from_mut(&mut attr),
            std::mem::size_of::<BatchAttr>(),
        )
    };
    let count = (attr.count as usize).min(room);
    if rc == 0 {
        return Ok(Batch {
            count,
            next,
            done: false,
        });
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ENOENT) {
        return Ok(Batch {
            count,
            next,
            done: true,
        });
    }
    Err(err)
}

/// Every entry of the hash map `map`, in as few calls as its buckets allow.
fn hash_entries<K: Pod, V: Pod>(map: &MapData) -> io::Result<Vec<(K, V)>> {
    let mut room = FIRST_BATCH;
    let mut keys: Vec<MaybeUninit<K>> = vec![MaybeUninit::uninit(); room];
    let mut values: Vec<MaybeUninit<V>> = vec![MaybeUninit::uninit(); room];
    let mut out = Vec::new();
    let mut from = None;
    loop {
        let batch = match lookup_batch(map, from, &mut keys, &mut values) {
            Ok(batch) => batch,
            Err(err) if err.raw_os_error() == Some(libc::ENOSPC) && room < MAX_BATCH => {
                room *= 2;
                keys.resize(room, MaybeUninit::uninit());
                values.resize(room, MaybeUninit::uninit());
                continue;
            }
            Err(err) => return Err(err),
        };
        for i in 0..batch.count {
            // SAFETY: the kernel wrote the first `count` keys and values.
            out.push(unsafe { (keys[i].assume_init(), values[i].assume_init()) });
        }
        if batch.done {
            return Ok(out);
        }
        from = Some(batch.next);
    }
}

/// The values at indexes `start..start + len` of the array `map` (fewer
/// when it ends first).
fn array_values<V: Pod>(map: &MapData, start: u32, len: u32) -> io::Result<Vec<V>> {
    let mut keys: Vec<MaybeUninit<u32>> = vec![MaybeUninit::uninit(); len as usize];
    let mut values: Vec<MaybeUninit<V>> = vec![MaybeUninit::uninit(); len as usize];
    let mut out = Vec::with_capacity(len as usize);
    // An array batch starts after the index it is given.
    let mut from = start.checked_sub(1).map(u64::from);
    while out.len() < len as usize {
        let have = out.len();
        let batch = lookup_batch(map, from, &mut keys[have..], &mut values[have..])?;
        for value in &values[have..have + batch.count] {
            // SAFETY: the kernel wrote `count` values from index `have`.
            out.push(unsafe { value.assume_init() });
        }
        if batch.done || batch.count == 0 {
            break;
        }
        from = Some(batch.next);
    }
    Ok(out)
}

/// Writes `values` at the array indexes `keys` of `map` in one
/// `BPF_MAP_UPDATE_BATCH` call (the kernel stops at the first it cannot
/// write, and says so with an error).
fn update_batch<V: Pod>(map: &MapData, keys: &[u32], values: &[V]) -> io::Result<()> {
    let count = keys.len().min(values.len());
    if count == 0 {
        return Ok(());
    }
    let mut attr = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: count as u32,
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        ..BatchAttr::default()
    };
    // SAFETY: `attr` is a valid `bpf_attr` batch member of the size given;
    // the kernel reads `count` 4-byte keys and `count` values of the map's
    // value size (that of V, checked by the caller through aya) from
    // buffers that hold at least that many, and writes only `attr.count`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_BATCH,
            std::ptr::from_mut(&mut attr),
            std::mem::size_of::<BatchAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl ProbeSet {
    /// Every entry of the hash map `name`: in batches where the kernel
    /// has them, else an entry at a time.
    pub(super) fn hash_entries<K: Pod, V: Pod>(
        &self,
        name: &'static str,
    ) -> Result<Vec<(K, V)>, ProbeError> {
        // Through aya first: it checks the key and value sizes.
        let map = self.hash::<K, V>(name)?;
        if let Some(entries) = self
            .ebpf
            .map(name)
            .and_then(map_data)
            .and_then(|data| hash_entries(data).ok())
        {
            return Ok(entries);
        }
        Ok(map.iter().filter_map(Result::ok).collect())
    }

    /// The values at indexes `start..start + len` of the array `name`: in
    /// batches where the kernel has them, else an index at a time (up to
    /// the first that fails to read, so that values stay at their index).
    pub(super) fn array_values<V: Pod>(
        &self,
        name: &'static str,
        start: u32,
        len: u32,
    ) -> Result<Vec<V>, ProbeError> {
        let array = self.array::<V>(name)?;
        if let Some(values) = self
            .ebpf
            .map(name)
            .and_then(map_data)
            .and_then(|data| array_values(data, start, len).ok())
        {
            return Ok(values);
        }
        Ok((start..start.saturating_add(len))
            .map_while(|i| array.get(&i, 0).ok())
            .collect())
    }

    /// Writes each `(index, value)` into the array `name`: in one call
    /// where the kernel has batches, else an index at a time.
    pub(super) fn array_set<V: Pod>(
        &mut self,
        name: &'static str,
        entries: &[(u32, V)],
    ) -> Result<(), ProbeError> {
        let (keys, values): (Vec<u32>, Vec<V>) = entries.iter().copied().unzip();
        // Through aya first: it checks the value size.
        self.array::<V>(name)?;
        if let Some(data) = self.ebpf.map(name).and_then(map_data)
            && update_batch(data, &keys, &values).is_ok()
        {
            return Ok(());
        }
        let mut array = self.array_mut::<V>(name)?;
        for (index, value) in entries {
            array
                .set(*index, *value, 0)
                .map_err(|source| ProbeError::Map { name, source })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use aya::maps::{Array, HashMap};
    use storprof_common::{SyscallAcc, SyscallKey};

    use super::{
        super::{ProbeOptions, ProbeSet},
        *,
    };

    #[test]
    fn batch_attr_has_the_kernel_layout() {
        // union bpf_attr's `batch`: four pointers, count, map_fd, two flags.
        assert_eq!(std::mem::size_of::<BatchAttr>(), 56);
        assert_eq!(std::mem::offset_of!(BatchAttr, count), 32);
        assert_eq!(std::mem::offset_of!(BatchAttr, map_fd), 36);
        assert_eq!(std::mem::offset_of!(BatchAttr, flags), 48);
    }

    /// Batches read what lookups one at a time read: a hash map of more
    /// entries than one batch holds, and ranges of an array; a batch of
    /// writes lands where single writes would.
    #[test]
    #[ignore = "needs root"]
    fn batches_read_what_single_lookups_read() {
        let mut set = ProbeSet::load(&ProbeOptions::default()).expect("load the probes");
        let acc = |n: u32| SyscallAcc {
            count: u64::from(n),
            ..SyscallAcc::ZERO
        };
        // Thread ids above any pid_max: no traced thread adds to them.
        let key = |n: u32| SyscallKey {
            tgid: 4_194_305,
            tid: 4_194_305 + n,
            nr: n % 7,
            _pad: 0,
        };
        {
            let mut hash: HashMap<_, SyscallKey, SyscallAcc> = set.hash_mut("SYSCALLS").unwrap();
            for n in 0..1000 {
                hash.insert(key(n), acc(n), 0).unwrap();
            }
        }
        let data = set.ebpf.map("SYSCALLS").and_then(map_data).unwrap();
        assert!(
            hash_entries::<SyscallKey, SyscallAcc>(data).is_ok(),
            "this kernel reads hash maps in batches"
        );
        let mut batched: Vec<(SyscallKey, SyscallAcc)> = set.hash_entries("SYSCALLS").unwrap();
        let hash: HashMap<_, SyscallKey, SyscallAcc> = set.hash("SYSCALLS").unwrap();
        let mut single: Vec<(SyscallKey, SyscallAcc)> = hash.iter().map(Result::unwrap).collect();
        batched.sort_by_key(|(k, _)| *k);
        single.sort_by_key(|(k, _)| *k);
        assert_eq!(batched.len(), 1000);
        assert_eq!(batched, single);

        {
            let mut pool: Array<_, SyscallAcc> = set.array_mut("SYSCALL_POOL").unwrap();
            for i in 10..20 {
                pool.set(i, acc(i), 0).unwrap();
            }
        }
        let counts = |values: Vec<SyscallAcc>| values.iter().map(|a| a.count).collect::<Vec<_>>();
        let middle: Vec<SyscallAcc> = set.array_values("SYSCALL_POOL", 12, 5).unwrap();
        assert_eq!(counts(middle), [12, 13, 14, 15, 16]);
        let from_start: Vec<SyscallAcc> = set.array_values("SYSCALL_POOL", 0, 11).unwrap();
        assert_eq!(from_start.len(), 11);
        assert_eq!((from_start[9].count, from_start[10].count), (0, 10));
        let data = set.ebpf.map("SYSCALL_POOL").and_then(map_data).unwrap();
        assert!(array_values::<SyscallAcc>(data, 19, 1).is_ok());

        // Writes at scattered indexes, read back one at a time.
        let data = set.ebpf.map("SYSCALL_POOL").and_then(map_data).unwrap();
        assert!(
            update_batch(data, &[11], &[acc(11)]).is_ok(),
            "this kernel writes arrays in batches"
        );
        set.array_set(
            "SYSCALL_POOL",
            &[(12, acc(0)), (15, acc(99)), (300, acc(3))],
        )
        .unwrap();
        let pool: Array<_, SyscallAcc> = set.array("SYSCALL_POOL").unwrap();
        let count = |i: u32| pool.get(&i, 0).unwrap().count;
        assert_eq!(
            [count(12), count(13), count(15), count(300)],
            [0, 13, 99, 3]
        );
    }
}
