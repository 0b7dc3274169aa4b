//! Per-version CPython struct offsets (x86_64, release builds).
//!
//! Measured with `offsetof` against each version's own headers
//! (`include/pythonX.Y/internal`, `Py_BUILD_CORE`): see
//! `tests/python/offsets.c`, which prints these numbers for an installed
//! interpreter. 3.13+ also publishes most of them at run time in
//! `_Py_DebugOffsets` at the start of `_PyRuntime`; user space checks those
//! against this table before registering a 3.13 interpreter.
use storprof_common::{PY_NO_OFFSET, PyProcess, py_tstate};

/// How a frame's instruction field maps to a code-unit index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrField {
    /// A pointer into the code object's inline bytecode at
    /// `CodeOffsets::code_units` (3.11+: `prev_instr`, `instr_ptr`).
    Pointer,
    /// `f_lasti`, an `int` index in code units (3.10; -1 before the first).
    LastiUnits,
}

/// Where one Python call ends in a frame chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryMarker {
    /// Every frame runs in its own `_PyEval_EvalFrameDefault` call (3.10).
    EveryFrame,
    /// The flag byte is `is_entry`: set on the first frame an eval call ran (3.11).
    IsEntryFlag,
    /// The flag byte is `owner`; a frame owned by the C stack (this value)
    /// is the shim an eval call pushes below its first frame (3.12+).
    CStackOwner(u8),
}

/// Line table encoding of `co_linetable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTableFormat {
    /// (byte-offset delta, line delta) pairs (3.10).
    Pairs310,
    /// PEP 657 location entries (3.11+).
    Locations311,
}

/// `PyCodeObject` and string object layout, read by user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeOffsets {
    pub firstlineno: u64,
    pub filename: u64,
    pub name: u64,
    /// `co_qualname` (3.11+: `Class.method`, `f.<locals>.g`), shown
    /// instead of `co_name` when present, as py-spy does.
    pub qualname: Option<u64>,
    pub linetable: u64,
    /// Inline bytecode (`co_code_adaptive`); unused in 3.10.
    pub code_units: u64,
    /// `sizeof(PyASCIIObject)`: compact ASCII data follows it.
    pub ascii_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: other compact data follows it.
    pub compact_size: u64,
}

/// Everything version-specific about one CPython minor version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionOffsets {
    pub major: u8,
    pub minor: u8,
    /// Offsets the probe uses (`runtime` is 0 here; set per process).
    pub probe: PyProcess,
    pub code: CodeOffsets,
    pub instr: InstrField,
    pub entry: EntryMarker,
    pub linetable: LineTableFormat,
}

/// `PyBytesObject.ob_size` and `ob_sval` (same in every supported version).
pub const BYTES_SIZE: u64 = 16;
pub const BYTES_DATA: u64 = 32;
/// `PyASCIIObject.length` and `.state`.
pub const UNICODE_LENGTH: u64 = 16;
pub const UNICODE_STATE: u64 = 32;
/// `PyObject.ob_type`.
pub const OB_TYPE: u64 = 8;

const fn probe(version: u32) -> PyProcess {
    PyProcess {
        runtime: 0,
        version,
        tstate_mode: py_tstate::BY_NATIVE_TID,
        runtime_interp_head: PY_NO_OFFSET,
        interp_tstate_head: PY_NO_OFFSET,
        tstate_next: PY_NO_OFFSET,
        tstate_native_tid: PY_NO_OFFSET,
        runtime_tstate_current: PY_NO_OFFSET,
        tstate_frame: PY_NO_OFFSET,
        cframe_current_frame: PY_NO_OFFSET,
        frame_previous: PY_NO_OFFSET,
        frame_code: PY_NO_OFFSET,
        frame_instr: PY_NO_OFFSET,
        frame_flag: PY_NO_OFFSET,
        pidns_dev: 0,
        pidns_ino: 0,
        tstate_pthread: PY_NO_OFFSET,
        _pad: 0,
    }
}

/// The supported versions.
pub const VERSIONS: &[VersionOffsets] = &[
    VersionOffsets {
        major: 3,
        minor: 10,
        probe: PyProcess {
            // 3.10 has no native thread id: threads are matched by
            // pthread_self(); the GIL holder is the fallback when the
            // kernel's task layout is unknown (no BTF).
            tstate_mode: py_tstate::BY_PTHREAD,
            runtime_interp_head: 32,
            interp_tstate_head: 8,
            tstate_next: 8,
            tstate_pthread: 176,
            runtime_tstate_current: 568,
            tstate_frame: 24,
            frame_previous: 24,
            frame_code: 32,
            frame_instr: 96,
            ..probe(0x030a)
        },
        code: CodeOffsets {
            firstlineno: 40,
            filename: 104,
            name: 112,
            qualname: None,
            linetable: 120,
            code_units: 0,
            ascii_size: 48,
            compact_size: 72,
        },
        instr: InstrField::LastiUnits,
        entry: EntryMarker::EveryFrame,
        linetable: LineTableFormat::Pairs310,
    },
    VersionOffsets {
        major: 3,
        minor: 11,
        probe: PyProcess {
            runtime_interp_head: 40,
            interp_tstate_head: 16,
            tstate_next: 8,
            tstate_native_tid: 160,
            tstate_frame: 56,
            cframe_current_frame: 8,
            frame_previous: 48,
            frame_code: 32,
            frame_instr: 56,
            frame_flag: 68,
            ..probe(0x030b)
        },
        code: CodeOffsets {
            firstlineno: 72,
            filename: 112,
            name: 120,
            qualname: Some(128),
            linetable: 136,
            code_units: 184,
            ascii_size: 48,
            compact_size: 72,
        },
        instr: InstrField::Pointer,
        entry: EntryMarker::IsEntryFlag,
        linetable: LineTableFormat::Locations311,
    },
    VersionOffsets {
        major: 3,
        minor: 12,
        probe: PyProcess {
            runtime_interp_head: 40,
            interp_tstate_head: 72,
            tstate_next: 8,
            tstate_native_tid: 144,
            tstate_frame: 56,
            cframe_current_frame: 0,
            frame_previous: 8,
            frame_code: 0,
            frame_instr: 56,
            frame_flag: 70,
            ..probe(0x030c)
        },
        code: CodeOffsets {
            firstlineno: 68,
            filename: 112,
            name: 120,
            qualname: Some(128),
            linetable: 136,
            code_units: 192,
            ascii_size: 40,
            compact_size: 56,
        },
        instr: InstrField::Pointer,
        entry: EntryMarker::CStackOwner(3),
        linetable: LineTableFormat::Locations311,
    },
    VersionOffsets {
        major: 3,
        minor: 13,
        probe: PyProcess {
            runtime_interp_head: 632,
            interp_tstate_head: 7344,
            tstate_next: 8,
            tstate_native_tid: 160,
            tstate_frame: 72,
            frame_previous: 8,
            frame_code: 0,
            frame_instr: 56,
            frame_flag: 70,
            ..probe(0x030d)
        },
        code: CodeOffsets {
            firstlineno: 68,
            filename: 112,
            name: 120,
            qualname: Some(128),
            linetable: 136,
            code_units: 200,
            ascii_size: 40,
            compact_size: 56,
        },
        instr: InstrField::Pointer,
        entry: EntryMarker::CStackOwner(3),
        linetable: LineTableFormat::Locations311,
    },
];

/// The offsets of CPython `major.minor`, when supported.
pub fn for_version(major: u8, minor: u8) -> Option<&'static VersionOffsets> {
    VERSIONS
        .iter()
        .find(|v| v.major == major && v.minor == minor)
}

/// The probe's entry for an interpreter whose `_PyRuntime` is at `runtime`.
pub fn probe_entry(offsets: &VersionOffsets, runtime: u64) -> PyProcess {
    PyProcess {
        runtime,
        ..offsets.probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_has_the_offsets_its_walk_needs() {
        for v in VERSIONS {
            let p = &v.probe;
            assert_eq!(p.version, (v.major as u32) << 8 | v.minor as u32);
            for (name, off) in [
                ("tstate_frame", p.tstate_frame),
                ("frame_previous", p.frame_previous),
                ("frame_code", p.frame_code),
                ("frame_instr", p.frame_instr),
            ] {
                assert_ne!(off, PY_NO_OFFSET, "{}.{} {name}", v.major, v.minor);
            }
            match p.tstate_mode {
                py_tstate::GIL_HOLDER => assert_ne!(p.runtime_tstate_current, PY_NO_OFFSET),
                py_tstate::BY_PTHREAD => {
                    assert_ne!(p.runtime_interp_head, PY_NO_OFFSET);
                    assert_ne!(p.tstate_pthread, PY_NO_OFFSET);
                    // The fallback without BTF.
                    assert_ne!(p.runtime_tstate_current, PY_NO_OFFSET);
                }
                _ => {
                    assert_ne!(p.runtime_interp_head, PY_NO_OFFSET);
                    assert_ne!(p.tstate_native_tid, PY_NO_OFFSET);
                }
            }
            assert_eq!(
                p.frame_flag == PY_NO_OFFSET,
                v.entry == EntryMarker::EveryFrame
            );
            // The probe reads a frame's four fields at once, or not at all.
            let window = p.frame_window();
            assert!(window.is_some(), "{}.{}: {p:?}", v.major, v.minor);
        }
        assert!(for_version(3, 11).is_some());
        assert!(for_version(3, 9).is_none());
    }

    #[test]
    fn a_frame_window_spans_the_fields_from_the_lowest_to_the_flag() {
        let v312 = for_version(3, 12).unwrap().probe;
        // code at 0, previous at 8, instruction at 56, owner byte at 70.
        assert_eq!(v312.frame_window(), Some((0, 71)));
        let v310 = for_version(3, 10).unwrap().probe;
        // f_back at 24 to f_lasti at 96, no flag.
        assert_eq!(v310.frame_window(), Some((24, 80)));
        let misaligned = PyProcess {
            frame_instr: v312.frame_instr + 4,
            ..v312
        };
        assert_eq!(misaligned.frame_window(), None);
        let too_wide = PyProcess {
            frame_instr: 128,
            ..v312
        };
        assert_eq!(too_wide.frame_window(), None);
    }
}
