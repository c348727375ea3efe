//! What `partlog produce` reads: standard input cut into records at a delimiter (`-D`, a newline
//! by default), each one parsed as text (the key and header separators, the null marker) or as
//! the JSON object `consume --format json` prints (`--format json`, record_json.rs).

use std::io::BufRead;

use clap::ValueEnum;
use partlog::NewRecord;
use partlog::unstable::{Clock, SystemClock};

use crate::CliError;

/// The input formats of `produce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// The record's bytes: [headers SEP] [key SEP] value.
    Text,
    /// One JSON object per record, as `consume --format json` prints it.
    Json,
}

/// Turns one input record's bytes into a record to append.
pub struct RecordParser<'a> {
    /// `--format`.
    pub format: InputFormat,
    /// `--key-separator` (text).
    pub key_separator: Option<&'a [u8]>,
    /// `--header-separator`: where a text record's headers end.
    pub header_separator: Option<&'a [u8]>,
    /// `--header`: headers for every record, before its own.
    pub static_headers: &'a [(String, Vec<u8>)],
    /// `--null-marker`: the text value that means a tombstone.
    pub null_marker: Option<&'a [u8]>,
}

impl RecordParser<'_> {
    /// The record `input` holds, or `None` for a JSON line of nothing but whitespace (skipped, so
    /// that a file may end with a blank line). The error says what is wrong, without the line
    /// number (the caller adds it).
    pub fn parse(&self, input: &[u8]) -> Result<Option<NewRecord>, String> {
        let mut record = match self.format {
            InputFormat::Text => self.text_record(input),
            InputFormat::Json => {
                let line = std::str::from_utf8(input).map_err(|error| {
                    format!(
                        "not UTF-8 at byte {} (JSON input is text: give bytes as \
                         {{\"base64\":\"...\"}} or in \"value_b64\")",
                        error.valid_up_to() + 1
                    )
                })?;
                if line.trim().is_empty() {
                    return Ok(None);
                }
                let read = crate::record_json::read(line)?;
                NewRecord {
                    timestamp: read.timestamp.unwrap_or_else(|| SystemClock.now_ms()),
                    key: read.key,
                    value: read.value,
                    headers: read.headers,
                }
            }
        };
        if !self.static_headers.is_empty() {
            let own = std::mem::take(&mut record.headers);
            record.headers = self
                .static_headers
                .iter()
                .map(|(name, value)| (name.clone(), Some(value.clone())))
                .chain(own)
                .collect();
        }
        Ok(Some(record))
    }

    /// `[headers SEP] [key SEP] value`, stamped with the time of reading.
    fn text_record(&self, input: &[u8]) -> NewRecord {
        let (headers, input) = match self.header_separator.and_then(|sep| split_once(input, sep)) {
            Some((headers, rest)) => (Some(headers), rest),
            None => (None, input),
        };
        let (key, value) = match self.key_separator.and_then(|sep| split_once(input, sep)) {
            Some((key, value)) => (Some(key), value),
            None => (None, input),
        };
        let value = (self.null_marker != Some(value)).then_some(value);
        let mut record = NewRecord::new(SystemClock.now_ms(), key, value);
        for header in headers
            .into_iter()
            .flat_map(|h| h.split(|&b| b == b','))
            .filter(|h| !h.is_empty())
        {
            let (name, value) = match split_once(header, b":") {
                Some((name, value)) => (name, Some(value)),
                None => (header, None),
            };
            record = record.with_header(String::from_utf8_lossy(name), value);
        }
        record
    }
}

/// What one input record is called in messages: a line with the default delimiter, else a
/// record (the n-th piece of input between delimiters).
pub fn unit(delimiter: &[u8]) -> &'static str {
    if delimiter == b"\n" { "line" } else { "record" }
}

/// Reads `input` record by record, cut at each `delimiter` (which is not part of the record;
/// the last record needs none), handing each record's bytes and its number (from 1) to `each`,
/// until the input ends or `each` returns `false`.
pub fn for_each_record(
    mut input: impl BufRead,
    delimiter: &[u8],
    mut each: impl FnMut(&[u8], u64) -> Result<bool, CliError>,
) -> Result<(), CliError> {
    let Some(&last) = delimiter.last() else {
        return Err(CliError::new("the record delimiter must not be empty"));
    };
    let mut record = Vec::new();
    let mut number = 0u64;
    loop {
        record.clear();
        // Up to the delimiter's last byte, again until the whole delimiter ends the record.
        let ended = loop {
            let read = input
                .read_until(last, &mut record)
                .map_err(|e| CliError::new(format!("cannot read standard input: {e}")))?;
            if read == 0 {
                break false;
            }
            if record.ends_with(delimiter) {
                break true;
            }
        };
        if !ended && record.is_empty() {
            return Ok(());
        }
        if ended {
            record.truncate(record.len() - delimiter.len());
        }
        number += 1;
        if !each(&record, number)? || !ended {
            return Ok(());
        }
    }
}

/// `error`, which stopped a run that had the log end at `from` when it began and at `to` when
/// it stopped, followed by what the run wrote, so that nothing is half-written silently.
pub fn with_what_was_written(
    error: CliError,
    dir: &std::path::Path,
    from: i64,
    to: i64,
) -> CliError {
    let written = match to - from {
        n if n <= 0 => "nothing was written".to_owned(),
        1 => format!("1 record was written to {} (offset {from})", dir.display()),
        n => format!(
            "{n} records were written to {} (offsets [{from}, {}])",
            dir.display(),
            to - 1
        ),
    };
    CliError::new(format!("{}; {written}", error.0))
}

/// Splits `input` at the first occurrence of `separator`.
fn split_once<'l>(input: &'l [u8], separator: &[u8]) -> Option<(&'l [u8], &'l [u8])> {
    let at = input
        .windows(separator.len())
        .position(|window| window == separator)?;
    Some((&input[..at], &input[at + separator.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(input: &[u8], delimiter: &[u8]) -> Vec<(Vec<u8>, u64)> {
        let mut seen = Vec::new();
        for_each_record(input, delimiter, |record, number| {
            seen.push((record.to_vec(), number));
            Ok(true)
        })
        .unwrap();
        seen
    }

    #[test]
    fn input_is_cut_at_each_delimiter_the_last_one_optional() {
        let cut = |input: &[u8], delimiter: &[u8]| -> Vec<Vec<u8>> {
            records(input, delimiter)
                .into_iter()
                .map(|(r, _)| r)
                .collect()
        };
        assert_eq!(cut(b"a\nb\r\n\nc", b"\n"), [&b"a"[..], b"b\r", b"", b"c"]);
        assert_eq!(cut(b"a\nb\n", b"\n"), [&b"a"[..], b"b"]);
        assert!(cut(b"", b"\n").is_empty());
        assert_eq!(cut(b"x\ny\0z\n\0", b"\0"), [&b"x\ny"[..], b"z\n"]);
        // Several bytes, a partial match inside a record, a delimiter split across reads.
        assert_eq!(cut(b"a--b-c--d-", b"--"), [&b"a"[..], b"b-c", b"d-"]);
        assert_eq!(cut(b"1\r\n2\n3\r\n", b"\r\n"), [&b"1"[..], b"2\n3"]);
        let numbers: Vec<u64> = records(b"a\nb\nc", b"\n")
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        assert_eq!(numbers, [1, 2, 3]);
        let mut small = std::io::BufReader::with_capacity(1, &b"ab||cd||"[..]);
        let mut seen = Vec::new();
        for_each_record(&mut small, b"||", |record, _| {
            seen.push(record.to_vec());
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen, [&b"ab"[..], b"cd"]);
    }

    #[test]
    fn text_records_split_headers_key_and_value() {
        let headers = [("env".to_owned(), b"prod".to_vec())];
        let parser = RecordParser {
            format: InputFormat::Text,
            key_separator: Some(b"="),
            header_separator: Some(b"\t"),
            static_headers: &headers,
            null_marker: Some(b"NULL"),
        };
        let record = parser.parse(b"a:1,b\tk=v=w").unwrap().unwrap();
        assert_eq!(record.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(record.value.as_deref(), Some(&b"v=w"[..]));
        assert_eq!(
            record.headers,
            [
                ("env".to_owned(), Some(b"prod".to_vec())),
                ("a".to_owned(), Some(b"1".to_vec())),
                ("b".to_owned(), None)
            ]
        );
        let tombstone = parser.parse(b"k=NULL").unwrap().unwrap();
        assert_eq!(tombstone.value, None);
        let keyless = parser.parse(b"no separator").unwrap().unwrap();
        assert_eq!(
            (keyless.key, keyless.value.as_deref()),
            (None, Some(&b"no separator"[..]))
        );
    }

    #[test]
    fn json_records_keep_their_timestamp_and_skip_blank_lines() {
        let parser = RecordParser {
            format: InputFormat::Json,
            key_separator: None,
            header_separator: None,
            static_headers: &[],
            null_marker: None,
        };
        let record = parser
            .parse(br#"{"timestamp":5,"key":null,"value":"a\u0000b\n"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(record, NewRecord::new(5, None, Some(b"a\0b\n")));
        assert_eq!(parser.parse(b" \r").unwrap(), None);
        assert!(
            parser
                .parse(b"\xff")
                .unwrap_err()
                .contains("not UTF-8 at byte 1")
        );
        assert!(
            parser
                .parse(b"{\"key\":1}")
                .unwrap_err()
                .contains("\"key\" is a number")
        );
    }
}
