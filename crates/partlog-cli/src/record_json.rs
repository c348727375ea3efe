//! The JSON object of one record, both ways: `consume --format json` and `dump --json` write it,
//! `produce --format json` reads it back, so that `consume --format json | produce --format json`
//! copies records exactly.
//!
//! ```text
//! {"offset":0,"timestamp":1700000000000,"key":"user1","value":"hello","headers":[["k","v"]]}
//! ```
//!
//! Bytes (key, value, header values) are a JSON string when they are valid UTF-8, `null` when
//! absent, and `{"base64":"..."}` otherwise (text.rs). The reader also takes the shorter forms a
//! person may write: `"key_b64"` / `"value_b64"` members holding base64, and headers as an object
//! `{"name":"value",...}`.

use partlog::LogRecord;

use crate::json::{self, Value};
use crate::text::{base64_decode, json_bytes};

/// Appends the object of one record. `headers` are (name, value) pairs in record order.
pub fn write<'h>(
    out: &mut Vec<u8>,
    offset: i64,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
) {
    out.extend_from_slice(b"{\"offset\":");
    out.extend_from_slice(offset.to_string().as_bytes());
    out.extend_from_slice(b",\"timestamp\":");
    out.extend_from_slice(timestamp.to_string().as_bytes());
    out.extend_from_slice(b",\"key\":");
    json_bytes(out, key);
    out.extend_from_slice(b",\"value\":");
    json_bytes(out, value);
    out.extend_from_slice(b",\"headers\":[");
    for (n, (name, value)) in headers.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.push(b'[');
        json_bytes(out, Some(name));
        out.push(b',');
        json_bytes(out, value);
        out.push(b']');
    }
    out.extend_from_slice(b"]}");
}

/// Appends the object of an owned record.
pub fn write_log_record(out: &mut Vec<u8>, record: &LogRecord) {
    write(
        out,
        record.offset,
        record.timestamp,
        record.key.as_deref(),
        record.value.as_deref(),
        record
            .headers
            .iter()
            .map(|(name, value)| (name.as_bytes(), value.as_deref())),
    );
}

/// One record read from a JSON object: what a producer gives (the log assigns the offset).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct InputRecord {
    /// `"timestamp"`, if given.
    pub timestamp: Option<i64>,
    /// `"key"` or `"key_b64"`; absent or `null`: a null key.
    pub key: Option<Vec<u8>>,
    /// `"value"` or `"value_b64"`; absent or `null`: a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    /// `"headers"`, in order.
    pub headers: Vec<Header>,
}

/// A header: its name and its value (`None`: null).
pub type Header = (String, Option<Vec<u8>>);

/// What a line may hold, for error messages.
const MEMBERS: &str = "key, value, headers, timestamp, key_b64, value_b64 and offset (ignored)";

/// Reads the object `consume --format json` prints, or its shorter forms (see the module docs).
/// Every member is checked: an unknown name (a typo would otherwise drop a field silently), a
/// repeated one, `key` beside `key_b64`, and a value of the wrong kind are errors that say what
/// was expected.
pub fn read(line: &str) -> Result<InputRecord, String> {
    let Value::Object(members) = json::parse(line)? else {
        return Err(format!(
            "expected a JSON object such as {{\"key\":\"k\",\"value\":\"v\"}} with {MEMBERS}"
        ));
    };
    let mut record = InputRecord::default();
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in &members {
        if seen.contains(&name.as_str()) {
            return Err(format!("\"{name}\" appears twice"));
        }
        seen.push(name);
        match name.as_str() {
            // The log assigns offsets: the source's are checked, then dropped.
            "offset" => {
                integer(value, "offset")?;
            }
            "timestamp" => record.timestamp = Some(integer(value, "timestamp")?),
            "key" => record.key = bytes(value, "\"key\"")?,
            "value" => record.value = bytes(value, "\"value\"")?,
            "key_b64" => record.key = base64_member(value, "\"key_b64\"")?,
            "value_b64" => record.value = base64_member(value, "\"value_b64\"")?,
            "headers" => record.headers = headers(value)?,
            other => return Err(format!("unknown member \"{other}\": expected {MEMBERS}")),
        }
    }
    for (plain, encoded) in [("key", "key_b64"), ("value", "value_b64")] {
        if seen.contains(&plain) && seen.contains(&encoded) {
            return Err(format!("both \"{plain}\" and \"{encoded}\": give one"));
        }
    }
    Ok(record)
}

/// A JSON integer that fits an i64.
fn integer(value: &Value, name: &str) -> Result<i64, String> {
    match value {
        Value::Number(text) => text.parse::<i64>().map_err(|_| {
            format!("\"{name}\" is {text}: expected a whole number (a 64-bit integer)")
        }),
        other => Err(format!("\"{name}\" is {}: expected a number", other.kind())),
    }
}

/// Bytes as the writer gives them: a string, `null`, or `{"base64":"..."}`. `label` names the
/// member in errors.
fn bytes(value: &Value, label: &str) -> Result<Option<Vec<u8>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.as_bytes().to_vec())),
        Value::Object(members) => match members.as_slice() {
            [(field, encoded)] if field == "base64" => base64_member(encoded, label),
            _ => Err(format!(
                "{label} is an object other than {{\"base64\":\"...\"}}"
            )),
        },
        other => Err(format!(
            "{label} is {}: expected a string, null or {{\"base64\":\"...\"}}",
            other.kind()
        )),
    }
}

/// A member holding base64 (or `null`); `label` names it in errors.
fn base64_member(value: &Value, label: &str) -> Result<Option<Vec<u8>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => base64_decode(text)
            .map(Some)
            .map_err(|error| format!("{label}: {error}")),
        other => Err(format!(
            "{label} is {}: expected a base64 string",
            other.kind()
        )),
    }
}

/// `[["name", value], ...]` as the writer gives them, or `{"name": value, ...}`.
fn headers(value: &Value) -> Result<Vec<Header>, String> {
    let header = |name: &str, value: &Value| {
        Ok((name.to_owned(), bytes(value, &format!("header {name:?}"))?))
    };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(members) => members
            .iter()
            .map(|(name, value)| header(name, value))
            .collect(),
        Value::Array(pairs) => pairs
            .iter()
            .map(|pair| match pair {
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(name), value] => header(name, value),
                    _ => Err(format!(
                        "a header is {}: expected [\"name\", value] with a string name",
                        describe_pair(pair)
                    )),
                },
                other => Err(format!(
                    "a header is {}: expected [\"name\", value]",
                    other.kind()
                )),
            })
            .collect(),
        other => Err(format!(
            "\"headers\" is {}: expected [[\"name\", value], ...] or {{\"name\": value, ...}}",
            other.kind()
        )),
    }
}

fn describe_pair(pair: &[Value]) -> String {
    match pair {
        [name, _] => format!("a pair whose name is {}", name.kind()),
        items => format!("an array of {} items", items.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        timestamp: Option<i64>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> InputRecord {
        InputRecord {
            timestamp,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.map(<[u8]>::to_vec)))
                .collect(),
        }
    }

    #[test]
    fn what_the_writer_writes_reads_back() {
        let headers: [(&[u8], Option<&[u8]>); 3] = [
            (b"h", Some(b"\xff\x00")),
            (b"h", None),
            (b"", Some(b"a\nb")),
        ];
        let mut out = Vec::new();
        write(
            &mut out,
            7,
            -1,
            Some(b"\x00\xfe"),
            Some(b"nul\0 nl\n"),
            headers.into_iter(),
        );
        let line = String::from_utf8(out).unwrap();
        assert_eq!(
            read(&line).unwrap(),
            record(
                Some(-1),
                Some(b"\x00\xfe"),
                Some(b"nul\0 nl\n"),
                &[("h", Some(b"\xff\x00")), ("h", None), ("", Some(b"a\nb"))]
            )
        );
    }

    #[test]
    fn the_short_forms_read_too() {
        assert_eq!(
            read(r#"{"key_b64":"AP8=","value_b64":"AAo","headers":{"a":"1","b":null}}"#).unwrap(),
            record(
                None,
                Some(b"\x00\xff"),
                Some(b"\x00\n"),
                &[("a", Some(b"1")), ("b", None)]
            )
        );
        assert_eq!(read("{}").unwrap(), record(None, None, None, &[]));
        assert_eq!(
            read(r#"{"value":"v","headers":null,"key":null}"#).unwrap(),
            record(None, None, Some(b"v"), &[])
        );
    }

    #[test]
    fn bad_members_are_named() {
        for (bad, expected) in [
            ("[1]", "expected a JSON object"),
            (r#"{"vaule":"x"}"#, "unknown member \"vaule\""),
            (r#"{"key":"a","key":"b"}"#, "\"key\" appears twice"),
            (
                r#"{"key":"a","key_b64":"YQ=="}"#,
                "both \"key\" and \"key_b64\"",
            ),
            (r#"{"timestamp":1.5}"#, "\"timestamp\" is 1.5"),
            (r#"{"timestamp":"1"}"#, "\"timestamp\" is a string"),
            (r#"{"offset":true}"#, "\"offset\" is a boolean"),
            (r#"{"value":7}"#, "\"value\" is a number"),
            (r#"{"value":{"b64":"YQ=="}}"#, "other than {\"base64\""),
            (r#"{"value_b64":"Y!"}"#, "\"value_b64\": '!'"),
            (r#"{"headers":"a=1"}"#, "\"headers\" is a string"),
            (r#"{"headers":[["a"]]}"#, "an array of 1 items"),
            (r#"{"headers":[[1,"v"]]}"#, "whose name is a number"),
            (r#"{"headers":{"a":2}}"#, "header \"a\" is a number"),
        ] {
            let error = read(bad).unwrap_err();
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }
}
