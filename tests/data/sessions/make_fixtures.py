#!/usr/bin/env python3
"""Writes the hand-made session fixtures in tests/data/sessions/<scenario>/.

Each scenario models what `storprof record` writes for one labelled
workload on a 2-CPU host over 10 s (99 Hz sampling); figures are chosen to be
realistic for that workload, not to sit on a threshold. Re-run after changing
a scenario, then re-bless the golden files (STORPROF_BLESS=1 cargo test -p storprof --test integration -- analysis::).
Real recordings will replace/augment these (see tests/analysis.rs).
"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
S = 1_000_000_000
MIB = 1 << 20
START = 1_764_496_000_000_000_000
DUR = 10


def hist(bucket, n):
    h = [0] * 40
    h[bucket] = n
    while h and h[-1] == 0:
        h.pop()
    return h


def sc(name, nr, count, total_ns, nbytes=0, bucket=12):
    return {"nr": nr, "name": name, "count": count, "errors": 0, "total_ns": int(total_ns),
            "bytes": nbytes, "latency_log2_ns": hist(bucket, count)}


def thread(pid, tid, comm, on, runnable=0.0, sleeping=0.0, d=0.0, su=0, sk=0, syscalls=(), read=0, misses=0):
    return {"pid": pid, "tid": tid, "comm": comm, "on_cpu_ns": int(on * S),
            "off_cpu_ns": {"runnable": int(runnable * S), "sleeping": int(sleeping * S),
                           "uninterruptible": int(d * S), "other": 0},
            "samples_user": su, "samples_kernel": sk, "syscalls": list(syscalls),
            "read_bytes": read, "write_bytes": 0, "page_cache_misses": misses}


def device(name, dev, read, reqs, busy_s, bucket=17):
    return {"name": name, "dev": dev, "read_bytes": read, "write_bytes": 0, "read_requests": reqs,
            "write_requests": 0, "latency_log2_ns": hist(bucket, reqs) if reqs else [],
            "busy_ns": int(busy_s * S), "utilization": busy_s / DUR, "traced_read_bytes": read,
            "by_pid": {}}


def series(threads, devices):
    def even(total):
        return [int(total / DUR)] * DUR
    return {"bucket_ns": S, "start_unix_ns": START,
            "threads": [{"pid": t["pid"], "tid": t["tid"], "comm": t["comm"],
                         "on_cpu_ns": even(t["on_cpu_ns"]), "read_bytes": even(t["read_bytes"])}
                        for t in threads],
            "devices": [{"name": d["name"], "read_bytes": even(d["read_bytes"]), "write_bytes": [0] * DUR,
                         "busy_ns": even(d["busy_ns"])} for d in devices]}


def write(name, command, threads, devices, misses, oncpu, offcpu, bench=None, notes=()):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    pids = sorted({t["pid"] for t in threads})
    info = {"format_version": 1, "storprof_version": "0.1.0", "command": command, "cwd": "/home/user",
            "attached_pids": [], "tracked_pids": pids, "hostname": "client01",
            "kernel": "6.18.0-1-amd64", "num_cpus": 2, "start_unix_ns": START,
            "end_unix_ns": START + DUR * S, "duration_s": float(DUR), "freq_hz": 99,
            "exit_code": 0, "exit_signal": None, "end_reason": "exited",
            "probes": [{"name": p, "attached": True, "note": ""} for p in
                       ["cpu_samples", "sched", "syscalls", "block", "page_cache", "process"]],
            "features": {"btf": "ok", "tracefs": "/sys/kernel/tracing"}, "lost_events": {},
            "notes": list(notes)}
    files = {
        "session.json": info,
        "threads.json": threads,
        "io.json": {"devices": devices, "page_cache": {"misses_pages": misses, "page_size": 4096}},
        "timeseries.json": series(threads, devices),
    }
    if bench:
        files["bench-summary.json"] = bench
    for f, v in files.items():
        with open(os.path.join(d, f), "w") as fh:
            json.dump(v, fh, indent=1)
            fh.write("\n")
    for f, stacks in (("oncpu.folded", oncpu), ("offcpu.folded", offcpu)):
        with open(os.path.join(d, f), "w") as fh:
            for s, n in stacks:
                fh.write(f"{s} {n}\n")


def bench_summary(au, derived, measured, amp):
    return {"start": "2026-11-30T09:00:00.000000", "num_accelerators": 1, "num_hosts": 1,
            "hostname": "client01", "num_files_train": 64, "num_samples_per_file": 288,
            "metric": {"train_au_percentage": [au], "train_au_mean_percentage": au,
                       "train_au_meet_expectation": "success" if au >= 90 else "fail",
                       "train_au_stdev_percentage": 0.0,
                       "train_throughput_mean_samples_per_second": 13.23,
                       "train_io_mean_MB_per_second": derived, "train_io_stdev_MB_per_second": 0.0},
            "host_cpu_count": [2], "epochs": 1, "end": "2026-11-30T09:00:10.000000",
            "measured": {"read_bytes": int(measured * MIB * DUR), "read_MiB_per_second": measured,
                         "requests": 1200, "read_amplification": amp, "record_size_bytes_real": 2164832}}


LEGACY = "storprof_bench::reader::legacy::"
BENCH = ["/usr/local/bin/storprof", "bench", "--workload", "flux", "--data-dir", "/data/flux"]


def cpu_bound_legacy():
    readers = [thread(100, 100 + i, f"reader-{i}", 9.6, runnable=0.2, sleeping=0.2, su=900, sk=50,
                      syscalls=[sc("pread64", 17, 600, 0.12 * S, 60 * MIB, 17)], read=60 * MIB, misses=1024)
               for i in (2, 3)]
    threads = [thread(100, 100, "storprof", 0.05, sleeping=9.95, syscalls=[sc("futex", 202, 40, 9.9 * S)]),
               thread(100, 101, "consumer", 0.01, sleeping=9.99,
                      syscalls=[sc("clock_nanosleep", 230, 28, 3.72 * S, 0, 30), sc("futex", 202, 28, 6.2 * S)]),
               ] + readers
    oncpu = []
    for r in ("reader-2", "reader-3"):
        base = f"{r};std::sys::thread::Thread::new::thread_start;{LEGACY}LegacyReader::read_samples"
        oncpu += [(f"{base};{LEGACY}format_global_index_map;alloc::fmt::format;core::fmt::write", 380),
                  (f"{base};{LEGACY}format_global_index_map;alloc::raw_vec::finish_grow;realloc", 48),
                  (f"{base};{LEGACY}decode_whole_row_group;parquet::arrow::array_reader::read_records", 190),
                  (f"{base};{LEGACY}decode_whole_row_group;parquet::column::reader::decoder::get_next", 100),
                  (f"{base};{LEGACY}read_footer;std::fs::read;pread64;entry_SYSCALL_64_[k];filemap_read_[k];copy_page_to_iter_[k]", 40),
                  (f"{base};memcpy", 182)]
    offcpu = [("storprof;main;std::sync::mpsc::Receiver::recv;syscall;entry_SYSCALL_64_[k];futex_wait_[k];schedule_[k]", 9_900_000),
              ("consumer;storprof_bench::engine::consumer;std::thread::sleep;clock_nanosleep;entry_SYSCALL_64_[k];hrtimer_nanosleep_[k];schedule_[k]", 3_720_000),
              ("consumer;storprof_bench::engine::consumer;std::sync::mpsc::Receiver::recv;syscall;entry_SYSCALL_64_[k];futex_wait_[k];schedule_[k]", 6_200_000),
              ("reader-2;std::sys::thread::Thread::new::thread_start;preempted;schedule_[k]", 200_000),
              ("reader-3;std::sys::thread::Thread::new::thread_start;preempted;schedule_[k]", 200_000)]
    write("cpu-bound-dlio-legacy", BENCH + ["--reader", "dlio-legacy", "--read-threads", "2",
                                            "--computation-time", "1.35", "--results-dir", "results/legacy"],
          threads, [device("vda", "254:0", 8 * MIB, 64, 0.012)], 2048, oncpu, offcpu,
          bench=bench_summary(37.22, 0.83, 12.0, 14.5))


def storage_bound():
    threads = [thread(200, 200, "odirect-read", 0.35, runnable=0.05, sleeping=0.1, d=9.5, su=10, sk=25,
                      syscalls=[sc("pread64", 17, 800, 9.62 * S, 100 * MIB, 23)], read=100 * MIB)]
    oncpu = [("odirect-read;main;pread64;entry_SYSCALL_64_[k];iomap_dio_rw_[k];blk_mq_submit_bio_[k]", 25),
             ("odirect-read;main;checksum", 10)]
    offcpu = [("odirect-read;main;pread64;entry_SYSCALL_64_[k];iomap_dio_rw_[k];blk_io_schedule_[k];io_schedule_[k];schedule_[k]", 9_500_000),
              ("odirect-read;main;preempted;schedule_[k]", 50_000)]
    write("storage-bound-odirect-throttled",
          ["env", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG", "python3", "read_odirect.py",
           "--data-dir", "/data/odirect", "--s3-secret-key", "hunter2", "--token=abc123"],
          threads, [device("vda", "254:0", 100 * MIB, 800, 1.3)], 0, oncpu, offcpu)


def page_cache_served():
    threads = [thread(300, 300, "cat-reader", 9.5, runnable=0.1, sleeping=0.4, su=140, sk=800,
                      syscalls=[sc("read", 0, 163840, 8.6 * S, 20 * 1024 * MIB, 15)], read=20 * 1024 * MIB)]
    oncpu = [("cat-reader;main;read;entry_SYSCALL_64_[k];ksys_read_[k];vfs_read_[k];filemap_read_[k];copy_page_to_iter_[k];rep_movs_alternative_[k]", 640),
             ("cat-reader;main;read;entry_SYSCALL_64_[k];ksys_read_[k];vfs_read_[k];filemap_read_[k];filemap_get_pages_[k]", 120),
             ("cat-reader;main;read;entry_SYSCALL_64_[k];syscall_exit_to_user_mode_[k]", 40),
             ("cat-reader;main;crc32_update", 140)]
    offcpu = [("cat-reader;main;write;pipe_write_[k];schedule_[k]", 400_000),
              ("cat-reader;main;preempted;schedule_[k]", 100_000)]
    write("page-cache-served", ["cat-reader", "/data/cached/train.bin"], threads,
          [device("vda", "254:0", 0, 0, 0.0), device("loop0", "7:0", 0, 0, 0.0)], 0, oncpu, offcpu)


def compute_bound():
    readers = [thread(400, 400 + i, f"reader-{i}", 1.9, runnable=0.1, sleeping=8.0, su=170, sk=18,
                      syscalls=[sc("pread64", 17, 300, 0.1 * S, 30 * MIB, 16), sc("futex", 202, 300, 7.6 * S)],
                      read=30 * MIB)
               for i in (2, 3)]
    threads = [thread(400, 400, "storprof", 0.05, sleeping=9.95, syscalls=[sc("futex", 202, 10, 9.9 * S)]),
               thread(400, 401, "consumer", 0.2, sleeping=9.8,
                      syscalls=[sc("clock_nanosleep", 230, 19, 9.53 * S, 0, 29), sc("futex", 202, 19, 0.25 * S)]),
               ] + readers
    oncpu = []
    for r in ("reader-2", "reader-3"):
        base = f"{r};std::sys::thread::Thread::new::thread_start;storprof_bench::reader::raw::RawReader::read_samples"
        oncpu += [(f"{base};storprof_bench::reader::decode::decode_fixed_size_list", 120),
                  (f"{base};pread64;entry_SYSCALL_64_[k];filemap_read_[k];copy_page_to_iter_[k]", 18),
                  (f"{base};memcpy", 50)]
    offcpu = [(f"reader-{i};std::sys::thread::Thread::new::thread_start;std::sync::mpsc::SyncSender::send;syscall;entry_SYSCALL_64_[k];futex_wait_[k];schedule_[k]", 7_600_000) for i in (2, 3)]
    offcpu += [("consumer;storprof_bench::engine::consumer;std::thread::sleep;clock_nanosleep;entry_SYSCALL_64_[k];hrtimer_nanosleep_[k];schedule_[k]", 9_530_000)]
    write("compute-bound", BENCH + ["--reader", "raw", "--read-threads", "2", "--computation-time", "0.5"],
          threads, [device("vda", "254:0", 0, 0, 0.0)], 0, oncpu, offcpu,
          bench=bench_summary(95.3, 18.9, 6.0, 1.02))


def cpu_starved():
    threads = [thread(500, 500, "burner", 0.01, sleeping=9.99, syscalls=[sc("futex", 202, 6, 9.9 * S)])]
    threads += [thread(500, 501 + i, "burn", 3.3, runnable=6.6, sleeping=0.1, su=325, sk=2) for i in range(6)]
    oncpu = [("burn;start_thread;burn_loop;sha256_block", 1950)]
    offcpu = [("burn;start_thread;burn_loop;preempted;schedule_[k]", 39_600_000),
              ("burner;main;pthread_join;futex_wait_[k];schedule_[k]", 9_900_000)]
    write("cpu-starved", ["./burner", "--threads", "6"], threads, [device("vda", "254:0", 0, 0, 0.0)], 0, oncpu, offcpu)


def lock_contention():
    threads = [thread(600, 600, "locktest", 0.01, sleeping=9.99, syscalls=[sc("futex", 202, 4, 9.9 * S)])]
    threads += [thread(600, 601 + i, "worker", 0.9, runnable=0.3, sleeping=8.8, su=80, sk=9,
                       syscalls=[sc("pread64", 17, 2048, 0.05 * S, 8 * MIB, 12), sc("futex", 202, 50000, 8.6 * S, 0, 17)],
                       read=8 * MIB)
                for i in range(4)]
    oncpu = [("worker;start_thread;worker_main;pthread_mutex_lock;__lll_lock_wait;futex_wait_[k]", 60),
             ("worker;start_thread;worker_main;parse_record", 240),
             ("worker;start_thread;worker_main;pread64;entry_SYSCALL_64_[k];filemap_read_[k];copy_page_to_iter_[k]", 36)]
    offcpu = [("worker;start_thread;worker_main;pthread_mutex_lock;__lll_lock_wait;entry_SYSCALL_64_[k];futex_wait_[k];schedule_[k]", 34_400_000),
              ("worker;start_thread;worker_main;preempted;schedule_[k]", 1_200_000),
              ("locktest;main;pthread_join;futex_wait_[k];schedule_[k]", 9_900_000)]
    write("lock-contention", ["./locktest", "--threads", "4", "--data-file", "/data/records.bin"], threads,
          [device("vda", "254:0", 0, 0, 0.0)], 0, oncpu, offcpu)


if __name__ == "__main__":
    cpu_bound_legacy()
    storage_bound()
    page_cache_served()
    compute_bound()
    cpu_starved()
    lock_contention()
