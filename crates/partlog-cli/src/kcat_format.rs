//! kcat's `-f` format strings for `partlog consume`: `%o %k %s %T %h` and friends, with kcat's
//! backslash escapes, and its `-Z` null marker.

use partlog::LogRecord;

/// One piece of a parsed format string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Bytes printed as they are.
    Literal(Vec<u8>),
    /// `%t`: the topic, taken from the directory name as Kafka names partitions (`<topic>-<n>`).
    Topic,
    /// `%p`: the partition number, from the directory name (0 when it has none).
    Partition,
    /// `%o`.
    Offset,
    /// `%k`.
    Key,
    /// `%K`: the key's length, -1 for a null key.
    KeyLength,
    /// `%s`.
    Value,
    /// `%S`: the value's length, -1 for a null value.
    ValueLength,
    /// `%T`: the timestamp in milliseconds.
    Timestamp,
    /// `%h`: the headers, `k=v` joined by commas, as kcat prints them.
    Headers,
}

/// A parsed `-f` format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFormat {
    pieces: Vec<Piece>,
}

impl RecordFormat {
    /// Parses kcat's tokens (`%t %p %o %k %K %s %S %T %h %%`) and escapes (see [`unescape`]);
    /// anything else after `%` or `\` is an error naming it.
    pub fn parse(format: &str) -> Result<RecordFormat, String> {
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            match c {
                '%' => {
                    let piece = match chars.next() {
                        Some('%') => {
                            literal.push(b'%');
                            continue;
                        }
                        Some('t') => Piece::Topic,
                        Some('p') => Piece::Partition,
                        Some('o') => Piece::Offset,
                        Some('k') => Piece::Key,
                        Some('K') => Piece::KeyLength,
                        Some('s') => Piece::Value,
                        Some('S') => Piece::ValueLength,
                        Some('T') => Piece::Timestamp,
                        Some('h') => Piece::Headers,
                        Some(other) => {
                            return Err(format!(
                                "%{other} is not a format token; expected %t %p %o %k %K %s %S %T %h or %%"
                            ));
                        }
                        None => return Err("the format ends with a lone %".to_owned()),
                    };
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push(piece);
                }
                '\\' => literal.push(escaped_byte(&mut chars, "the format")?),
                other => {
                    let mut buf = [0u8; 4];
                    literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(RecordFormat { pieces })
    }

    /// Appends `record` as the format says. A null key or value prints `null_marker` (kcat's
    /// `-Z` prints `NULL`; without it, nothing), so that `-Z` tells null from empty.
    pub fn render(
        &self,
        out: &mut Vec<u8>,
        record: &LogRecord,
        topic: &str,
        partition: i64,
        null_marker: &[u8],
    ) {
        for piece in &self.pieces {
            match piece {
                Piece::Literal(bytes) => out.extend_from_slice(bytes),
                Piece::Topic => out.extend_from_slice(topic.as_bytes()),
                Piece::Partition => out.extend_from_slice(partition.to_string().as_bytes()),
                Piece::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Piece::Key => out.extend_from_slice(record.key.as_deref().unwrap_or(null_marker)),
                Piece::KeyLength => out.extend_from_slice(length(record.key.as_deref()).as_bytes()),
                Piece::Value => {
                    out.extend_from_slice(record.value.as_deref().unwrap_or(null_marker));
                }
                Piece::ValueLength => {
                    out.extend_from_slice(length(record.value.as_deref()).as_bytes());
                }
                Piece::Timestamp => out.extend_from_slice(record.timestamp.to_string().as_bytes()),
                Piece::Headers => {
                    for (n, (key, value)) in record.headers.iter().enumerate() {
                        if n > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(key.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(value.as_deref().unwrap_or(null_marker));
                    }
                }
            }
        }
    }
}

/// The bytes of a separator or delimiter given on the command line (`-D`, `-K`), with kcat's
/// escapes: `\n`, `\r`, `\t`, `\0`, `\xNN` (one byte, two hex digits) and `\\` for a backslash;
/// anything else is taken as it is written, and a string may be several bytes long. An unknown
/// escape is an error that names it. Empty is refused: it would separate nothing.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => bytes.push(escaped_byte(&mut chars, &format!("{text:?}"))?),
            other => {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    if bytes.is_empty() {
        return Err("a separator or delimiter must not be empty".to_owned());
    }
    Ok(bytes)
}

/// A separator or delimiter from the command line, its escapes decoded ([`unescape`]): the
/// value type of `-D`, `-K` and friends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Separator(pub Vec<u8>);

impl Separator {
    /// Parses a command-line value with [`unescape`].
    pub fn parse(text: &str) -> Result<Separator, String> {
        unescape(text).map(Separator)
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The byte of the escape whose backslash `chars` just passed, in `what` (for the error).
fn escaped_byte(chars: &mut std::str::Chars<'_>, what: &str) -> Result<u8, String> {
    match chars.next() {
        Some('n') => Ok(b'\n'),
        Some('r') => Ok(b'\r'),
        Some('t') => Ok(b'\t'),
        Some('0') => Ok(0),
        Some('\\') => Ok(b'\\'),
        Some('x') => {
            let digits: String = chars.by_ref().take(2).collect();
            match u8::from_str_radix(&digits, 16) {
                Ok(byte) if digits.len() == 2 => Ok(byte),
                _ => Err(format!(
                    "\\x{digits} in {what} is not a byte: \\x takes two hex digits, as in \\x1e"
                )),
            }
        }
        Some(other) => Err(format!(
            "\\{other} in {what} is not an escape; expected \\n \\r \\t \\0 \\xNN or \\\\"
        )),
        None => Err(format!(
            "{what} ends with a lone \\ (write \\\\ for a backslash)"
        )),
    }
}

fn length(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "-1".to_owned(), |b| b.len().to_string())
}

/// The topic and partition a Kafka partition directory's name gives (`orders-3` is topic
/// `orders`, partition 3); a name without a numeric suffix is the topic, partition 0.
pub fn topic_and_partition(dir: &std::path::Path) -> (String, i64) {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit_once('-') {
        Some((topic, partition)) if !topic.is_empty() => match partition.parse::<i64>() {
            Ok(partition) if partition >= 0 => (topic.to_owned(), partition),
            _ => (name, 0),
        },
        _ => (name, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partlog::TimestampType;

    fn record(key: Option<&[u8]>, value: Option<&[u8]>) -> LogRecord {
        LogRecord {
            offset: 42,
            timestamp: 1_700_000_000_000,
            timestamp_type: TimestampType::CreateTime,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: vec![
                ("a".to_owned(), Some(b"1".to_vec())),
                ("b".to_owned(), None),
            ],
        }
    }

    fn render(format: &str, record: &LogRecord, null: &[u8]) -> String {
        let mut out = Vec::new();
        RecordFormat::parse(format)
            .unwrap()
            .render(&mut out, record, "orders", 3, null);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn kcat_tokens_and_escapes_render() {
        let r = record(Some(b"k"), Some(b"hello"));
        assert_eq!(
            render("%t/%p@%o %k=%s (%K,%S) %T [%h] 100%%\\n", &r, b"NULL"),
            "orders/3@42 k=hello (1,5) 1700000000000 [a=1,b=NULL] 100%\n"
        );
    }

    #[test]
    fn the_null_marker_tells_null_from_empty() {
        let null = record(None, None);
        let empty = record(Some(b""), Some(b""));
        assert_eq!(render("%k|%s|%K|%S", &null, b"NULL"), "NULL|NULL|-1|-1");
        assert_eq!(render("%k|%s|%K|%S", &empty, b"NULL"), "||0|0");
        assert_eq!(render("%k|%s", &null, b""), "|");
    }

    #[test]
    fn bad_tokens_are_named() {
        assert!(RecordFormat::parse("%x").unwrap_err().contains("%x"));
        assert!(RecordFormat::parse("50%").unwrap_err().contains("lone %"));
        assert!(RecordFormat::parse("\\q").unwrap_err().contains("\\q"));
    }

    #[test]
    fn separators_take_kcat_escapes_and_several_bytes() {
        assert_eq!(unescape("=").unwrap(), b"=");
        assert_eq!(unescape("\\n").unwrap(), b"\n");
        assert_eq!(unescape("\\0").unwrap(), b"\0");
        assert_eq!(unescape("\\t\\n\\n").unwrap(), b"\t\n\n");
        assert_eq!(unescape("\\x54!\\x45\\x53T").unwrap(), b"T!EST");
        assert_eq!(unescape("--\\\\--").unwrap(), b"--\\--");
        assert_eq!(unescape("é|").unwrap(), "é|".as_bytes());
        assert!(unescape("").unwrap_err().contains("empty"));
        assert!(unescape("\\q").unwrap_err().contains("\\q"));
        assert!(unescape("\\x4").unwrap_err().contains("two hex digits"));
        assert!(unescape("\\xzz").unwrap_err().contains("two hex digits"));
        assert!(unescape("a\\").unwrap_err().contains("lone"));
    }

    #[test]
    fn directory_names_give_topic_and_partition() {
        let path = std::path::Path::new;
        assert_eq!(
            topic_and_partition(path("/k/orders-3")),
            ("orders".into(), 3)
        );
        assert_eq!(
            topic_and_partition(path("/k/my-topic-0")),
            ("my-topic".into(), 0)
        );
        assert_eq!(topic_and_partition(path("/tmp/log")), ("log".into(), 0));
    }
}
