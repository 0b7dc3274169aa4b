use super::*;

const NEXT: &str = "_BaseDataLoaderIter.__next__ (/v/torch/utils/data/dataloader.py:733)";

fn folded(stacks: &[(&str, u64)]) -> FoldedStacks {
    FoldedStacks {
        stacks: stacks
            .iter()
            .map(|(s, n)| (format!("python;[100/100];{s}"), *n))
            .collect(),
    }
}

#[test]
fn a_trainers_samples_split_into_fetching_training_and_the_rest() {
    let oncpu = folded(&[
        (
            &format!(
                "<module> (/t/train.py:9);train (/t/train.py:61);{NEXT};np.load (/v/numpy/npyio.py:400);memcpy"
            ),
            50,
        ),
        (
            "<module> (/t/train.py:9);train (/t/train.py:64);step (/t/train.py:40);sgemm",
            30,
        ),
        (
            "<module> (/t/train.py:2);_find_and_load (<frozen importlib._bootstrap>:1176);read",
            7,
        ),
        // Outside the loop function: the model built before it.
        (
            "<module> (/t/train.py:8);build_model (/t/train.py:20);init",
            5,
        ),
        // The interpreter's end and the process's exit handlers.
        ("_start;Py_RunMain;Py_FinalizeEx;gc_collect_main", 3),
        ("_start;exit;__run_exit_handlers;~TorchLibraryInit", 2),
        // No Python frame read: nothing known of the loop.
        ("_start;[libjpeg.so]", 4),
    ]);
    let own = own_time(&oncpu, &FoldedStacks::default());
    let t = own[&(100, 100)];
    assert_eq!((t.fetch, t.startup, t.all), (50, 7 + 5 + 3 + 2, 101));
    assert_eq!((t.fetch_io_us, t.fetch_net_us), (0, 0));
}

#[test]
fn only_its_own_device_and_socket_waits_inside_the_loader_are_fetching() {
    let loop_ = "<module> (/t/train.py:9);train (/t/train.py:61)";
    let offcpu = folded(&[
        // Reading a sample's file: a page-cache miss waits for the device.
        (
            &format!(
                "{loop_};{NEXT};np.load (/v/numpy/npyio.py:400);read;ksys_read_[k];filemap_read_[k];folio_wait_bit_common_[k];io_schedule_[k];schedule_[k]"
            ),
            6_000_000,
        ),
        // Receiving a sample over HTTP.
        (
            &format!("{loop_};{NEXT};recv;tcp_recvmsg_[k];sk_wait_data_[k];schedule_[k]"),
            2_000_000,
        ),
        // The same over a socket with a timeout (urllib, requests, boto3):
        // CPython polls it for readiness before each receive.
        (
            &format!(
                "{loop_};{NEXT};HttpDataset.__getitem__ (/t/train.py:235);HTTPResponse.read (/usr/lib/python3.11/http/client.py:466);SocketIO.readinto (/usr/lib/python3.11/socket.py:706);sock_recv_into;sock_call_ex;internal_select;poll;do_sys_poll_[k];schedule_[k]"
            ),
            1_500_000,
        ),
        // Waiting for a worker's batch: a delivery, which the wake-up
        // graph accounts, not the consumer's own fetching.
        (
            &format!("{loop_};{NEXT};poll;do_sys_poll_[k];schedule_[k]"),
            9_000_000,
        ),
        // The same wait as PyTorch makes it, through a multiprocessing
        // connection's poll.
        (
            &format!(
                "{loop_};{NEXT};_ConnectionBase.poll (/usr/lib/python3.11/multiprocessing/connection.py:257);poll;do_sys_poll_[k];schedule_[k]"
            ),
            4_000_000,
        ),
        // Its file descriptors received over a Unix socket with the
        // default timeout: CPython polls it too, still a delivery.
        (
            &format!(
                "{loop_};{NEXT};rebuild_storage_fd (/v/torch/multiprocessing/reductions.py:400);recvfds (/usr/lib/python3.11/multiprocessing/reduction.py:159);sock_recvmsg;sock_call_ex;internal_select;poll;do_sys_poll_[k];schedule_[k]"
            ),
            5_000_000,
        ),
        // A batch's file descriptors passed over a Unix socket by a
        // worker: a delivery too.
        (
            &format!(
                "{loop_};{NEXT};rebuild_storage_fd (/v/torch/multiprocessing/reductions.py:400);recvmsg;unix_stream_read_generic_[k];schedule_[k]"
            ),
            3_000_000,
        ),
        // Reading a module at import: not fetching.
        (
            "<module> (/t/train.py:2);_find_and_load (<frozen importlib._bootstrap>:1176);read;io_schedule_[k];schedule_[k]",
            400_000,
        ),
        // A blocked stack without Python frames tells nothing.
        (
            "_start;[libnvrtc.so];filemap_fault_[k];io_schedule_[k]",
            200_000,
        ),
    ]);
    let own = own_time(&FoldedStacks::default(), &offcpu);
    let t = own[&(100, 100)];
    assert_eq!((t.fetch_io_us, t.fetch_net_us), (6_000_000, 3_500_000));
    assert_eq!((t.fetch, t.startup, t.all), (0, 0, 0));
}

#[test]
fn start_up_takes_the_first_cpu_time_and_tear_down_the_last() {
    let ms = 1_000_000;
    // Imports on a CPU and reading modules (0.5 s each), then a loop
    // half on a CPU and half in D, then 0.25 s of finalization.
    let series = ThreadSeries {
        on_cpu_ns: vec![500 * ms, 500 * ms, 500 * ms, 750 * ms],
        runnable_ns: vec![0, 0, 0, 0],
        sleeping_ns: vec![0, 0, 0, 0],
        blocked_io_ns: vec![500 * ms, 500 * ms, 500 * ms, 250 * ms],
        ..ThreadSeries::default()
    };
    let span = loop_span(&series, 500 * ms, 250 * ms).unwrap();
    assert_eq!(span.on_cpu as u64, 1500 * ms);
    // What a bucket holds is spread over it: the last bucket's D time
    // is two thirds in the loop.
    assert_eq!(span.io as u64, 3500 * ms / 3);
    // Start-up and tear-down longer than its CPU time: no loop.
    assert!(loop_span(&series, 2000 * ms, 500 * ms).is_none());
    assert_eq!(
        loop_span(&series, 0, 0).unwrap().total() as u64,
        (2250 + 1750) * ms
    );
}

#[test]
fn a_generator_around_the_loader_is_not_the_training_loop() {
    // `for x in to_device(loader): step(x)`: the generator only fetches
    // (and moves a batch); the step runs in its caller.
    let oncpu = folded(&[
        (
            &format!(
                "<module> (/t/train.py:9);train (/t/train.py:61);to_device (/t/train.py:30);{NEXT};decode"
            ),
            50,
        ),
        (
            "<module> (/t/train.py:9);train (/t/train.py:61);to_device (/t/train.py:31);copy",
            5,
        ),
        (
            "<module> (/t/train.py:9);train (/t/train.py:64);step (/t/train.py:40);sgemm",
            40,
        ),
        (
            "<module> (/t/train.py:8);build_model (/t/train.py:20);init",
            5,
        ),
    ]);
    let t = own_time(&oncpu, &FoldedStacks::default())[&(100, 100)];
    assert_eq!((t.fetch, t.startup, t.all), (50, 5, 100));
}

#[test]
fn a_validation_loop_does_not_make_their_common_caller_the_loop() {
    // main() builds the model, then runs a train loop and a short
    // validation loop: each is a loop, the build before them is not.
    let main = "<module> (/t/train.py:120);main";
    let oncpu = folded(&[
        (
            &format!("{main} (/t/train.py:100);build_model (/t/train.py:20);init"),
            10,
        ),
        (
            &format!("{main} (/t/train.py:101);train_loop (/t/train.py:61);{NEXT};decode"),
            50,
        ),
        (
            &format!(
                "{main} (/t/train.py:101);train_loop (/t/train.py:64);step (/t/train.py:40);sgemm"
            ),
            30,
        ),
        (
            &format!("{main} (/t/train.py:102);test_loop (/t/train.py:80);{NEXT};decode"),
            10,
        ),
        (
            &format!(
                "{main} (/t/train.py:102);test_loop (/t/train.py:82);evaluate (/t/train.py:50);sgemm"
            ),
            5,
        ),
    ]);
    let t = own_time(&oncpu, &FoldedStacks::default())[&(100, 100)];
    assert_eq!((t.fetch, t.startup, t.all), (60, 10, 105));
}

#[test]
fn work_past_the_loops_call_is_tear_down() {
    let main = "<module> (/t/train.py:120);main";
    let oncpu = folded(&[
        (
            &format!("{main} (/t/train.py:100);build_model (/t/train.py:20);init"),
            10,
        ),
        (
            &format!("{main} (/t/train.py:101);train (/t/train.py:61);{NEXT};decode"),
            50,
        ),
        (
            &format!("{main} (/t/train.py:101);train (/t/train.py:64);step (/t/train.py:40);sgemm"),
            30,
        ),
        (
            &format!("{main} (/t/train.py:103);save (/t/train.py:90);write"),
            4,
        ),
        ("_start;Py_RunMain;Py_FinalizeEx;gc_collect_main", 2),
    ]);
    let t = own_time(&oncpu, &FoldedStacks::default())[&(100, 100)];
    assert_eq!((t.startup, t.teardown), (16, 6));
}

#[test]
fn work_above_the_loop_in_its_own_function_is_start_up() {
    let train = "<module> (/t/train.py:120);train";
    let oncpu = folded(&[
        // The model built at the top of the function that then iterates.
        (
            &format!("{train} (/t/train.py:40);build_model (/t/train.py:20);init"),
            12,
        ),
        (
            &format!(
                "{train} (/t/train.py:52);DataLoader.__iter__ (/v/torch/utils/data/dataloader.py:480)"
            ),
            1,
        ),
        (&format!("{train} (/t/train.py:55);{NEXT};decode"), 50),
        // The step, below the line that takes the batch.
        (
            &format!("{train} (/t/train.py:58);step (/t/train.py:30);sgemm"),
            30,
        ),
    ]);
    let t = own_time(&oncpu, &FoldedStacks::default())[&(100, 100)];
    assert_eq!((t.fetch, t.startup, t.teardown, t.all), (51, 12, 0, 93));
}
