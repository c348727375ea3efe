#!/usr/bin/env python3
"""Prints the config table of docs/configuration.md (partlog setting, Kafka name, default) from
the field docs of `LogConfig` in src/log/config/mod.rs: each field's docs start with its Kafka name
in backticks (or say "partlog's own setting") and end with "Default: ...".

    python3 .ci/config-table.py     # paste between docs/configuration.md's config-table markers

tests/readme_sync.rs checks that every field of LogConfig has its row there.
"""
import pathlib
import re

source = (pathlib.Path(__file__).resolve().parent.parent / "src/log/config/mod.rs").read_text()
start = source.index("pub struct LogConfig {")
body = source[start : source.index("\n}\n", start)]
docs = []
print("| partlog setting | Kafka name | default |")
print("| --- | --- | --- |")
for line in body.split("\n")[1:]:
    stripped = line.strip()
    if stripped.startswith("///"):
        docs.append(stripped[3:].strip())
        continue
    field = re.match(r"pub (\w+):", stripped)
    if not field:
        if not stripped.startswith("//"):
            docs = []
        continue
    doc = " ".join(docs)
    docs = []
    # The names before the first colon: "`flush.messages` and `flush.ms` (broker: ...)".
    lead = re.split(r":\s", doc, maxsplit=1)[0]
    names = [n for n in re.findall(r"`([a-z]+(?:\.[a-z]+)*)`", lead) if "." in n or n == "preallocate"]
    broker = [n for n in dict.fromkeys(names) if n.startswith("log.")]
    names = [n for n in dict.fromkeys(names) if not n.startswith("log.")]
    if not names and broker:
        # A broker setting with no topic config of its own name.
        kafka = "broker: " + ", ".join(f"`{n}`" for n in broker)
    elif "partlog's own setting" in lead or not names:
        kafka = "none: partlog's own" + (f" (`{names[0]}`)" if names else "")
    else:
        kafka = ", ".join(f"`{n}`" for n in names)
    default = re.search(r"Default: (.*?)(?:\.\s*$|\.\s+[A-Z(]|$)", doc)
    value = default.group(1).strip() if default else ""
    value = re.sub(r"\[`([^`]+)`\](\([^)]*\))?", r"`\1`", value)
    print(f"| `{field.group(1)}` | {kafka} | {value} |")
