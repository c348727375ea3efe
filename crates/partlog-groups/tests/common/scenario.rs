//! Seeded random groups for the differential test (`tests/differential.rs`): 1–30 members,
//! 1–10 topics of 1–40 partitions (sometimes 11–40 topics of 1–4), topic names that collide in
//! Java's `HashMap` or not, random subscriptions, static and dynamic members, previous ownership
//! with random generations, double claims, unparsable user data and topics named twice in a
//! subscription, over several rebalance rounds in sequence.
//!
//! A *chained* scenario has no user data written by the test: every member is played by a client
//! side that remembers what it was assigned. partlog's is a [`Client`] here, Kafka's is replayed
//! by the driver from the member's `history` (the assignments Kafka's leader gave it). Their
//! subscriptions are what a Kafka consumer sends, as the leader decodes it: topics sorted and
//! unique, owned partitions (cooperative only; an eager member revoked everything before joining)
//! sorted, the generation it last joined, and the client's user data.

use std::collections::BTreeMap;

use partlog_groups::assignor::user_data::{encode_cooperative, encode_sticky, encode_sticky_v0};
use partlog_groups::assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, PartitionsPerTopic,
    RangeAssignor, RoundRobinAssignor, StickyAssignor, TopicPartition,
};
use serde_json::{Value, json};

use super::driver::{case_value, partitions_json};

/// SplitMix64: small, seedable, and the same on every platform.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    pub fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }

    pub fn letters(&mut self, len: u64) -> String {
        (0..len)
            .map(|_| (b'a' + (self.next() % 26) as u8) as char)
            .collect()
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.range(0, i as u64) as usize;
            items.swap(i, j);
        }
    }

    /// A name made of `blocks` blocks "Aa" or "BB": all names of as many blocks have one Java
    /// `hashCode`, so they share a `HashMap` bucket whatever its size.
    pub fn same_hash_name(&mut self, blocks: u64) -> String {
        (0..blocks)
            .map(|_| if self.percent(50) { "Aa" } else { "BB" })
            .collect()
    }

    /// A topic name of `style`: 0 letters, 1 `t<i>` in order, 2 blocks of "Aa"/"BB" (whole-hash
    /// collisions), 3 `t<random>` (bucket collisions such as `t1` and `t19`).
    pub fn topic_name(&mut self, style: u64, index: usize) -> String {
        match style {
            0 => {
                let len = self.range(1, 8);
                self.letters(len)
            }
            1 => format!("t{index}"),
            2 => {
                let blocks = self.range(1, 4);
                self.same_hash_name(blocks)
            }
            _ => format!("t{}", self.range(0, 99)),
        }
    }
}

/// partlog's client side of one member of a chained scenario.
pub struct Client {
    pub assignor: Box<dyn Assignor>,
    /// What this member owns now (its last assignment).
    pub owned: Vec<TopicPartition>,
    /// The assignments Kafka's leader gave this member, each with its generation: what Kafka's
    /// client side replays in the driver.
    pub history: Vec<(Vec<TopicPartition>, i32)>,
}

impl Client {
    pub fn new(assignor: &str) -> Client {
        let assignor: Box<dyn Assignor> = match assignor {
            "range" => Box::new(RangeAssignor),
            "roundrobin" => Box::new(RoundRobinAssignor),
            "sticky" => Box::new(StickyAssignor::new()),
            _ => Box::new(CooperativeStickyAssignor::new()),
        };
        Client {
            assignor,
            owned: Vec::new(),
            history: Vec::new(),
        }
    }

    /// Both client sides get `assignment` in `generation`: partlog's the list partlog's leader
    /// made, Kafka's (in its history) the list Kafka's leader made.
    pub fn assigned(
        &mut self,
        ours: Vec<TopicPartition>,
        kafka: Vec<TopicPartition>,
        generation: i32,
    ) {
        self.assignor.on_assignment(&ours, generation);
        self.owned = ours;
        self.history.push((kafka, generation));
    }
}

/// One group's history: its topics and members, rebalanced round after round.
pub struct Scenario {
    pub seed: u64,
    pub assignor: &'static str,
    pub rng: Rng,
    pub topics: PartitionsPerTopic,
    pub members: Vec<MemberSubscription>,
    equal_subscriptions: bool,
    static_percent: u64,
    id_style: u64,
    generation: i32,
    /// Whether the members' subscriptions come from client sides (see the module docs).
    pub chained: bool,
    /// Each member's client side, by member id (chained scenarios only).
    pub clients: BTreeMap<String, Client>,
}

impl Scenario {
    pub fn new(seed: u64, assignor: &'static str, chained: bool) -> Scenario {
        let mut rng = Rng(seed);
        let mut topics = PartitionsPerTopic::new();
        let many = rng.percent(10);
        let topic_count = if many {
            rng.range(11, 40)
        } else {
            rng.range(1, 10)
        };
        let name_style = rng.range(0, 3);
        let mut attempts = 0;
        while (topics.len() as u64) < topic_count && attempts < 1000 {
            attempts += 1;
            let name = rng.topic_name(name_style, topics.len());
            let partitions = if many {
                rng.range(1, 4)
            } else {
                rng.range(1, 40)
            } as i32;
            topics.insert(name, partitions);
        }
        let mut scenario = Scenario {
            seed,
            assignor,
            topics,
            members: Vec::new(),
            equal_subscriptions: rng.percent(50),
            static_percent: *rng.pick(&[0, 0, 30, 100]),
            id_style: rng.range(0, 2),
            generation: rng.range(1, 10) as i32,
            rng,
            chained,
            clients: BTreeMap::new(),
        };
        let member_count = scenario.rng.range(1, 30);
        let shared = scenario.random_subscription();
        while (scenario.members.len() as u64) < member_count {
            let topics = if scenario.equal_subscriptions {
                shared.clone()
            } else {
                scenario.random_subscription()
            };
            let member = scenario.new_member(topics);
            if scenario
                .members
                .iter()
                .all(|m| m.member_id != member.member_id)
            {
                scenario.join(member);
            }
        }
        // Metadata quirks: a topic nobody subscribes to, a subscribed topic with no partitions,
        // and a subscription to a topic the metadata lacks.
        if scenario.rng.percent(10) {
            scenario.topics.insert("unsubscribed".into(), 3);
        }
        if scenario.rng.percent(5) {
            scenario.topics.insert("empty".into(), 0);
            for m in &mut scenario.members {
                m.topics.push("empty".into());
            }
        }
        if scenario.rng.percent(5) {
            for m in &mut scenario.members {
                m.topics.push("ghost".into());
            }
        }
        scenario.initial_ownership();
        scenario
    }

    fn random_subscription(&mut self) -> Vec<String> {
        let names: Vec<String> = self.topics.keys().cloned().collect();
        let mut chosen: Vec<String> = names
            .iter()
            .filter(|_| self.rng.percent(50))
            .cloned()
            .collect();
        if chosen.is_empty() && !self.rng.percent(3) {
            chosen.push(self.rng.pick(&names).clone());
        }
        self.rng.shuffle(&mut chosen);
        // A subscription naming a topic twice: Kafka keeps subscriptions as lists.
        if !chosen.is_empty() && self.rng.percent(3) {
            let again = self.rng.pick(&chosen).clone();
            chosen.push(again);
        }
        chosen
    }

    fn new_member(&mut self, topics: Vec<String>) -> MemberSubscription {
        let member_id = match self.id_style {
            0 => format!("consumer-{}", self.rng.range(0, 99)),
            1 => {
                let len = self.rng.range(1, 6);
                self.rng.letters(len)
            }
            _ => format!(
                "consumer-{:08x}-{:04x}",
                self.rng.next() as u32,
                self.rng.next() as u16
            ),
        };
        let instance_id = self
            .rng
            .percent(self.static_percent)
            .then(|| format!("instance-{}", self.rng.range(0, 40)));
        MemberSubscription {
            member_id,
            instance_id,
            topics,
            ..MemberSubscription::default()
        }
    }

    fn join(&mut self, member: MemberSubscription) {
        if self.chained {
            self.clients
                .insert(member.member_id.clone(), Client::new(self.assignor));
        }
        self.members.push(member);
    }

    /// Sets what `member` reports owning, in `generation` (negative: none), the way this
    /// scenario's assignor reads it, with some user data that does not parse.
    fn report(&mut self, at: usize, owned: Vec<TopicPartition>, generation: i32) {
        let style = self.rng.range(0, 99);
        let m = &mut self.members[at];
        m.owned = owned;
        m.generation = Some(generation);
        m.user_data = None;
        match self.assignor {
            "cooperative-sticky" => {
                if style < 15 {
                    // A protocol v1 subscription: the generation only in the user data.
                    m.generation = None;
                    m.user_data = Some(encode_cooperative(generation));
                } else if style < 20 {
                    m.generation = None;
                    m.user_data = Some(vec![1, 2]);
                }
            }
            _ => {
                m.user_data = if generation < 0 || style < 5 {
                    None
                } else if style < 15 {
                    Some(encode_sticky_v0(&m.owned))
                } else if style < 20 {
                    Some((0..(style % 7)).map(|b| (b * 37 + style) as u8).collect())
                } else {
                    Some(encode_sticky(&m.owned, generation))
                };
                if style.is_multiple_of(4) {
                    m.generation = None;
                }
            }
        }
    }

    /// A chained member's subscription, as a Kafka consumer sends it and the leader decodes it
    /// (`ConsumerCoordinator.metadata`, `ConsumerProtocol.serializeSubscription`).
    fn subscribe_as_client(&mut self, at: usize) {
        let cooperative = self.assignor == "cooperative-sticky";
        let m = &mut self.members[at];
        let client = self
            .clients
            .get(&m.member_id)
            .expect("every member of a chained scenario has a client");
        m.topics.sort();
        m.topics.dedup();
        m.user_data = client.assignor.subscription_user_data(&m.topics);
        m.generation = client.history.last().map(|(_, generation)| *generation);
        m.owned = if cooperative {
            let mut owned = client.owned.clone();
            owned.sort();
            owned
        } else {
            Vec::new()
        };
    }

    fn initial_ownership(&mut self) {
        let n = self.members.len();
        let mut owned: Vec<Vec<TopicPartition>> = vec![Vec::new(); n];
        if self.rng.percent(70) {
            let partitions: Vec<TopicPartition> = self
                .topics
                .iter()
                .flat_map(|(t, &c)| (0..c).map(move |p| TopicPartition::new(t.clone(), p)))
                .collect();
            for tp in partitions {
                if self.rng.percent(80) {
                    let at = self.rng.range(0, n as u64 - 1) as usize;
                    owned[at].push(tp.clone());
                    if self.rng.percent(8) {
                        let again = self.rng.range(0, n as u64 - 1) as usize;
                        owned[again].push(tp);
                    }
                }
            }
            if self.rng.percent(5) {
                owned[0].push(TopicPartition::new("deleted", 0));
            }
        }
        for (at, mut list) in owned.into_iter().enumerate() {
            let generation = match self.rng.range(0, 9) {
                0 => -1,
                1..=3 => self.generation - self.rng.range(1, 3) as i32,
                _ => self.generation,
            };
            if !self.chained {
                self.report(at, list, generation);
                continue;
            }
            // A previous leader's list, in any order: the SyncGroup encoding groups it by topic
            // on the way, which changes the user data of some lists.
            if self.rng.percent(50) {
                self.rng.shuffle(&mut list);
            }
            if generation >= 0 {
                let id = self.members[at].member_id.clone();
                if let Some(client) = self.clients.get_mut(&id) {
                    client.assigned(list.clone(), list, generation);
                }
            }
            self.subscribe_as_client(at);
        }
    }

    /// The next round's group: everyone owns what the round gave it (`ours` from partlog's
    /// leader, `kafka` from Kafka's, the same lists unless the round failed), in the next
    /// generation; some members leave, some join, a subscription or a partition count changes.
    pub fn advance(
        &mut self,
        ours: &GroupAssignment,
        kafka: &BTreeMap<String, Vec<TopicPartition>>,
    ) {
        self.generation += 1;
        let generation = self.generation;
        for at in 0..self.members.len() {
            let id = self.members[at].member_id.clone();
            let owned = ours.get(&id).cloned().unwrap_or_default();
            match self.clients.get_mut(&id) {
                Some(client) => {
                    let theirs = kafka.get(&id).cloned().unwrap_or_default();
                    client.assigned(owned, theirs, generation);
                }
                None => self.report(at, owned, generation),
            }
        }
        if self.members.len() > 1 && self.rng.percent(30) {
            let at = self.rng.range(0, self.members.len() as u64 - 1) as usize;
            let gone = self.members.remove(at);
            self.clients.remove(&gone.member_id);
        }
        if self.rng.percent(30) {
            let topics = if self.equal_subscriptions {
                self.members[0].topics.clone()
            } else {
                self.random_subscription()
            };
            let member = self.new_member(topics);
            if self.members.iter().all(|m| m.member_id != member.member_id) {
                self.join(member);
            }
        }
        if !self.equal_subscriptions && self.rng.percent(20) {
            let at = self.rng.range(0, self.members.len() as u64 - 1) as usize;
            self.members[at].topics = self.random_subscription();
        }
        if self.rng.percent(10) {
            let names: Vec<String> = self.topics.keys().cloned().collect();
            let name = self.rng.pick(&names).clone();
            if let Some(count) = self.topics.get_mut(&name) {
                *count += self.rng.range(1, 5) as i32;
            }
        }
        if self.chained {
            for at in 0..self.members.len() {
                self.subscribe_as_client(at);
            }
        }
    }

    /// The case for the driver: chained members carry their history, which Kafka's client side
    /// replays to make the user data Kafka's leader reads.
    pub fn case(&self, id: usize) -> Value {
        let mut case = case_value(id, self.assignor, &self.topics, &self.members, 0);
        if let Some(members) = case["members"].as_array_mut() {
            for member in members {
                let Some(client) = member["id"].as_str().and_then(|id| self.clients.get(id)) else {
                    continue;
                };
                let history: Vec<Value> = client
                    .history
                    .iter()
                    .map(|(partitions, generation)| {
                        json!({"partitions": partitions_json(partitions), "generation": generation})
                    })
                    .collect();
                member["history"] = Value::Array(history);
            }
        }
        case
    }
}
