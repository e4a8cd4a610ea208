//! The NBD protocol's constants and wire formats (the protocol document of the NBD project,
//! `doc/proto.md`): fixed newstyle negotiation, option replies, and the transmission phase's
//! requests, simple replies and structured reply chunks. All integers are big-endian.

/// `NBDMAGIC`: the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle negotiation, and the magic of every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// The magic of every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// The magic of a request in the transmission phase.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// The magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// The magic of a structured reply chunk (only once `NBD_OPT_STRUCTURED_REPLY` was negotiated).
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flags (server): the 124 zero bytes after `NBD_OPT_EXPORT_NAME` may be left out.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flags.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const TF_HAS_FLAGS: u16 = 1 << 0;
/// The export is read-only.
pub const TF_READ_ONLY: u16 = 1 << 1;
/// `NBD_CMD_FLUSH` is supported.
pub const TF_SEND_FLUSH: u16 = 1 << 2;
/// `NBD_CMD_FLAG_FUA` is supported.
pub const TF_SEND_FUA: u16 = 1 << 3;
/// The export is rotational.
pub const TF_ROTATIONAL: u16 = 1 << 4;
/// `NBD_CMD_FLAG_DF` is supported on reads (only with structured replies).
pub const TF_SEND_DF: u16 = 1 << 7;
/// `NBD_CMD_TRIM` is supported.
pub const TF_SEND_TRIM: u16 = 1 << 5;
/// `NBD_CMD_WRITE_ZEROES` is supported.
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Flush and FUA on one connection are visible on every connection (no server-side cache).
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
/// Options.
pub const OPT_ABORT: u32 = 2;
/// Options.
pub const OPT_LIST: u32 = 3;
/// Options.
pub const OPT_STARTTLS: u32 = 5;
/// Options.
pub const OPT_INFO: u32 = 6;
/// Options.
pub const OPT_GO: u32 = 7;
/// Options.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// Options.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// Options.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// The options this server knows (it answers `NBD_OPT_STARTTLS` with a refusal by policy): any
/// other is answered with `NBD_REP_ERR_UNSUP`, whatever its length.
pub const KNOWN_OPTIONS: [u32; 9] = [
    OPT_EXPORT_NAME,
    OPT_ABORT,
    OPT_LIST,
    OPT_STARTTLS,
    OPT_INFO,
    OPT_GO,
    OPT_STRUCTURED_REPLY,
    OPT_LIST_META_CONTEXT,
    OPT_SET_META_CONTEXT,
];

/// Option replies.
pub const REP_ACK: u32 = 1;
/// Option replies.
pub const REP_SERVER: u32 = 2;
/// Option replies.
pub const REP_INFO: u32 = 3;
/// Option replies: one metadata context (its id and name).
pub const REP_META_CONTEXT: u32 = 4;
/// Option error replies (bit 31 set).
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
/// Option error replies.
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
/// Option error replies.
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// Option error replies: no export of that name.
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
/// Option error replies: the server is shutting down.
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;
/// Option error replies: the option's data is more than the server takes.
pub const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;

/// Information types of `NBD_REP_INFO`.
pub const INFO_EXPORT: u16 = 0;
/// Information types.
pub const INFO_NAME: u16 = 1;
/// Information types.
pub const INFO_DESCRIPTION: u16 = 2;
/// Information types.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Commands.
pub const CMD_READ: u16 = 0;
/// Commands.
pub const CMD_WRITE: u16 = 1;
/// Commands.
pub const CMD_DISC: u16 = 2;
/// Commands.
pub const CMD_FLUSH: u16 = 3;
/// Commands.
pub const CMD_TRIM: u16 = 4;
/// `NBD_CMD_CACHE` (not supported: `NBD_FLAG_SEND_CACHE` is not advertised).
pub const CMD_CACHE: u16 = 5;
/// Commands.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// Commands (only with a metadata context selected).
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Command flags: forced unit access.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flags: a write-zeroes must not leave a hole (this server's zeroes are written either way
/// the file system allows: it may punch a hole, which the flag asks it not to prefer).
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flags: "don't fragment", at most one content chunk in a read's structured reply.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Command flags: one extent per metadata context in a block status reply.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// The command flags a request of `command` may carry (NBD protocol, "Command flags"): FUA on any
/// command (`NBD_FLAG_SEND_FUA` is advertised), DF on a read once structured replies are
/// negotiated, NO_HOLE on write-zeroes, REQ_ONE on block status. Not FAST_ZERO: it is not advertised.
pub fn command_flags_allowed(command: u16, structured: bool) -> u16 {
    CMD_FLAG_FUA
        | match command {
            CMD_READ if structured => CMD_FLAG_DF,
            CMD_WRITE_ZEROES => CMD_FLAG_NO_HOLE,
            CMD_BLOCK_STATUS => CMD_FLAG_REQ_ONE,
            _ => 0,
        }
}

/// Structured reply flags: the last chunk of a reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Structured reply types: no payload (success, unless an error chunk came before).
pub const REPLY_TYPE_NONE: u16 = 0;
/// Structured reply types: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Structured reply types: extents of one metadata context.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Structured reply types: an error, with a message for a person.
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
/// Structured reply types: an error at an offset within the request (unused by this server: it
/// never answers part of a request).
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;

/// The one metadata context this server offers: whether extents are allocated.
pub const CONTEXT_BASE_ALLOCATION: &str = "base:allocation";
/// `base:allocation` status flags: a hole (not allocated).
pub const STATE_HOLE: u32 = 1 << 0;
/// `base:allocation` status flags: reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

/// Error values of replies (the protocol's own numbering, equal to Linux errno values).
pub const EPERM: u32 = 1;
/// I/O error.
pub const EIO: u32 = 5;
/// Out of memory.
pub const ENOMEM: u32 = 12;
/// Invalid request.
pub const EINVAL: u32 = 22;
/// Write beyond the end.
pub const ENOSPC: u32 = 28;
/// Value too large.
pub const EOVERFLOW: u32 = 75;
/// Not supported.
pub const ENOTSUP: u32 = 95;
/// The server is shutting down.
pub const ESHUTDOWN: u32 = 108;

/// The largest request payload this server takes (advertised as the maximum block size).
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// The longest option this server reads (export names are at most 4096 bytes).
pub const MAX_OPTION: u32 = 64 << 10;
/// The longest string the protocol allows (error messages in error chunks, among others).
pub const MAX_STRING: usize = 4096;

/// One request of the transmission phase (its 28-byte header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags.
    pub flags: u16,
    /// Command.
    pub command: u16,
    /// The client's handle, echoed in the reply.
    pub handle: u64,
    /// Offset in the export.
    pub offset: u64,
    /// Length.
    pub length: u32,
}

impl RequestHeader {
    /// Parses a header; `None` if the magic is wrong (the connection cannot be resynchronised).
    pub fn parse(b: &[u8; 28]) -> Option<RequestHeader> {
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        (u32_at(0) == REQUEST_MAGIC).then(|| RequestHeader {
            flags: u16::from_be_bytes([b[4], b[5]]),
            command: u16::from_be_bytes([b[6], b[7]]),
            handle: u64_at(8),
            offset: u64_at(16),
            length: u32_at(24),
        })
    }
}

/// A simple reply's 16-byte header.
pub fn simple_reply(error: u32, handle: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..].copy_from_slice(&handle.to_be_bytes());
    b
}

/// A structured reply chunk's 20-byte header; `length` bytes of payload follow it.
pub fn chunk_header(flags: u16, kind: u16, handle: u64, length: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..].copy_from_slice(&length.to_be_bytes());
    b
}

/// The final chunk of a reply that failed: `NBD_REPLY_TYPE_ERROR` with `NBD_REPLY_FLAG_DONE`, the
/// error and a message for a person (cut to the protocol's 4096 bytes, at a character boundary).
pub fn error_chunk(handle: u64, error: u32, message: &str) -> Vec<u8> {
    let mut cut = message.len().min(MAX_STRING);
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let message = &message.as_bytes()[..cut];
    let mut b = Vec::with_capacity(26 + message.len());
    b.extend_from_slice(&chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, handle, 6 + message.len() as u32));
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(message.len() as u16).to_be_bytes());
    b.extend_from_slice(message);
    b
}

/// The final chunk of a block status reply: one metadata context's extents, each (length, flags).
pub fn block_status_chunk(handle: u64, context: u32, extents: &[(u32, u32)]) -> Vec<u8> {
    let length = 4 + 8 * extents.len();
    let mut b = Vec::with_capacity(20 + length);
    b.extend_from_slice(&chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_BLOCK_STATUS, handle, length as u32));
    b.extend_from_slice(&context.to_be_bytes());
    for (len, flags) in extents {
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&flags.to_be_bytes());
    }
    b
}

/// An option reply: header and data.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// The data of `NBD_OPT_INFO` / `NBD_OPT_GO`: the export name (`None` if it is not UTF-8: then it
/// names no export, which the protocol answers with `NBD_REP_ERR_UNKNOWN`, not as a malformed
/// request) and the information types asked for; `None` if a length points past the data or
/// something is left over.
pub fn parse_info_request(data: &[u8]) -> Option<(Option<String>, Vec<u16>)> {
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4 + name_len)?;
    let rest = data.get(4 + name_len..)?;
    let count = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let infos = rest.get(2..)?;
    if infos.len() != count * 2 {
        return None;
    }
    let infos = infos.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    Some((String::from_utf8(name.to_vec()).ok(), infos))
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`: the export name and the
/// queries; `None` if a length points past the data, something is left over, or a string is not
/// UTF-8.
pub fn parse_meta_context_request(data: &[u8]) -> Option<(String, Vec<String>)> {
    let u32_at = |at: usize| -> Option<usize> {
        Some(u32::from_be_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?) as usize)
    };
    let string_at = |at: usize, len: usize| -> Option<String> {
        String::from_utf8(data.get(at..at.checked_add(len)?)?.to_vec()).ok()
    };
    let name_len = u32_at(0)?;
    let name = string_at(4, name_len)?;
    let mut at = 4 + name_len;
    let count = u32_at(at)?;
    at += 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        let len = u32_at(at)?;
        queries.push(string_at(at + 4, len)?);
        at += 4 + len;
    }
    (at == data.len()).then_some((name, queries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_header_parses_and_a_bad_magic_is_refused() {
        let mut b = [0u8; 28];
        b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&CMD_FLAG_FUA.to_be_bytes());
        b[6..8].copy_from_slice(&CMD_WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[16..24].copy_from_slice(&4096u64.to_be_bytes());
        b[24..].copy_from_slice(&512u32.to_be_bytes());
        let h = RequestHeader::parse(&b).unwrap();
        assert_eq!((h.flags, h.command, h.handle, h.offset, h.length), (1, 1, 7, 4096, 512));
        b[0] = 0;
        assert!(RequestHeader::parse(&b).is_none());
    }

    #[test]
    fn info_requests_must_have_the_lengths_they_announce() {
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"vm1");
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(parse_info_request(&d), Some((Some("vm1".into()), vec![INFO_BLOCK_SIZE])));
        let mut latin1 = d.clone();
        latin1[5] = 0xe9;
        assert_eq!(parse_info_request(&latin1), Some((None, vec![INFO_BLOCK_SIZE])));
        assert_eq!(parse_info_request(&d[..d.len() - 1]), None);
        let mut long = d.clone();
        long[3] = 200;
        assert_eq!(parse_info_request(&long), None);
    }

    #[test]
    fn structured_chunks_have_the_protocols_layout() {
        let h = chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, 0x0102_0304_0506_0708, 4104);
        assert_eq!(&h[..4], &[0x66, 0x8e, 0x33, 0xef]);
        assert_eq!(&h[4..8], &[0, 1, 0, 1]);
        assert_eq!(&h[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&h[16..], &4104u32.to_be_bytes());
        let e = error_chunk(9, EINVAL, "past the end");
        assert_eq!(&e[4..8], &[0, 1, 0x80, 1]);
        assert_eq!(u32::from_be_bytes(e[16..20].try_into().unwrap()), 6 + 12);
        assert_eq!(&e[20..24], &EINVAL.to_be_bytes());
        assert_eq!(&e[24..26], &12u16.to_be_bytes());
        assert_eq!(&e[26..], b"past the end");
        // A message longer than the protocol's strings is cut, never split inside a character.
        let long = "é".repeat(3000);
        let e = error_chunk(9, EIO, &long);
        let n = u16::from_be_bytes([e[24], e[25]]) as usize;
        assert_eq!(n, 4096);
        assert!(std::str::from_utf8(&e[26..]).is_ok());
        let b = block_status_chunk(3, 1, &[(4096, 0), (8192, STATE_HOLE | STATE_ZERO)]);
        assert_eq!(&b[4..8], &[0, 1, 0, 5]);
        assert_eq!(u32::from_be_bytes(b[16..20].try_into().unwrap()), 4 + 16);
        assert_eq!(&b[20..], &[0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn meta_context_requests_must_have_the_lengths_they_announce() {
        let mut d = Vec::new();
        d.extend_from_slice(&1u32.to_be_bytes());
        d.extend_from_slice(b"a");
        d.extend_from_slice(&2u32.to_be_bytes());
        for q in ["base:allocation", "qemu:dirty-bitmap:x"] {
            d.extend_from_slice(&(q.len() as u32).to_be_bytes());
            d.extend_from_slice(q.as_bytes());
        }
        assert_eq!(
            parse_meta_context_request(&d),
            Some(("a".into(), vec!["base:allocation".into(), "qemu:dirty-bitmap:x".into()]))
        );
        assert_eq!(parse_meta_context_request(&d[..d.len() - 1]), None);
        let mut extra = d.clone();
        extra.push(0);
        assert_eq!(parse_meta_context_request(&extra), None);
        let mut huge = d.clone();
        huge[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(parse_meta_context_request(&huge), None);
        assert_eq!(parse_meta_context_request(&[0, 0, 0, 0, 0, 0, 0, 0]), Some((String::new(), vec![])));
        assert_eq!(parse_meta_context_request(&[]), None);
    }
}
