//! Member offsets of kernel structs from the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`), for the few fields a probe reads by offset.
//!
//! Only what that needs is parsed: the header, then the type records in
//! order (a type's id is its position, from 1), skipping each kind's
//! trailing data; a struct's name and members are read where a lookup
//! asks for them.
const BTF_MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

/// Why an offset could not be found.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    #[error("not BTF data (bad magic or header)")]
    BadHeader,
    #[error("BTF data is truncated at byte {0}")]
    Truncated(usize),
    #[error("BTF type kind {kind} of type {id} is unknown")]
    UnknownKind { id: u32, kind: u32 },
    #[error("struct {0} not found in the kernel's BTF")]
    NoStruct(String),
    #[error("struct {strukt} has no member {member}")]
    NoMember { strukt: String, member: String },
}

/// The type records of a BTF blob, found by id; names and members are
/// read from the blob only when looked up (this VM's vmlinux has 125,850
/// types and 67,040 struct and union members; the probes need a dozen).
#[derive(Debug)]
pub struct KernelTypes<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Type id → byte position of its record in `types` (id 0 is void).
    positions: Vec<u32>,
}

/// A struct or union record: where its members start, how many, and
/// whether their offsets use the bitfield encoding.
#[derive(Clone, Copy)]
struct Composite {
    name_off: u32,
    kind: u32,
    members_at: usize,
    vlen: usize,
    kind_flag: bool,
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, BtfError> {
    let bytes = data.get(at..at + 4).ok_or(BtfError::Truncated(at))?;
    Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// The NUL-terminated name at `offset` of the string section.
fn name_at(strings: &[u8], offset: u32) -> &[u8] {
    let Some(rest) = strings.get(offset as usize..) else {
        return &[];
    };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    &rest[..end]
}

impl<'a> KernelTypes<'a> {
    /// Indexes a little-endian BTF blob: the header, then each type
    /// record's position (a type's id is its place, from 1), checking
    /// that every record and its trailing data are inside the blob.
    pub fn parse(data: &'a [u8]) -> Result<Self, BtfError> {
        let magic = data.get(0..2).ok_or(BtfError::BadHeader)?;
        if u16::from_le_bytes([magic[0], magic[1]]) != BTF_MAGIC {
            return Err(BtfError::BadHeader);
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let type_off = u32_at(data, 8)? as usize;
        let type_len = u32_at(data, 12)? as usize;
        let str_off = u32_at(data, 16)? as usize;
        let str_len = u32_at(data, 20)? as usize;
        let types_start = hdr_len.checked_add(type_off).ok_or(BtfError::BadHeader)?;
        let types = data
            .get(types_start..types_start + type_len)
            .ok_or(BtfError::Truncated(types_start))?;
        let strings_start = hdr_len.checked_add(str_off).ok_or(BtfError::BadHeader)?;
        let strings = data
            .get(strings_start..strings_start + str_len)
            .ok_or(BtfError::Truncated(strings_start))?;

        let mut positions = vec![0];
        let mut at = 0usize;
        while at < types.len() {
            let id = positions.len() as u32;
            let info = u32_at(types, at + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => vlen * 12,
                KIND_ENUM | KIND_FUNC_PROTO => vlen * 8,
                2 | 7..=12 | 16 | 18 => 0,
                _ => return Err(BtfError::UnknownKind { id, kind }),
            };
            let next = at + 12 + extra;
            if next > types.len() {
                return Err(BtfError::Truncated(types_start + at));
            }
            positions.push(at as u32);
            at = next;
        }
        Ok(Self {
            types,
            strings,
            positions,
        })
    }

    /// The struct or union of id `type_id` (None for other kinds).
    fn composite(&self, type_id: u32) -> Option<Composite> {
        let at = *self.positions.get(type_id as usize)? as usize;
        if type_id == 0 {
            return None;
        }
        let name_off = u32_at(self.types, at).ok()?;
        let info = u32_at(self.types, at + 4).ok()?;
        let kind = (info >> 24) & 0x1f;
        (kind == KIND_STRUCT || kind == KIND_UNION).then_some(Composite {
            name_off,
            kind,
            members_at: at + 12,
            vlen: (info & 0xffff) as usize,
            kind_flag: info >> 31 == 1,
        })
    }

    /// The first struct named `name` that has members (forward
    /// declarations left out).
    fn struct_named(&self, name: &str) -> Option<u32> {
        (1..self.positions.len() as u32).find(|&id| {
            self.composite(id).is_some_and(|c| {
                c.kind == KIND_STRUCT
                    && c.vlen > 0
                    && name_at(self.strings, c.name_off) == name.as_bytes()
            })
        })
    }

    /// The byte offset of `path` (members, outermost first) inside struct
    /// `strukt`, e.g. `("task_struct", ["thread", "fsbase"])`. Members of
    /// anonymous structs and unions are searched through.
    pub fn offset_of(&self, strukt: &str, path: &[&str]) -> Result<u32, BtfError> {
        let mut type_id = self
            .struct_named(strukt)
            .ok_or_else(|| BtfError::NoStruct(strukt.to_string()))?;
        let mut bits = 0u32;
        let mut owner = strukt;
        for &name in path {
            let (member_bits, member_type) =
                self.find_member(type_id, name)
                    .ok_or_else(|| BtfError::NoMember {
                        strukt: owner.to_string(),
                        member: name.to_string(),
                    })?;
            bits += member_bits;
            type_id = member_type;
            owner = name;
        }
        Ok(bits / 8)
    }

    /// `name` in the struct/union `type_id` or its anonymous members:
    /// (bit offset, type id). Typedefs and qualifiers are not followed:
    /// the members used here are plain.
    fn find_member(&self, type_id: u32, name: &str) -> Option<(u32, u32)> {
        let composite = self.composite(type_id)?;
        let members = (0..composite.vlen).filter_map(|i| {
            let at = composite.members_at + i * 12;
            let offset = u32_at(self.types, at + 8).ok()?;
            Some((
                u32_at(self.types, at).ok()?,
                u32_at(self.types, at + 4).ok()?,
                // With kind_flag the top 8 bits are a bitfield size.
                if composite.kind_flag {
                    offset & 0x00ff_ffff
                } else {
                    offset
                },
            ))
        });
        let mut anonymous = Vec::new();
        for (name_off, member_type, bit_offset) in members {
            let member_name = name_at(self.strings, name_off);
            if member_name == name.as_bytes() {
                return Some((bit_offset, member_type));
            }
            if member_name.is_empty() {
                anonymous.push((bit_offset, member_type));
            }
        }
        anonymous.into_iter().find_map(|(bit_offset, member_type)| {
            let (bits, ty) = self.find_member(member_type, name)?;
            Some((bit_offset + bits, ty))
        })
    }
}

/// The offsets the probes read by, looked up in one parse of the running
/// kernel's BTF (a few MB: reading and parsing it took longer than most
/// programs' verification, and it was done once per lookup).
struct KernelOffsets {
    task_pid: Result<u32, BtfError>,
    task_fsbase: Result<u32, BtfError>,
    block: Result<storprof_common::BlockLayout, BtfError>,
}

/// The running kernel's BTF: mapped where the kernel allows it (6.15 and
/// later), which spares a copy of its ~5 MB at every start, else read.
fn read_vmlinux_btf() -> std::io::Result<VmlinuxBtf> {
    const PATH: &str = "/sys/kernel/btf/vmlinux";
    let mut file = std::fs::File::open(PATH)?;
    // A private mapping: the kernel refuses shared ones of this file.
    // SAFETY: the kernel's BTF is read-only and never changes while the
    // system runs, so the mapping cannot change under the slice.
    match unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) } {
        Ok(map) => Ok(VmlinuxBtf::Mapped(map)),
        Err(_) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)?;
            Ok(VmlinuxBtf::Read(bytes))
        }
    }
}

/// The bytes of `/sys/kernel/btf/vmlinux`, mapped or read.
enum VmlinuxBtf {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for VmlinuxBtf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Read(bytes) => bytes,
        }
    }
}

/// [`KernelOffsets`] of the running kernel, read on first use.
fn kernel_offsets() -> &'static KernelOffsets {
    static OFFSETS: std::sync::OnceLock<KernelOffsets> = std::sync::OnceLock::new();
    OFFSETS.get_or_init(|| {
        let data = read_vmlinux_btf();
        let types = data
            .as_deref()
            .map_err(|_| BtfError::BadHeader)
            .and_then(KernelTypes::parse);
        match types {
            Ok(types) => KernelOffsets {
                task_pid: types.offset_of("task_struct", &["pid"]),
                task_fsbase: types.offset_of("task_struct", &["thread", "fsbase"]),
                block: types.block_layout(),
            },
            Err(err) => KernelOffsets {
                task_pid: Err(err.clone()),
                task_fsbase: Err(err.clone()),
                block: Err(err),
            },
        }
    })
}

/// The byte offset of `task_struct.thread.fsbase` in the running kernel
/// (x86_64: the user FS base, which glibc's `pthread_self()` returns).
pub fn task_fsbase_offset() -> Result<u32, BtfError> {
    kernel_offsets().task_fsbase.clone()
}

/// The byte offset of `task_struct.pid` (the thread id) in the running kernel.
pub fn task_pid_offset() -> Result<u32, BtfError> {
    kernel_offsets().task_pid.clone()
}

/// Where `struct request`'s fields are in the running kernel, for the block
/// raw tracepoints.
pub fn block_layout() -> Result<storprof_common::BlockLayout, BtfError> {
    kernel_offsets().block.clone()
}

impl KernelTypes<'_> {
    /// [`block_layout`] from parsed types.
    pub fn block_layout(&self) -> Result<storprof_common::BlockLayout, BtfError> {
        Ok(storprof_common::BlockLayout {
            request_queue: self.offset_of("request", &["q"])?,
            request_cmd_flags: self.offset_of("request", &["cmd_flags"])?,
            request_data_len: self.offset_of("request", &["__data_len"])?,
            request_sector: self.offset_of("request", &["__sector"])?,
            queue_disk: self.offset_of("request_queue", &["disk"])?,
            disk_major: self.offset_of("gendisk", &["major"])?,
            disk_first_minor: self.offset_of("gendisk", &["first_minor"])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with: 1 int, 2 struct inner { a @0, fsbase @64 bits },
    /// 3 an anonymous union { thread: inner @0 }, 4 struct outer { x @0,
    /// <3> @64 bits } (offsets in the bitfield encoding), laid out as the
    /// kernel writes it.
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0inner\0a\0fsbase\0outer\0x\0thread\0".to_vec();
        let s = |name: &str| -> u32 {
            let hay = std::str::from_utf8(&strings).unwrap();
            hay.find(&format!("\0{name}\0")).unwrap() as u32 + 1
        };
        let mut types = Vec::new();
        let mut push = |words: &[u32]| {
            for w in words {
                types.extend_from_slice(&w.to_le_bytes());
            }
        };
        // 1: int, size 4, encoding word.
        push(&[s("int"), KIND_INT << 24, 4, 32]);
        // 2: struct inner, 2 members.
        push(&[s("inner"), KIND_STRUCT << 24 | 2, 16]);
        push(&[s("a"), 1, 0]);
        push(&[s("fsbase"), 1, 64]);
        // 3: anonymous union with one member `thread`.
        push(&[0, KIND_UNION << 24 | 1, 16]);
        push(&[s("thread"), 2, 0]);
        // 4: struct outer { x @0, anon union @32 }, kind_flag set (bitfield encoding).
        push(&[s("outer"), 1 << 31 | KIND_STRUCT << 24 | 2, 24]);
        push(&[s("x"), 1, 0]);
        push(&[0, 3, 64]);
        let mut out = Vec::new();
        out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]); // version, flags
        out.extend_from_slice(&24u32.to_le_bytes()); // hdr_len
        out.extend_from_slice(&0u32.to_le_bytes()); // type_off
        out.extend_from_slice(&(types.len() as u32).to_le_bytes());
        out.extend_from_slice(&(types.len() as u32).to_le_bytes()); // str_off
        out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        out.extend_from_slice(&types);
        out.extend_from_slice(&strings);
        out
    }

    #[test]
    fn finds_a_member_through_an_anonymous_union() {
        let data = blob();
        let types = KernelTypes::parse(&data).unwrap();
        // outer.<anon>@64 bits + thread@0 + fsbase@64 bits = 16 bytes.
        assert_eq!(types.offset_of("outer", &["thread", "fsbase"]), Ok(16));
        assert_eq!(types.offset_of("inner", &["fsbase"]), Ok(8));
        assert_eq!(
            types.offset_of("outer", &["nope"]),
            Err(BtfError::NoMember {
                strukt: "outer".into(),
                member: "nope".into()
            })
        );
        assert_eq!(
            types.offset_of("missing", &["a"]),
            Err(BtfError::NoStruct("missing".into()))
        );
    }

    #[test]
    fn rejects_bad_and_truncated_data() {
        assert_eq!(
            KernelTypes::parse(b"nope").unwrap_err(),
            BtfError::BadHeader
        );
        let mut data = blob();
        data.truncate(40);
        assert!(matches!(
            KernelTypes::parse(&data),
            Err(BtfError::Truncated(_))
        ));
    }

    #[test]
    fn the_running_kernel_has_task_fsbase() {
        // Every x86_64 kernel with BTF has it; skip where there is no BTF.
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        }
        let offset = task_fsbase_offset().unwrap();
        assert!(offset > 0 && offset.is_multiple_of(8), "{offset}");
        let pid = task_pid_offset().unwrap();
        assert!(pid > 0 && pid.is_multiple_of(4), "{pid}");
        // `tgid` follows `pid`.
        let data = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
        let types = KernelTypes::parse(&data).unwrap();
        assert_eq!(types.offset_of("task_struct", &["tgid"]), Ok(pid + 4));
    }

    #[test]
    fn the_running_kernel_has_the_block_request_fields() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        }
        let layout = block_layout().unwrap();
        // `q` leads `struct request`; the others follow it, aligned.
        assert_eq!(layout.request_queue, 0);
        assert!(layout.request_sector > 0 && layout.request_sector.is_multiple_of(8));
        assert!(layout.request_data_len > 0 && layout.request_data_len.is_multiple_of(4));
        assert!(layout.request_cmd_flags > 0 && layout.queue_disk > 0);
        assert_eq!(layout.disk_first_minor, layout.disk_major + 4, "{layout:?}");
    }
}
