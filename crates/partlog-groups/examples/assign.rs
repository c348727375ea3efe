//! Runs all four of Kafka's assignors on a group described in JSON and prints what each gives
//! every member: `cargo run -p partlog-groups --example assign -- group.json` (or the JSON on
//! stdin; with neither, or an empty stdin, a built-in example group).
//!
//! The group description:
//!
//! ```json
//! {
//!   "topics": {"orders": 6, "payments": 2},
//!   "members": [
//!     {"id": "worker-a", "topics": ["orders", "payments"], "owned": ["orders-0", "orders-1"], "generation": 3},
//!     {"id": "worker-b", "instance": "host-2", "topics": ["orders"]}
//!   ]
//! }
//! ```
//!
//! `topics` maps each topic to its partition count; a member's `instance` (its
//! `group.instance.id`), `owned` partitions and `generation` are optional. What a member owns is
//! given to the sticky assignors the way Kafka's clients report it: in the subscription for
//! `cooperative-sticky`, in the user data for `sticky`. The output is JSON: per assignor, each
//! member's partitions, and for `cooperative-sticky` the partitions that change owner (they are
//! revoked this round and assigned in the next).

use std::io::Read;

use partlog_groups::assignor::user_data::encode_sticky;
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, PartitionsPerTopic,
    RangeAssignor, RoundRobinAssignor, StickyAssignor, TopicPartition,
};
use serde_json::{Map, Value, json};

const EXAMPLE: &str = r#"{
  "topics": {"orders": 6, "payments": 2},
  "members": [
    {"id": "worker-a", "topics": ["orders", "payments"], "owned": ["orders-0", "orders-1", "orders-2", "payments-0"], "generation": 3},
    {"id": "worker-b", "topics": ["orders", "payments"], "owned": ["orders-3", "orders-4", "orders-5", "payments-1"], "generation": 3},
    {"id": "worker-c", "instance": "host-3", "topics": ["orders", "payments"]}
  ]
}"#;

fn main() -> Result<(), String> {
    let text = match std::env::args().nth(1) {
        Some(path) => {
            std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?
        }
        None if atty_stdin() => EXAMPLE.to_owned(),
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read stdin: {e}"))?;
            if text.trim().is_empty() {
                EXAMPLE.to_owned()
            } else {
                text
            }
        }
    };
    let group: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the group description is not JSON: {e}"))?;
    let (topics, members) = parse_group(&group)?;

    let mut out = Map::new();
    let eager: [(&str, Box<dyn Assignor>); 3] = [
        ("range", Box::new(RangeAssignor)),
        ("roundrobin", Box::new(RoundRobinAssignor)),
        ("sticky", Box::new(StickyAssignor::new())),
    ];
    for (name, assignor) in eager {
        let assignment = assignor
            .assign(&topics, &members)
            .map_err(|e| e.to_string())?;
        out.insert(name.to_owned(), assignment_json(&assignment));
    }
    let round = CooperativeStickyAssignor::new()
        .assign_with_transfers(&topics, &members)
        .map_err(|e| e.to_string())?;
    let transfers: Map<String, Value> = round
        .transferring
        .iter()
        .map(|(tp, m)| (tp.to_string(), json!(m)))
        .collect();
    out.insert(
        "cooperative-sticky".to_owned(),
        json!({"assignment": assignment_json(&round.assignment), "revoked_now_assigned_next_round": transfers}),
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&Value::Object(out)).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Whether stdin is a terminal (nothing piped in): then the built-in example runs.
fn atty_stdin() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}

fn assignment_json(assignment: &GroupAssignment) -> Value {
    let members: Map<String, Value> = assignment
        .iter()
        .map(|(m, list)| {
            let mut sorted = list.clone();
            sorted.sort();
            (
                m.clone(),
                json!(sorted.iter().map(ToString::to_string).collect::<Vec<_>>()),
            )
        })
        .collect();
    Value::Object(members)
}

fn parse_partition(value: &Value) -> Result<TopicPartition, String> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("an owned partition must be a \"topic-id\" string, not {value}"))?;
    let (topic, id) = text
        .rsplit_once('-')
        .ok_or_else(|| format!("{text} is not \"topic-id\""))?;
    let id = id
        .parse()
        .map_err(|_| format!("{text}: {id} is not a partition id"))?;
    Ok(TopicPartition::new(topic, id))
}

fn parse_group(group: &Value) -> Result<(PartitionsPerTopic, Vec<MemberSubscription>), String> {
    let topics = group
        .get("topics")
        .and_then(Value::as_object)
        .ok_or("the group needs \"topics\": {name: partition count}")?
        .iter()
        .map(|(t, n)| {
            let count = n
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| format!("topic {t}: {n} is not a count"))?;
            Ok((t.clone(), count))
        })
        .collect::<Result<PartitionsPerTopic, String>>()?;
    let members = group
        .get("members")
        .and_then(Value::as_array)
        .ok_or("the group needs \"members\": [...]")?
        .iter()
        .map(|m| {
            let id = m
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a member without an \"id\": {m}"))?;
            let subscribed: Vec<String> = m
                .get("topics")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("member {id} needs \"topics\""))?
                .iter()
                .map(|t| {
                    t.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| format!("member {id}: topic {t} is not a string"))
                })
                .collect::<Result<_, _>>()?;
            let owned: Vec<TopicPartition> = match m.get("owned").and_then(Value::as_array) {
                Some(list) => list.iter().map(parse_partition).collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            let generation = m
                .get("generation")
                .and_then(Value::as_i64)
                .and_then(|g| i32::try_from(g).ok());
            Ok(MemberSubscription {
                member_id: id.to_owned(),
                instance_id: m.get("instance").and_then(Value::as_str).map(str::to_owned),
                topics: subscribed,
                user_data: generation.map(|g| encode_sticky(&owned, g)),
                owned,
                generation,
                rack: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((topics, members))
}
