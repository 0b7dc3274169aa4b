//! The few pieces of the protobuf wire format that `profile.proto` needs:
//! varints, length-delimited fields (strings, nested messages, packed
//! repeated integers). A message is encoded into its own buffer, then
//! written into its parent as bytes, so no size has to be known ahead.
//!
//! ```text
//! Message::uint / int / string / packed / message ──► Message::bytes
//! ```

/// Wire type of varint fields (int64, uint64, bool).
const VARINT: u64 = 0;
/// Wire type of length-delimited fields (string, bytes, messages, packed).
const LEN: u64 = 2;

/// One message being encoded.
#[derive(Clone, Debug, Default)]
pub struct Message {
    bytes: Vec<u8>,
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // Low seven bits, with the continuation bit set.
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

impl Message {
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&mut self, field: u32, wire_type: u64) {
        put_varint(&mut self.bytes, (u64::from(field) << 3) | wire_type);
    }

    /// A uint64 field; zero is proto3's default and is left out.
    pub fn uint(&mut self, field: u32, value: u64) -> &mut Self {
        if value != 0 {
            self.key(field, VARINT);
            put_varint(&mut self.bytes, value);
        }
        self
    }

    /// An int64 field (two's complement varint, as protobuf encodes it);
    /// zero is left out.
    pub fn int(&mut self, field: u32, value: i64) -> &mut Self {
        self.uint(field, value as u64)
    }

    /// A length-delimited field holding `payload`, even when empty (a
    /// repeated string keeps its place: the string table's "" at index 0).
    pub fn len_delimited(&mut self, field: u32, payload: &[u8]) -> &mut Self {
        self.key(field, LEN);
        put_varint(&mut self.bytes, payload.len() as u64);
        self.bytes.extend_from_slice(payload);
        self
    }

    pub fn string(&mut self, field: u32, value: &str) -> &mut Self {
        self.len_delimited(field, value.as_bytes())
    }

    /// A nested message.
    pub fn message(&mut self, field: u32, message: &Message) -> &mut Self {
        self.len_delimited(field, &message.bytes)
    }

    /// A packed repeated integer field; none at all is left out.
    pub fn packed(&mut self, field: u32, values: impl IntoIterator<Item = u64>) -> &mut Self {
        let mut payload = Vec::new();
        for v in values {
            put_varint(&mut payload, v);
        }
        if !payload.is_empty() {
            self.len_delimited(field, &payload);
        }
        self
    }

    /// The encoded message.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    /// Values from the protobuf encoding guide: 1, 150, and the widest.
    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        assert_eq!(varint(0), [0x00]);
        assert_eq!(varint(1), [0x01]);
        assert_eq!(varint(127), [0x7f]);
        assert_eq!(varint(150), [0x96, 0x01]);
        assert_eq!(varint(300), [0xac, 0x02]);
        assert_eq!(varint(u64::MAX).len(), 10);
        assert_eq!(*varint(u64::MAX).last().unwrap_or(&0), 0x01);
    }

    #[test]
    fn fields_carry_their_number_and_wire_type() {
        let mut m = Message::new();
        m.uint(1, 150).uint(2, 0).string(2, "testing");
        assert_eq!(
            m.into_bytes(),
            [
                0x08, 0x96, 0x01, // field 1 varint 150
                0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g' // field 2 "testing"
            ]
        );
        // Packed repeated 3, 270, 86942 (the guide's example), then a nested message.
        let mut inner = Message::new();
        inner.uint(1, 1);
        let mut m = Message::new();
        m.packed(4, [3, 270, 86942])
            .packed(5, [])
            .message(3, &inner);
        assert_eq!(
            m.into_bytes(),
            [
                0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05, // field 4 packed
                0x1a, 0x02, 0x08, 0x01 // field 3 message {1: 1}
            ]
        );
        let mut m = Message::new();
        m.int(1, -1).string(6, "");
        let bytes = m.into_bytes();
        assert_eq!(bytes.len(), 1 + 10 + 2, "{bytes:?}");
        assert_eq!(&bytes[11..], [0x32, 0x00]);
    }
}
