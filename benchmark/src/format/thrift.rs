//! Minimal Thrift compact protocol: a writer for the structs our Parquet
//! writer emits, and a bounds-checked reader (depth- and size-limited, so a
//! lying footer yields an error, never a panic or a huge allocation).

/// Compact-protocol type codes.
pub mod ty {
    pub const TRUE: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
}

/// Writes compact-protocol structs into a byte vector.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
    last: Vec<i16>,
    cur: i16,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn field(&mut self, id: i16, t: u8) {
        let delta = id - self.cur;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | t);
        } else {
            self.buf.push(t);
            self.zigzag(i64::from(id));
        }
        self.cur = id;
    }

    pub fn i32(&mut self, id: i16, v: i32) {
        self.field(id, ty::I32);
        self.zigzag(i64::from(v));
    }

    pub fn i64(&mut self, id: i16, v: i64) {
        self.field(id, ty::I64);
        self.zigzag(v);
    }

    /// A bool field (compact protocol encodes the value in the field type).
    pub fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { ty::TRUE } else { ty::FALSE });
    }

    /// An i8 (thrift `byte`) field.
    pub fn byte(&mut self, id: i16, v: i8) {
        self.field(id, ty::BYTE);
        self.buf.push(v as u8);
    }

    pub fn binary(&mut self, id: i16, v: &[u8]) {
        self.field(id, ty::BINARY);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Begin a nested struct field.
    pub fn begin_struct(&mut self, id: i16) {
        self.field(id, ty::STRUCT);
        self.begin();
    }

    /// Begin a struct value (list element or top-level).
    pub fn begin(&mut self) {
        self.last.push(self.cur);
        self.cur = 0;
    }

    /// End the current struct (writes STOP).
    pub fn end(&mut self) {
        self.buf.push(0);
        self.cur = self.last.pop().unwrap_or(0);
    }

    /// List field header; then write `n` elements of type `elem`.
    pub fn list(&mut self, id: i16, elem: u8, n: usize) {
        self.field(id, ty::LIST);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem);
        } else {
            self.buf.push(0xF0 | elem);
            self.varint(n as u64);
        }
    }

    /// List element: i32.
    pub fn elem_i32(&mut self, v: i32) {
        self.zigzag(i64::from(v));
    }

    /// List element: binary/string.
    pub fn elem_binary(&mut self, v: &[u8]) {
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
}

/// Why a compact-protocol read failed.
#[derive(Debug)]
pub struct ThriftError(pub String);

type R<T> = Result<T, ThriftError>;

#[cold]
fn err<T>(msg: impl Into<String>) -> R<T> {
    Err(ThriftError(msg.into()))
}

#[cold]
fn end_of_metadata() -> ThriftError {
    ThriftError("unexpected end of metadata".into())
}

/// Maximum struct nesting we accept (Parquet metadata nests ~6 deep).
const MAX_DEPTH: u32 = 32;

/// A bounds-checked compact-protocol reader over a byte slice.
pub struct Reader<'a> {
    data: &'a [u8],
    pub pos: usize,
    depth: u32,
}

/// A field header: id and compact type (0 = STOP).
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub id: i16,
    pub ty: u8,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            pos: 0,
            depth: 0,
        }
    }

    // The byte-level readers are inlined into the footer's field loop: a
    // dlrm footer is millions of fields, and a call per byte, returning a
    // `Result` through memory, was most of its parse time.
    #[inline]
    fn byte(&mut self) -> R<u8> {
        let Some(&b) = self.data.get(self.pos) else {
            return Err(end_of_metadata());
        };
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    fn varint(&mut self) -> R<u64> {
        // Most values (field ids, small counts, sizes under 128) are one byte.
        if let Some(&b) = self.data.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    /// A varint of two bytes or more: the bytes left are scanned as a
    /// slice (at most 10, the longest a u64 takes), not one `byte()` each.
    #[inline]
    fn varint_long(&mut self) -> R<u64> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let mut v = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            if i == 9 && b > 1 {
                return err("varint overflow");
            }
            v |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        if rest.len() < 10 {
            Err(end_of_metadata())
        } else {
            err("varint too long")
        }
    }

    #[inline]
    fn zigzag(&mut self) -> R<i64> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    #[inline]
    pub fn i64(&mut self) -> R<i64> {
        self.zigzag()
    }

    #[inline]
    pub fn i32(&mut self) -> R<i32> {
        i32::try_from(self.zigzag()?).or_else(|_| err("i32 out of range"))
    }

    #[inline]
    pub fn binary(&mut self) -> R<&'a [u8]> {
        let n = usize::try_from(self.varint()?).or_else(|_| err("length too large"))?;
        if n > self.data.len() - self.pos {
            return err(format!(
                "string of {n} bytes runs past the end of the metadata"
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn string(&mut self) -> R<String> {
        Ok(String::from_utf8_lossy(self.binary()?).into_owned())
    }

    /// Enter a struct (call `field` until STOP, then `leave`).
    #[inline]
    pub fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err("metadata nested too deeply");
        }
        Ok(())
    }

    #[inline]
    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Next field header of the current struct; `last` is the previous id.
    #[inline]
    pub fn field(&mut self, last: &mut i16) -> R<Field> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(Field { id: 0, ty: 0 });
        }
        let t = b & 0x0F;
        let delta = b >> 4;
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).or_else(|_| err("bad field id"))?
        } else {
            last.checked_add(i16::from(delta))
                .ok_or_else(|| ThriftError("bad field id".into()))?
        };
        *last = id;
        Ok(Field { id, ty: t })
    }

    /// List header: (element type, count). The count is checked against the
    /// remaining bytes (every element takes at least one byte, except bools
    /// in lists which also take one).
    #[inline]
    pub fn list(&mut self) -> R<(u8, usize)> {
        let b = self.byte()?;
        let t = b & 0x0F;
        let n = if b >> 4 == 15 {
            usize::try_from(self.varint()?).or_else(|_| err("list too long"))?
        } else {
            usize::from(b >> 4)
        };
        if n > self.data.len() - self.pos {
            return err(format!("list of {n} elements longer than the metadata"));
        }
        Ok((t, n))
    }

    /// Read a bool field value (compact encodes it in the type).
    pub fn bool_of(&self, f: Field) -> bool {
        f.ty == ty::TRUE
    }

    /// Skip a value of type `t`.
    #[inline]
    pub fn skip(&mut self, t: u8) -> R<()> {
        // Scalars (most skipped fields) here, containers out of line.
        match t {
            ty::TRUE | ty::FALSE => Ok(()),
            ty::I16 | ty::I32 | ty::I64 => self.varint().map(|_| ()),
            ty::BINARY => self.binary().map(|_| ()),
            _ => self.skip_other(t),
        }
    }

    #[inline(never)]
    fn skip_other(&mut self, t: u8) -> R<()> {
        match t {
            ty::TRUE | ty::FALSE => Ok(()),
            ty::BYTE => self.byte().map(|_| ()),
            ty::I16 | ty::I32 | ty::I64 => self.varint().map(|_| ()),
            ty::DOUBLE => {
                if self.data.len() - self.pos < 8 {
                    return err("unexpected end of metadata");
                }
                self.pos += 8;
                Ok(())
            }
            ty::BINARY => self.binary().map(|_| ()),
            ty::LIST | ty::SET => {
                let (et, n) = self.list()?;
                self.enter()?;
                match et {
                    // Elements of one byte or one varint each (Parquet's
                    // encodings lists) and strings (path_in_schema): tight loops.
                    ty::TRUE | ty::FALSE | ty::BYTE => {
                        for _ in 0..n {
                            self.byte()?;
                        }
                    }
                    ty::I16 | ty::I32 | ty::I64 => {
                        for _ in 0..n {
                            self.varint()?;
                        }
                    }
                    ty::BINARY => {
                        for _ in 0..n {
                            self.binary()?;
                        }
                    }
                    _ => {
                        for _ in 0..n {
                            self.skip(et)?;
                        }
                    }
                }
                self.leave();
                Ok(())
            }
            ty::MAP => {
                let n = usize::try_from(self.varint()?).or_else(|_| err("map too long"))?;
                if n == 0 {
                    return Ok(());
                }
                if n > self.data.len() - self.pos {
                    return err("map longer than the metadata");
                }
                let kv = self.byte()?;
                self.enter()?;
                for _ in 0..n {
                    self.skip(kv >> 4)?;
                    self.skip(kv & 0x0F)?;
                }
                self.leave();
                Ok(())
            }
            ty::STRUCT => {
                self.enter()?;
                let mut last = 0;
                loop {
                    let f = self.field(&mut last)?;
                    if f.ty == 0 {
                        break;
                    }
                    self.skip(f.ty)?;
                }
                self.leave();
                Ok(())
            }
            other => err(format!("unknown thrift type {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_fields() {
        let mut w = Writer::new();
        w.begin();
        w.i32(1, -5);
        w.i64(20, 1 << 40);
        w.binary(21, b"hi");
        w.list(22, ty::I32, 20);
        for i in 0..20 {
            w.elem_i32(i);
        }
        w.end();
        let mut r = Reader::new(&w.buf);
        r.enter().unwrap();
        let mut last = 0;
        let f = r.field(&mut last).unwrap();
        assert_eq!((f.id, f.ty), (1, ty::I32));
        assert_eq!(r.i32().unwrap(), -5);
        let f = r.field(&mut last).unwrap();
        assert_eq!(f.id, 20);
        assert_eq!(r.i64().unwrap(), 1 << 40);
        let f = r.field(&mut last).unwrap();
        assert_eq!(f.id, 21);
        assert_eq!(r.binary().unwrap(), b"hi");
        let f = r.field(&mut last).unwrap();
        assert_eq!(f.id, 22);
        r.skip(f.ty).unwrap();
        assert_eq!(r.field(&mut last).unwrap().ty, 0);
    }

    #[test]
    fn lying_lengths_are_errors() {
        // binary claiming 1000 bytes with 2 present
        let mut r = Reader::new(&[0xE8, 0x07, 1, 2]);
        assert!(r.binary().is_err());
        // list claiming 2^40 elements
        let mut r = Reader::new(&[0xF5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
        assert!(r.list().is_err());
        // deep nesting
        let deep = vec![0x1C; 100];
        let mut r = Reader::new(&deep);
        assert!(r.skip(ty::STRUCT).is_err());
    }
}
