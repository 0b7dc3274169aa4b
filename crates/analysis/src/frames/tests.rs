use super::*;

fn folded(text: &str) -> FoldedStacks {
    FoldedStacks::parse(text, "t").0
}

/// Stacks that end in the interpreter name their innermost Python
/// function; one in a C extension (GIL released) or without Python
/// frames does not.
#[test]
fn python_functions_of_stacks_in_the_interpreter() {
    let stacks = folded(
        "pool;run (pool.py:10);parse (pool.py:42);_PyEval_EvalFrameDefault 6\n\
             pool;run (pool.py:10);parse (pool.py:44);PyUnicode_New [libpython3.12.so.1.0] 2\n\
             pool;run (pool.py:10);read (pool.py:30) 1\n\
             pool;run (pool.py:10);read (pool.py:31);__libc_pread64 [libc.so.6] 5\n\
             pool;_PyEval_EvalFrameDefault 2\n",
    );
    let hot = hot_frames(&stacks, &|_| true, 5, &FrameModules::default());
    let names: Vec<(&str, u64)> = hot
        .python_functions
        .iter()
        .map(|r| (r.name.as_str(), r.count))
        .collect();
    assert_eq!(names, [("parse (pool.py)", 8), ("read (pool.py)", 1)]);
    assert_eq!(
        python_function("parse (pool.py:42)").as_deref(),
        Some("parse (pool.py)")
    );
    assert_eq!(python_function("memcpy (libc.so.6)"), None);
}

#[test]
fn dataloader_worker_frames_have_their_own_categories() {
    // Stacks of a real PyTorch DataLoader worker (DLIO's JPEG reader).
    let jpeg = [
        "ImageFile.load (PIL/ImageFile.py:425)",
        "[_imaging.cpython-311-x86_64-linux-gnu.so]",
        "[libjpeg-6dc8d115.so.62.4.0]",
    ];
    assert_eq!(categorize(&jpeg), "image decode (libjpeg/libpng, PIL)");
    let shm = [
        "collate_tensor_fn (torch/utils/data/_utils/collate.py:275)",
        "asm_exc_page_fault_[k]",
        "handle_mm_fault_[k]",
        "shmem_fault_[k]",
        "shmem_get_folio_gfp_[k]",
        "clear_page_erms_[k]",
    ];
    assert_eq!(
        categorize(&shm),
        "shared-memory tensors (shmem page faults)"
    );
    let cat = [
        "collate_tensor_fn (torch/utils/data/_utils/collate.py:275)",
        "at::native::structured_cat_out_cpu::impl(c10::IListRef<at::Tensor> const&, long)",
        "[libc.so.6]",
    ];
    assert_eq!(categorize(&cat), "PyTorch collate (tensor copies)");
    let gc = [
        "_PyEval_EvalFrameDefault",
        "gc_collect_main",
        "visit_reachable",
    ];
    assert_eq!(categorize(&gc), "Python garbage collector");
    // A fault outside shared memory stays a page fault.
    let anon = [
        "malloc",
        "asm_exc_page_fault_[k]",
        "handle_mm_fault_[k]",
        "clear_page_erms_[k]",
    ];
    assert_eq!(categorize(&anon), "memory reclaim / page faults (kernel)");
}

#[test]
fn categories_prefer_specific_over_generic() {
    assert_eq!(
        categorize(&[
            "_PyEval_EvalFrameDefault",
            "PyUnicode_FromFormatV",
            "memcpy"
        ]),
        "libpython string formatting"
    );
    assert_eq!(
        categorize(&[
            "main",
            "read",
            "ksys_read_[k]",
            "filemap_read_[k]",
            "rep_movs_alternative_[k]"
        ]),
        "page-cache copies (kernel)"
    );
    assert_eq!(categorize(&["main", "memcpy"]), "memcpy (user)");
    assert_eq!(
        categorize(&[
            "run",
            "storprof_bench::reader::legacy::format_global_index_map",
            "core::fmt::write"
        ]),
        NAMED[0].name
    );
    assert_eq!(categorize(&["main", "schedule_[k]"]), OTHER_KERNEL);
    assert_eq!(categorize(&["main", "work"]), OTHER_USER);
    // A user frame named like a kernel category does not match it.
    assert_eq!(categorize(&["my_filemap_read"]), OTHER_USER);
}

#[test]
fn function_and_library_names() {
    assert_eq!(
        function_name("PyUnicode_FromFormatV [libpython3.12.so.1.0]"),
        "PyUnicode_FromFormatV"
    );
    assert_eq!(function_name("vfs_read_[k]"), "vfs_read");
    assert_eq!(
        library_of("foo (/usr/lib/libarrow.so.1600)").as_deref(),
        Some("libarrow.so.1600")
    );
    assert_eq!(library_of("libz.so.1+0x1234").as_deref(), Some("libz.so.1"));
    assert_eq!(library_of("vfs_read_[k]").as_deref(), Some("kernel"));
    assert_eq!(
        library_of("_PyEval_EvalFrameDefault").as_deref(),
        Some("libpython")
    );
    assert_eq!(library_of("my_function"), None);
}

#[test]
fn hot_frames_counts_self_inclusive_and_categories() {
    let f = folded(
        "w;main;PyUnicode_FromFormatV;memcpy 45\n\
             w;main;parquet::decode 20\n\
             w;main;read;filemap_read_[k] 35\n\
             other;idle 100\n",
    );
    let h = hot_frames(&f, &|c| c == "w", 10, &FrameModules::default());
    assert_eq!(h.total, 100);
    assert_eq!(h.categories[0].name, "libpython string formatting");
    assert!((h.categories[0].share - 0.45).abs() < 1e-9);
    assert_eq!(h.categories[1].name, "page-cache copies (kernel)");
    assert_eq!(h.self_functions[0].name, "memcpy");
    assert_eq!(h.inclusive_functions[0].name, "main");
    assert_eq!(h.inclusive_functions[0].count, 100);
    assert!((share_matching(&f, &["filemap_read"], true) - 0.175).abs() < 1e-9);
    assert!((kernel_leaf_share(&f).unwrap() - 0.175).abs() < 1e-9);
}

/// Libraries come from the session's frame table first, then from
/// what the frame itself says; a name alone is only guessed from.
#[test]
fn libraries_from_the_frame_table_then_the_frame() {
    let mut modules = FrameModules::default();
    modules
        .modules
        .insert("__memcpy_avx512_unaligned_erms".into(), "libc.so.6".into());
    modules
        .modules
        .insert("list_dealloc".into(), "python3.12".into());
    let lib = |f: &str| library_in(f, &modules);
    assert_eq!(
        lib("__memcpy_avx512_unaligned_erms").as_deref(),
        Some("libc.so.6")
    );
    assert_eq!(lib("list_dealloc").as_deref(), Some("python3.12"));
    assert_eq!(lib("[libz.so.1]").as_deref(), Some("libz.so.1"));
    assert_eq!(lib("[python3.12]").as_deref(), Some("python3.12"));
    assert_eq!(lib("[unknown]"), None);
    assert_eq!(lib("[no stack]"), None);
    assert_eq!(lib("[12/34]"), None);
    assert_eq!(
        lib("read_batch (/w/loader.py:42)").as_deref(),
        Some("Python code")
    );
    assert_eq!(lib("vfs_read_[k]").as_deref(), Some("kernel"));
    assert_eq!(
        lib("_PyEval_EvalFrameDefault").as_deref(),
        Some("libpython")
    );
    assert_eq!(library_of("list_dealloc"), None);
    let f = folded("w;main;__memcpy_avx512_unaligned_erms 3\nw;main;list_dealloc 1\n");
    let h = hot_frames(&f, &|_| true, 10, &modules);
    let libs: Vec<(&str, u64)> = h
        .libraries
        .iter()
        .map(|r| (r.name.as_str(), r.count))
        .collect();
    assert_eq!(libs, [("libc.so.6", 3), ("python3.12", 1)]);
    assert!(h.unnamed.is_empty());
}

/// Leaves without a name are counted by frame; markers and named
/// frames are not.
#[test]
fn unnamed_leaves_are_counted() {
    let f = folded(
        "w;main;[libz.so.1] 2\nw;main;[unknown] 1\nw;[unknown]_[k] 1\nw;[no stack] 5\nw;main;f 1\n",
    );
    let h = hot_frames(&f, &|_| true, 10, &FrameModules::default());
    let got: Vec<(&str, u64)> = h
        .unnamed
        .iter()
        .map(|r| (r.name.as_str(), r.count))
        .collect();
    assert_eq!(
        got,
        [("[libz.so.1]", 2), ("[unknown]", 1), ("[unknown]_[k]", 1)]
    );
    assert_eq!(h.unnamed_total, 4);
    assert!(why_unnamed("[unknown]").starts_with("no file mapped"));
    assert!(why_unnamed("[libz.so.1]").starts_with("no symbol"));
    assert!(why_unnamed("[unknown]_[k]").starts_with("a kernel"));
    assert!(why_unnamed("[python: code object gone]").starts_with("a Python frame"));
}
