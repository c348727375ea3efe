//! A JSON reader for the tool's input (`produce --format json`), written by hand as the writer in
//! text.rs is: the tool has no serde. It reads RFC 8259 JSON into [`Value`], keeping numbers as
//! written and object members in order (a repeated name twice), and reports the first error with
//! its column.

/// A JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written: the caller decides what it must be.
    Number(String),
    /// A string, its escapes decoded.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object's members in input order.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// What this value is, for error messages: "a string", "null", ...
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// How deep arrays and objects may nest: a record is three levels deep; the limit keeps a
/// hostile line from exhausting the stack.
const MAX_DEPTH: usize = 64;

/// Parses `text` as one JSON value with nothing but whitespace around it.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut reader = Reader {
        text: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = reader.value()?;
    reader.skip_whitespace();
    if reader.at < reader.text.len() {
        return Err(reader.error("more after the JSON value (one value per line)"));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
    depth: usize,
}

impl Reader<'_> {
    /// An error at the current position, with its column (1-based, in bytes).
    fn error(&self, what: &str) -> String {
        match self.text.get(self.at) {
            Some(&byte) => format!(
                "{what} at column {} ({:?})",
                self.at + 1,
                String::from_utf8_lossy(&self.text[self.at..])
                    .chars()
                    .next()
                    .unwrap_or(char::from(byte))
            ),
            None => format!("{what} at the end of the line"),
        }
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_whitespace();
        match self.text.get(self.at) {
            Some(b'{') => self.nested(Reader::object),
            Some(b'[') => self.nested(Reader::array),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            _ => Err(self.error("expected a JSON value")),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Value, String>) -> Result<Value, String> {
        if self.depth == MAX_DEPTH {
            return Err(self.error(&format!("more than {MAX_DEPTH} nested arrays and objects")));
        }
        self.depth += 1;
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    /// After `{`.
    fn object(&mut self) -> Result<Value, String> {
        self.at += 1;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            if self.text.get(self.at) != Some(&b'"') {
                return Err(self.error("expected a member name in double quotes"));
            }
            let name = self.string()?;
            self.skip_whitespace();
            if self.text.get(self.at) != Some(&b':') {
                return Err(self.error("expected ':' after the member name"));
            }
            self.at += 1;
            members.push((name, self.value()?));
            self.skip_whitespace();
            match self.text.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}' in the object")),
            }
        }
    }

    /// After `[`.
    fn array(&mut self) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_whitespace();
            match self.text.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']' in the array")),
            }
        }
    }

    /// At `"`: the string's text, escapes decoded.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&byte) = self.text.get(self.at) else {
                return Err(self.error("a string without its closing '\"'"));
            };
            match byte {
                b'"' => {
                    self.at += 1;
                    // The input was a &str and escapes add whole characters: still UTF-8.
                    return String::from_utf8(out)
                        .map_err(|_| self.error("a string that is not UTF-8"));
                }
                b'\\' => {
                    self.at += 1;
                    let decoded = match self.text.get(self.at) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => self.unicode_escape()?,
                        _ => {
                            return Err(self.error(
                                "not a JSON escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)",
                            ));
                        }
                    };
                    self.at += 1;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(decoded.encode_utf8(&mut buf).as_bytes());
                }
                0x00..0x20 => {
                    return Err(self.error(
                        "a control character inside a string (JSON escapes them: \\n, \\u0000)",
                    ));
                }
                _ => {
                    out.push(byte);
                    self.at += 1;
                }
            }
        }
    }

    /// At the `u` of `\uXXXX`: the character, a surrogate pair read whole. Leaves `at` on the
    /// last hex digit.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let first = self.hex4()?;
        let code = if (0xd800..0xdc00).contains(&first) {
            if !self.text[self.at + 1..].starts_with(b"\\u") {
                return Err(self.error("a \\u escape of a high surrogate without its low one"));
            }
            self.at += 2;
            let second = self.hex4()?;
            if !(0xdc00..0xe000).contains(&second) {
                return Err(self.error("a \\u escape of a high surrogate without its low one"));
            }
            0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| self.error("a \\u escape of a lone low surrogate"))
    }

    /// At a `u`: the four hex digits after it, leaving `at` on the last one.
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at + 1..self.at + 5)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("\\u takes four hex digits"))?;
        let code =
            u32::from_str_radix(digits, 16).map_err(|_| self.error("\\u takes four hex digits"))?;
        self.at += 4;
        Ok(code)
    }

    /// At `-` or a digit: RFC 8259's number grammar, kept as written.
    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        let digits = |reader: &mut Self| {
            let from = reader.at;
            while reader.text.get(reader.at).is_some_and(u8::is_ascii_digit) {
                reader.at += 1;
            }
            reader.at > from
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        if self.text.get(self.at) == Some(&b'0') {
            self.at += 1;
        } else if !digits(self) {
            return Err(self.error("expected a digit"));
        }
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.error("expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.text.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.text.get(self.at) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        let text = String::from_utf8_lossy(&self.text[start..self.at]).into_owned();
        Ok(Value::Number(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> Value {
        Value::String(text.to_owned())
    }

    #[test]
    fn reads_every_kind_of_value() {
        assert_eq!(
            parse(r#" {"a": [1, -2.5e3, true, false, null], "b": {}, "a": "x"} "#).unwrap(),
            Value::Object(vec![
                (
                    "a".to_owned(),
                    Value::Array(vec![
                        Value::Number("1".into()),
                        Value::Number("-2.5e3".into()),
                        Value::Bool(true),
                        Value::Bool(false),
                        Value::Null,
                    ])
                ),
                ("b".to_owned(), Value::Object(vec![])),
                ("a".to_owned(), string("x")),
            ])
        );
        assert_eq!(parse("[]").unwrap(), Value::Array(vec![]));
    }

    #[test]
    fn decodes_what_the_writer_escapes() {
        let mut written = Vec::new();
        let text = "q\"b\\s/\n\r\t\u{8}\u{c}\u{0}\u{1f}é€😀";
        crate::text::json_string(&mut written, text);
        assert_eq!(
            parse(std::str::from_utf8(&written).unwrap()).unwrap(),
            string(text)
        );
        assert_eq!(parse(r#""\ud83d\ude00\/""#).unwrap(), string("😀/"));
    }

    /// Every prefix of a line, and the line with any one byte replaced by any ASCII byte, parses
    /// or fails with a message: the reader never panics on what a user pipes in.
    #[test]
    fn truncated_and_corrupted_lines_never_panic() {
        let line = r#"{"offset":1,"timestamp":-2,"key":{"base64":"AP8="},"value":"a\u00e9\ud83d\ude00\n","headers":[["h",null],["é",true]],"x":[1.5e-3,{}]}"#;
        assert!(parse(line).is_ok());
        for end in 0..line.len() {
            if let Some(prefix) = line.get(..end) {
                assert!(parse(prefix).is_err(), "{prefix}");
            }
        }
        let mut bytes = line.as_bytes().to_vec();
        for at in 0..bytes.len() {
            let original = bytes[at];
            for replacement in 0u8..0x80 {
                bytes[at] = replacement;
                if let Ok(text) = std::str::from_utf8(&bytes) {
                    let _ = parse(text);
                }
            }
            bytes[at] = original;
        }
    }

    #[test]
    fn errors_name_the_column() {
        for (bad, expected) in [
            ("", "expected a JSON value at the end"),
            (
                "{\"a\" 1}",
                "expected ':' after the member name at column 6",
            ),
            (
                "{\"a\":1,}",
                "expected a member name in double quotes at column 8",
            ),
            ("[1 2]", "expected ',' or ']' in the array at column 4"),
            ("\"abc", "without its closing"),
            ("\"a\tb\"", "a control character inside a string"),
            ("\"\\q\"", "not a JSON escape"),
            ("\"\\u12\"", "four hex digits"),
            ("\"\\ud800\"", "without its low one"),
            ("\"\\udc00\"", "lone low surrogate"),
            ("01", "more after the JSON value"),
            ("-", "expected a digit"),
            ("1.", "after '.'"),
            ("1e", "exponent"),
            ("tru", "expected a JSON value"),
            ("{} {}", "(one value per line) at column 4"),
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(expected), "{bad:?}: {error}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().contains("nested"));
    }
}
