//! Three openraft nodes in one process, each with a `PartlogLogStore` in a directory of its own,
//! talking over an in-memory router: writes, the leader killed and restarted, more writes; then
//! all three logs hold the same entries and partlog's verify passes on every directory.
//!
//! `cargo run -p partlog-openraft --example raft_kv [WRITES]` (default 30 writes per phase).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::RaftLogReader;
use openraft::{BasicNode, Config, Raft, ServerState};
use partlog::{LogConfig, verify_dir};
use partlog_openraft::PartlogLogStore;
use partlog_openraft::testing::{KvConfig, KvRequest, KvStateMachine};

type Node = Raft<KvConfig>;
type Store = PartlogLogStore<KvConfig>;

/// Every wait of the demo gives up after this long: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// The nodes that are up, by id: the "network" delivers a message by calling the target's
/// `Raft` directly, and fails with `Unreachable` for a node that is down.
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, Node>>>,
}

impl Router {
    fn get(&self, id: u64) -> Option<Node> {
        self.nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    fn set(&self, id: u64, node: Option<Node>) {
        let mut nodes = self
            .nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match node {
            Some(node) => nodes.insert(id, node),
            None => nodes.remove(&id),
        };
    }
}

#[derive(Debug)]
struct Down(u64);

impl std::fmt::Display for Down {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {} is down", self.0)
    }
}

impl std::error::Error for Down {}

/// One node's connection to another, through the router.
struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    #[allow(
        clippy::result_large_err,
        reason = "openraft's RaftNetwork methods return its RPCError by value"
    )]
    fn target<E: std::error::Error>(&self) -> Result<Node, RPCError<u64, BasicNode, E>> {
        self.router
            .get(self.target)
            .ok_or_else(|| RPCError::Unreachable(Unreachable::new(&Down(self.target))))
    }
}

impl RaftNetworkFactory<KvConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection {
            router: self.clone(),
            target,
        }
    }
}

impl RaftNetwork<KvConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KvConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let node = self.target()?;
        node.append_entries(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<KvConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        let node = self.target()?;
        node.install_snapshot(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let node = self.target()?;
        node.vote(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// A running node and its store (kept to close the log when the node is killed).
struct Running {
    raft: Node,
    store: Store,
    state_machine: KvStateMachine,
}

async fn start(
    id: u64,
    dir: &Path,
    router: &Router,
) -> Result<Running, Box<dyn std::error::Error>> {
    let config = Config {
        cluster_name: "raft-kv".into(),
        heartbeat_interval: 100,
        election_timeout_min: 600,
        election_timeout_max: 1200,
        ..Config::default()
    };
    let store = Store::open(dir, LogConfig::default())?;
    let state_machine = KvStateMachine::new();
    let raft = Raft::new(
        id,
        Arc::new(config.validate()?),
        router.clone(),
        store.clone(),
        state_machine.clone(),
    )
    .await?;
    router.set(id, Some(raft.clone()));
    Ok(Running {
        raft,
        store,
        state_machine,
    })
}

/// Waits until some node that is up leads, and returns its id.
async fn leader(nodes: &BTreeMap<u64, Running>) -> Result<u64, Box<dyn std::error::Error>> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        for (id, node) in nodes {
            if node.raft.metrics().borrow().state == ServerState::Leader {
                return Ok(*id);
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err("no leader was elected within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `count` keys through whichever node leads, retrying on a leader change.
async fn write(
    nodes: &BTreeMap<u64, Running>,
    phase: &str,
    count: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut written = 0;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while written < count {
        let id = leader(nodes).await?;
        let request = KvRequest::Set {
            key: format!("{phase}-{written}"),
            value: format!("value {written} of {phase}"),
        };
        match nodes[&id].raft.client_write(request).await {
            Ok(_) => written += 1,
            Err(e) if tokio::time::Instant::now() < deadline => {
                println!("  write {phase}-{written} on node {id} failed ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    println!(
        "  {count} writes of phase {phase} committed (leader {})",
        leader(nodes).await?
    );
    Ok(())
}

async fn stop(id: u64, node: Running, router: &Router) -> Result<(), Box<dyn std::error::Error>> {
    router.set(id, None);
    node.raft.shutdown().await?;
    node.store.close()?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let writes: usize = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 30,
    };
    let base = tempfile::tempdir()?;
    let dirs: BTreeMap<u64, PathBuf> = (1..=3)
        .map(|id| (id, base.path().join(format!("raft-kv-{id}"))))
        .collect();
    let router = Router::default();
    let mut nodes = BTreeMap::new();
    for (&id, dir) in &dirs {
        nodes.insert(id, start(id, dir, &router).await?);
    }
    println!("started nodes 1, 2, 3 in {}", base.path().display());
    nodes[&1]
        .raft
        .initialize(BTreeSet::from([1u64, 2, 3]))
        .await?;
    let first = leader(&nodes).await?;
    println!("node {first} leads");
    write(&nodes, "a", writes).await?;

    let killed = first;
    let node = nodes.remove(&killed).ok_or("the leader vanished")?;
    stop(killed, node, &router).await?;
    println!("killed the leader, node {killed}");
    let second = leader(&nodes).await?;
    println!("node {second} leads now");
    write(&nodes, "b", writes).await?;

    nodes.insert(killed, start(killed, &dirs[&killed], &router).await?);
    println!("restarted node {killed} from its directory");
    write(&nodes, "c", writes).await?;

    // Every node has the leader's last entry and has applied it.
    let leader_id = leader(&nodes).await?;
    let last = nodes[&leader_id].raft.metrics().borrow().last_log_index;
    for (id, node) in &nodes {
        node.raft
            .wait(Some(PATIENCE))
            .applied_index_at_least(last, "catch up")
            .await?;
        println!(
            "  node {id}: last log index {:?}, {} keys",
            node.raft.metrics().borrow().last_log_index,
            node.state_machine.data().len()
        );
    }
    let maps: Vec<_> = nodes.values().map(|n| n.state_machine.data()).collect();
    if maps.iter().any(|m| m != &maps[0]) || maps[0].len() != 3 * writes {
        return Err("the state machines differ, or lost a write".into());
    }
    for (id, node) in std::mem::take(&mut nodes) {
        stop(id, node, &router).await?;
    }

    // The three logs, entry by entry: the same log ids and payloads.
    let mut logs = Vec::new();
    for (id, dir) in &dirs {
        let mut store = Store::open(dir, LogConfig::default())?;
        let entries = store.try_get_log_entries(0..).await?;
        store.close()?;
        let encoded: Vec<String> = entries
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        println!("  node {id}: {} entries in its log", encoded.len());
        logs.push(encoded);
    }
    if logs.iter().any(|log| log != &logs[0]) {
        return Err("the three logs differ".into());
    }
    println!(
        "check: the three logs hold the same {} entries",
        logs[0].len()
    );

    for (id, dir) in &dirs {
        let report = verify_dir(dir, &LogConfig::default())?;
        if let Some(severity) = report.worst() {
            return Err(format!("verify of node {id}: {severity:?}: {:?}", report.findings).into());
        }
        println!(
            "check: partlog verify of node {id}'s directory: clean ({} segment(s), log end {})",
            report.segments.len(),
            report.log_end_offset
        );
    }
    println!("raft_kv: all checks passed");
    Ok(())
}
