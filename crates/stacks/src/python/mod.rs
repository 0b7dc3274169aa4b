//! Python frames in native stacks (CPython 3.10–3.13).
//!
//! Data flow: when a traced process maps a CPython interpreter,
//! [`PythonResolver::detect`] finds `_PyRuntime` and the version in its
//! ELF symbols and picks that version's struct offsets ([`offsets`]); the
//! recorder registers them with the probe (`PY_PROCS`), which at each
//! DWARF-mode sample walks the sampled thread's frame chain and records
//! (code object, instruction, flag) per frame. [`PythonResolver::resolve`]
//! reads the code objects from the process's memory (cached) and names the
//! frames `function (file:LINE)`; [`decode::group_by_eval_call`] and
//! [`decode::splice`] put each eval call's Python frames in place of its
//! `_PyEval_EvalFrameDefault` native frame. Everything in [`decode`] and
//! [`offsets`] is pure and tested on recorded bytes.
pub mod decode;
pub mod offsets;
pub mod process;

pub use process::{Detection, Interpreter, PythonResolver};

#[cfg(test)]
mod fixture_tests {
    //! Code objects dumped from real interpreters by
    //! `tests/python/dump_code_fixture.py`, decoded here without them.
    use serde_json::Value;

    use super::{decode, offsets};

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn check(fixture: &str) {
        let fx: Value = serde_json::from_str(fixture).unwrap();
        let version = fx["version"].as_str().unwrap();
        let (major, minor) = version.split_once('.').unwrap();
        let table = offsets::for_version(major.parse().unwrap(), minor.parse().unwrap()).unwrap();
        let functions = fx["functions"].as_array().unwrap();
        assert!(!functions.is_empty());
        for f in functions {
            let code_bytes = hex(f["code_bytes"].as_str().unwrap());
            let fields = decode::parse_code(&table.code, &code_bytes).unwrap();
            assert_eq!(fields.name, f["name_addr"].as_u64().unwrap(), "{version}");
            assert_eq!(fields.filename, f["filename_addr"].as_u64().unwrap());
            assert_eq!(fields.qualname, f["qualname_addr"].as_u64());
            assert_eq!(fields.linetable, f["linetable_addr"].as_u64().unwrap());
            assert_eq!(
                fields.firstlineno as i64,
                f["firstlineno"].as_i64().unwrap()
            );
            // The code object's type pointer is PyCode_Type.
            assert_eq!(
                u64::from_le_bytes(code_bytes[8..16].try_into().unwrap()),
                fx["code_type_addr"].as_u64().unwrap()
            );

            let name_bytes = hex(f["name_bytes"].as_str().unwrap());
            let (data, len, kind) = decode::unicode_layout(&table.code, &name_bytes).unwrap();
            let start = data as usize;
            let name = decode::decode_chars(
                kind,
                &name_bytes[start..start + (len * kind as u64) as usize],
            );
            assert_eq!(name, f["name"].as_str().unwrap(), "{version}");

            let table_bytes = hex(f["linetable_bytes"].as_str().unwrap());
            let table_len = decode::bytes_len(&table_bytes).unwrap() as usize;
            let linetable = &table_bytes[32..32 + table_len];
            let lines = f["lines"].as_array().unwrap();
            assert!(lines.len() > 5);
            for pair in lines {
                let index = pair[0].as_u64().unwrap() as u32;
                let expected = pair[1].as_i64().map(|l| l as i32);
                let got =
                    decode::line_for_index(table.linetable, linetable, fields.firstlineno, index);
                assert_eq!(got, expected, "{version} {name} unit {index}");
            }
            // Instruction pointers of 3.11+ frames point into the code object.
            if table.instr == offsets::InstrField::Pointer {
                let addr = f["code_addr"].as_u64().unwrap();
                let at = addr + table.code.code_units + 2 * 3;
                assert_eq!(decode::instr_index(table, addr, at), Some(3));
            }
        }
    }

    #[test]
    fn decodes_cpython_310_code_objects() {
        check(include_str!("testdata/py310.json"));
    }

    #[test]
    fn decodes_cpython_311_code_objects() {
        check(include_str!("testdata/py311.json"));
    }

    #[test]
    fn decodes_cpython_312_code_objects() {
        check(include_str!("testdata/py312.json"));
    }

    #[test]
    fn decodes_cpython_313_code_objects() {
        check(include_str!("testdata/py313.json"));
    }
}
