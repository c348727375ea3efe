//! Rendering bytes: JSON strings (written by hand: the tool has no serde), base64 both ways, and
//! the escaped text of the human-readable dump.

/// Appends `bytes` as a JSON value: `null` when absent; a JSON string when they are valid
/// UTF-8; otherwise `{"base64":"..."}` (standard alphabet, padded), so that no byte is lost.
pub fn json_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.extend_from_slice(b"null"),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => json_string(out, text),
            Err(_) => {
                out.extend_from_slice(b"{\"base64\":\"");
                base64(out, bytes);
                out.extend_from_slice(b"\"}");
            }
        },
    }
}

/// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`
/// and friends or `\u00XX`; everything else as its UTF-8 bytes.
pub fn json_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for &byte in text.as_bytes() {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x00..0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
            // Bytes of multi-byte UTF-8 characters pass through: JSON text is UTF-8.
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

const HEX: &[u8; 16] = b"0123456789abcdef";
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `bytes` in base64 (RFC 4648, standard alphabet, with `=` padding).
pub fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    let sextet = |group: u32, shift: u32| BASE64[((group >> shift) & 0x3f) as usize];
    let mut chunks = bytes.chunks_exact(3);
    for chunk in &mut chunks {
        let group = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        out.extend_from_slice(&[
            sextet(group, 18),
            sextet(group, 12),
            sextet(group, 6),
            sextet(group, 0),
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let group = u32::from(a) << 16;
            out.extend_from_slice(&[sextet(group, 18), sextet(group, 12), b'=', b'=']);
        }
        [a, b] => {
            let group = u32::from(a) << 16 | u32::from(b) << 8;
            out.extend_from_slice(&[sextet(group, 18), sextet(group, 12), sextet(group, 6), b'=']);
        }
        _ => {}
    }
}

/// Decodes base64 as [`base64`] writes it (RFC 4648, standard alphabet); the `=` padding may be
/// left out. Anything else (another alphabet, whitespace, a length no encoding has) is an error
/// that says what is wrong.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let unpadded = text
        .strip_suffix("==")
        .or_else(|| text.strip_suffix('='))
        .unwrap_or(text);
    if !text.len().is_multiple_of(4) && unpadded.len() != text.len() {
        return Err("base64 with padding has a length that is a multiple of 4".to_owned());
    }
    let mut out = Vec::with_capacity(unpadded.len() / 4 * 3 + 2);
    let mut group = 0u32;
    let mut sextets = 0u32;
    for (at, byte) in unpadded.bytes().enumerate() {
        let sextet = match BASE64.iter().position(|&b| b == byte) {
            Some(sextet) => sextet as u32,
            None => {
                return Err(format!(
                    "{:?} at position {at} is not a base64 character (A-Z a-z 0-9 + /, then = padding)",
                    char::from(byte)
                ));
            }
        };
        group = group << 6 | sextet;
        sextets += 1;
        if sextets == 4 {
            out.extend_from_slice(&group.to_be_bytes()[1..]);
            group = 0;
            sextets = 0;
        }
    }
    match sextets {
        0 => {}
        2 => out.push((group >> 4) as u8),
        3 => out.extend_from_slice(&((group >> 2) as u16).to_be_bytes()),
        _ => {
            return Err(
                "base64 of that length cannot be decoded: a character is missing".to_owned(),
            );
        }
    }
    Ok(out)
}

/// `bytes` for a human: UTF-8 with invalid sequences replaced by U+FFFD, and control
/// characters escaped (`\n`, `\t`, `\r`, `\xNN`) so that one record stays on one line.
pub fn human(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && u32::from(c) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(bytes: Option<&[u8]>) -> String {
        let mut out = Vec::new();
        json_bytes(&mut out, bytes);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_escapes_what_json_requires() {
        assert_eq!(json(None), "null");
        assert_eq!(json(Some(b"")), r#""""#);
        assert_eq!(json(Some(b"a\"b\\c")), r#""a\"b\\c""#);
        assert_eq!(
            json(Some(b"\n\r\t\x08\x0c\x01\x1f")),
            r#""\n\r\t\b\f\u0001\u001f""#
        );
        assert_eq!(json(Some("é €".as_bytes())), "\"é €\"");
        assert_eq!(json(Some(b"\xff\x00")), r#"{"base64":"/wA="}"#);
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut out = Vec::new();
            base64(&mut out, input.as_bytes());
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{input:?}");
        }
    }

    #[test]
    fn base64_decodes_what_it_encodes() {
        for input in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"fooba",
            b"foobar",
            b"\0\n\xff",
        ] {
            let mut encoded = Vec::new();
            base64(&mut encoded, input);
            let encoded = String::from_utf8(encoded).unwrap();
            assert_eq!(base64_decode(&encoded).unwrap(), input, "{encoded}");
            assert_eq!(base64_decode(encoded.trim_end_matches('=')).unwrap(), input);
        }
        assert!(base64_decode("Zm9v!").unwrap_err().contains("'!'"));
        assert!(base64_decode("Z").unwrap_err().contains("missing"));
        assert!(base64_decode("Zg=").is_err());
        assert!(base64_decode("Zm 9v").is_err());
    }

    #[test]
    fn human_text_stays_on_one_line() {
        assert_eq!(human(b"a\nb\tc\\"), "a\\nb\\tc\\\\");
        assert_eq!(human(b"\x01\xff"), "\\x01\u{fffd}");
    }
}
