//! A bounded cache shared by one rank's read threads, with in-flight
//! de-duplication: when six 48-row batches of one 288-row row group are
//! requested at once, one thread loads the group and the others wait for it.
use std::{
    collections::HashMap,
    sync::{Arc, Condvar, Mutex},
};

use crate::error::BenchError;

type Key = (String, usize);

struct Pending<V> {
    /// `None` while loading; `Some(None)` if the load failed.
    done: Mutex<Option<Option<V>>>,
    cv: Condvar,
}

enum Slot<V> {
    Loading(Arc<Pending<V>>),
    Ready { value: V, bytes: u64, last: u64 },
}

struct Inner<V> {
    map: HashMap<Key, Slot<V>>,
    used: u64,
    tick: u64,
}

/// LRU cache of loaded units (row groups, arrays) bounded by `capacity` bytes.
pub struct LoadCache<V: Clone> {
    inner: Mutex<Inner<V>>,
    capacity: u64,
}

impl<V: Clone> LoadCache<V> {
    pub fn new(capacity: u64) -> Self {
        Self {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                used: 0,
                tick: 0,
            }),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<V>> {
        // A panic while holding the lock leaves consistent data (we never
        // panic mid-update), so recover from poisoning.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drop everything cached (in-flight loads finish normally).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.map.retain(|_, s| matches!(s, Slot::Loading(_)));
        g.used = 0;
    }

    /// Drop `key`'s value if it is loaded (a load in flight is left alone).
    /// Its memory is freed once the last clone handed out is dropped.
    pub fn remove(&self, key: (&str, usize)) {
        let key: Key = (key.0.to_owned(), key.1);
        let mut g = self.lock();
        if matches!(g.map.get(&key), Some(Slot::Ready { .. }))
            && let Some(Slot::Ready { bytes, .. }) = g.map.remove(&key)
        {
            g.used -= bytes;
        }
    }

    /// The cached value of `key`, or the result of `load` (which returns the
    /// value and its size). The bool is true when this call did the load.
    pub fn get_or_load(
        &self,
        key: (&str, usize),
        load: impl FnOnce() -> Result<(V, u64), BenchError>,
    ) -> Result<(V, bool), BenchError> {
        let key: Key = (key.0.to_owned(), key.1);
        let mut load = Some(load);
        loop {
            let pending = {
                let mut g = self.lock();
                g.tick += 1;
                let tick = g.tick;
                match g.map.get_mut(&key) {
                    Some(Slot::Ready { value, last, .. }) => {
                        *last = tick;
                        return Ok((value.clone(), false));
                    }
                    Some(Slot::Loading(p)) => Some(p.clone()),
                    None => {
                        let p = Arc::new(Pending {
                            done: Mutex::new(None),
                            cv: Condvar::new(),
                        });
                        g.map.insert(key.clone(), Slot::Loading(p));
                        None
                    }
                }
            };
            if let Some(p) = pending {
                let mut d = p.done.lock().unwrap_or_else(|e| e.into_inner());
                while d.is_none() {
                    d = p.cv.wait(d).unwrap_or_else(|e| e.into_inner());
                }
                if let Some(Some(v)) = d.as_ref() {
                    return Ok((v.clone(), false));
                }
                // The other loader failed: try ourselves (and report our error).
                continue;
            }
            let Some(f) = load.take() else {
                continue;
            };
            let result = f();
            let mut g = self.lock();
            let Some(Slot::Loading(p)) = g.map.remove(&key) else {
                // Only this call replaces its own Loading slot.
                return result.map(|(v, _)| (v, true));
            };
            let out = match result {
                Ok((v, bytes)) => {
                    if bytes <= self.capacity {
                        while g.used + bytes > self.capacity {
                            let victim = g
                                .map
                                .iter()
                                .filter_map(|(k, s)| match s {
                                    Slot::Ready { last, .. } => Some((*last, k.clone())),
                                    Slot::Loading(_) => None,
                                })
                                .min();
                            let Some((_, k)) = victim else { break };
                            if let Some(Slot::Ready { bytes: b, .. }) = g.map.remove(&k) {
                                g.used -= b;
                            }
                        }
                        g.tick += 1;
                        let last = g.tick;
                        g.used += bytes;
                        g.map.insert(
                            key.clone(),
                            Slot::Ready {
                                value: v.clone(),
                                bytes,
                                last,
                            },
                        );
                    }
                    *p.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(Some(v.clone()));
                    Ok((v, true))
                }
                Err(e) => {
                    *p.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(None);
                    Err(e)
                }
            };
            drop(g);
            p.cv.notify_all();
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn concurrent_requests_load_once() {
        let cache = LoadCache::<Arc<Vec<u8>>>::new(1000);
        let loads = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let (v, _) = cache
                        .get_or_load(("f", 0), || {
                            loads.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(30));
                            Ok((Arc::new(vec![1u8; 100]), 100))
                        })
                        .unwrap();
                    assert_eq!(v.len(), 100);
                });
            }
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn evicts_least_recently_used_within_capacity() {
        let cache = LoadCache::<u32>::new(250);
        for i in 0..3 {
            cache.get_or_load(("f", i), || Ok((i as u32, 100))).unwrap();
        }
        // 0 was evicted to make room for 2; 1 and 2 are cached.
        assert!(!cache.get_or_load(("f", 2), || Ok((9, 100))).unwrap().1);
        assert!(cache.get_or_load(("f", 0), || Ok((0, 100))).unwrap().1);
        assert!(cache.lock().used <= 250);
    }

    #[test]
    fn failed_load_is_not_cached() {
        let cache = LoadCache::<u32>::new(250);
        let e = cache.get_or_load(("f", 0), || Err(BenchError::Internal("boom".into())));
        assert!(e.is_err());
        assert_eq!(
            cache.get_or_load(("f", 0), || Ok((1, 1))).unwrap(),
            (1, true)
        );
    }
}
