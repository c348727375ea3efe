//! The simulator behaves like the real file system: one script of operations runs against
//! `OsStorage` (in a temporary directory) and `SimStorage`, and both must give the same
//! transcript of results, error kinds included.
#![cfg(feature = "sim")]

use std::fmt::Debug;
use std::path::Path;

use partlog::Error;
use partlog::unstable::{LockMode, OpenMode, OsStorage, SimStorage, Storage, StorageFile};

/// A result as one transcript line: the value, or the error's kind (the messages differ).
fn outcome<T: Debug>(result: Result<T, Error>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(Error::Io { source, .. }) => format!("io error {:?}", source.kind()),
        Err(Error::Locked { .. }) => "locked".to_string(),
        Err(other) => format!("other error {other}"),
    }
}

fn read_all(file: &dyn StorageFile) -> Vec<u8> {
    let len = file.len().unwrap();
    let mut buf = vec![0u8; usize::try_from(len).unwrap()];
    file.read_exact_at(&mut buf, 0).unwrap();
    buf
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// Runs the shared script in `base` (an existing, empty directory) and returns its transcript.
fn script(storage: &dyn Storage, base: &Path) -> Vec<String> {
    let mut transcript = Vec::new();
    let mut log = |label: &str, line: String| transcript.push(format!("{label}: {line}"));
    let p = |name: &str| base.join(name);

    // Directories.
    log("mkdir d/e", outcome(storage.create_dir_all(&p("d/e"))));
    log(
        "mkdir d/e again",
        outcome(storage.create_dir_all(&p("d/e"))),
    );
    log(
        "d is a dir",
        outcome(storage.metadata(&p("d")).map(|m| m.is_dir)),
    );

    // Open modes.
    log(
        "open missing, read",
        outcome(storage.open(&p("a"), OpenMode::Read).map(drop)),
    );
    log(
        "open missing, read-write",
        outcome(storage.open(&p("a"), OpenMode::ReadWrite).map(drop)),
    );
    log(
        "open in a missing dir",
        outcome(storage.open(&p("nope/a"), OpenMode::Create).map(drop)),
    );
    let a = storage.open(&p("a"), OpenMode::CreateNew).unwrap();
    log(
        "create-new existing",
        outcome(storage.open(&p("a"), OpenMode::CreateNew).map(drop)),
    );
    log(
        "open a dir as a file",
        outcome(storage.open(&p("d"), OpenMode::ReadWrite).map(drop)),
    );
    let a_again = storage.open(&p("a"), OpenMode::Create).unwrap();
    assert_eq!(a_again.len().unwrap(), 0);

    // Writes, reads past the end, holes and lengths.
    a.write_all_at(b"hello world", 0).unwrap();
    a.write_all_at(b"!", 20).unwrap();
    log("len after a write past the end", outcome(a.len()));
    let bytes = read_all(&*a_again);
    assert_eq!(&bytes[..11], b"hello world");
    assert_eq!(&bytes[11..20], &[0u8; 9], "the hole reads as zeros");
    log("contents through a second handle", format!("{bytes:?}"));
    let mut buf = [0u8; 10];
    log("read at the end", outcome(a.read_at(&mut buf, 21)));
    log("read past the end", outcome(a.read_at(&mut buf, 100)));
    log("read across the end", outcome(a.read_at(&mut buf, 18)));
    log(
        "read_exact across the end",
        outcome(a.read_exact_at(&mut buf, 18)),
    );
    log("set_len longer", outcome(a.set_len(30)));
    log("contents after extending", format!("{:?}", read_all(&*a)));
    log("set_len shorter", outcome(a.set_len(5)));
    log("contents after truncating", format!("{:?}", read_all(&*a)));
    log(
        "write nothing past the end",
        outcome(a.write_all_at(b"", 1000)),
    );
    log("len after writing nothing", outcome(a.len()));
    log(
        "empty file is_empty",
        outcome(a_again.set_len(0).and_then(|()| a.is_empty())),
    );
    a.write_all_at(b"hello", 0).unwrap();

    // A read-only handle.
    let reader = storage.open(&p("a"), OpenMode::Read).unwrap();
    log(
        "write through a read-only handle",
        outcome(reader.write_all_at(b"x", 0)),
    );
    log(
        "set_len through a read-only handle",
        outcome(reader.set_len(0)),
    );
    log(
        "read through a read-only handle",
        format!("{:?}", read_all(&*reader)),
    );
    log(
        "map_read",
        outcome(a.map_read().map(|m| m.map(|bytes| bytes.to_vec()))),
    );

    // Rename replaces the target; both old handles keep their own files.
    let b = storage.open(&p("b"), OpenMode::CreateNew).unwrap();
    b.write_all_at(b"bbbbbbbbbb", 0).unwrap();
    log("rename a over b", outcome(storage.rename(&p("a"), &p("b"))));
    log("a exists", outcome(storage.exists(&p("a"))));
    log(
        "b's length",
        outcome(storage.metadata(&p("b")).map(|m| m.len)),
    );
    a.write_all_at(b"HELLO", 0).unwrap();
    let b_now = storage.open(&p("b"), OpenMode::Read).unwrap();
    log("b through a new handle", format!("{:?}", read_all(&*b_now)));
    log(
        "the replaced file through its old handle",
        format!("{:?}", read_all(&*b)),
    );
    log(
        "rename to itself",
        outcome(storage.rename(&p("b"), &p("b"))),
    );

    // Remove keeps open handles usable.
    log("remove b", outcome(storage.remove(&p("b"))));
    log("b exists", outcome(storage.exists(&p("b"))));
    log(
        "b's metadata",
        outcome(storage.metadata(&p("b")).map(|m| m.len)),
    );
    log("write to a removed file", outcome(a.write_all_at(b"!", 5)));
    log("read a removed file", format!("{:?}", read_all(&*a)));
    log("sync a removed file", outcome(a.sync_data()));
    log("remove b again", outcome(storage.remove(&p("b"))));
    log(
        "rename a missing file",
        outcome(storage.rename(&p("b"), &p("c"))),
    );
    log(
        "rename into a missing dir",
        outcome(
            storage
                .open(&p("x"), OpenMode::CreateNew)
                .and_then(|_| storage.rename(&p("x"), &p("nope/x"))),
        ),
    );

    // Listing and metadata.
    drop(storage.open(&p("c"), OpenMode::CreateNew).unwrap());
    log("list base", outcome(storage.list(base).map(sorted)));
    log("list d", outcome(storage.list(&p("d")).map(sorted)));
    log("list a missing dir", outcome(storage.list(&p("nope"))));
    log("list a file", outcome(storage.list(&p("c"))));
    log(
        "metadata of a missing path",
        outcome(storage.metadata(&p("nope"))),
    );
    log(
        "metadata through a file",
        outcome(storage.metadata(&p("c/x"))),
    );
    log(
        "exists of a missing path",
        outcome(storage.exists(&p("nope"))),
    );
    log(
        "c is a dir",
        outcome(storage.metadata(&p("c")).map(|m| (m.len, m.is_dir))),
    );

    // Directories against files.
    log(
        "mkdir over a file",
        outcome(storage.create_dir_all(&p("c"))),
    );
    log(
        "mkdir under a file",
        outcome(storage.create_dir_all(&p("c/sub"))),
    );
    log("remove a dir", outcome(storage.remove(&p("d"))));
    log(
        "rename a file over a dir",
        outcome(storage.rename(&p("c"), &p("d"))),
    );
    log(
        "rename a dir over a file",
        outcome(storage.rename(&p("d"), &p("c"))),
    );
    storage.create_dir_all(&p("d2")).unwrap();
    log(
        "rename a dir over a non-empty dir",
        outcome(storage.rename(&p("d2"), &p("d"))),
    );
    log(
        "rename a dir in place",
        outcome(storage.rename(&p("d2"), &p("d3"))),
    );
    storage.create_dir_all(&p("d4")).unwrap();
    log(
        "rename a dir over an empty dir",
        outcome(storage.rename(&p("d3"), &p("d4"))),
    );
    log(
        "list base after dir renames",
        outcome(storage.list(base).map(sorted)),
    );

    // Syncs.
    log("sync_data", outcome(a_again.sync_data()));
    log("sync_all", outcome(a_again.sync_all()));
    log("sync_dir", outcome(storage.sync_dir(base)));
    log(
        "sync_dir of a missing dir",
        outcome(storage.sync_dir(&p("nope"))),
    );

    // Locks: flock semantics, even within one process.
    let exclusive = storage.lock(&p("lock"), LockMode::Exclusive).unwrap();
    log(
        "the exclusive lock created its file",
        outcome(storage.exists(&p("lock"))),
    );
    log(
        "exclusive twice",
        outcome(storage.lock(&p("lock"), LockMode::Exclusive).map(drop)),
    );
    log(
        "shared under exclusive",
        outcome(storage.lock(&p("lock"), LockMode::Shared).map(drop)),
    );
    drop(exclusive);
    let shared = storage.lock(&p("lock"), LockMode::Shared).unwrap();
    log(
        "shared twice",
        outcome(storage.lock(&p("lock"), LockMode::Shared).map(drop)),
    );
    log(
        "exclusive under shared",
        outcome(storage.lock(&p("lock"), LockMode::Exclusive).map(drop)),
    );
    drop(shared);
    log(
        "exclusive when free",
        outcome(storage.lock(&p("lock"), LockMode::Exclusive).map(drop)),
    );
    log(
        "shared on a missing file",
        outcome(storage.lock(&p("nolock"), LockMode::Shared).map(drop)),
    );

    transcript
}

#[test]
fn the_simulator_matches_the_os_on_the_shared_script() {
    let dir = tempfile::tempdir().unwrap();
    let os = script(&OsStorage::new(), dir.path());

    let sim = SimStorage::new(7);
    sim.create_dir_all(Path::new("/base")).unwrap();
    let simulated = script(&sim, Path::new("/base"));

    for (os_line, sim_line) in os.iter().zip(&simulated) {
        assert_eq!(os_line, sim_line, "the OS and the simulator disagree");
    }
    assert_eq!(os.len(), simulated.len());

    // Spot checks, so that the script cannot pass by both sides being wrong the same way.
    let line = |label: &str| {
        simulated
            .iter()
            .find(|l| l.starts_with(&format!("{label}: ")))
            .unwrap_or_else(|| panic!("no line {label}"))
            .clone()
    };
    assert_eq!(
        line("open missing, read"),
        "open missing, read: io error NotFound"
    );
    assert_eq!(
        line("create-new existing"),
        "create-new existing: io error AlreadyExists"
    );
    assert_eq!(line("read past the end"), "read past the end: ok 0");
    assert_eq!(line("read across the end"), "read across the end: ok 3");
    assert_eq!(line("b's length"), "b's length: ok 5");
    assert_eq!(
        line("the replaced file through its old handle"),
        format!(
            "the replaced file through its old handle: {:?}",
            b"bbbbbbbbbb"
        )
    );
    assert_eq!(
        line("read a removed file"),
        format!("read a removed file: {:?}", b"HELLO!")
    );
    assert_eq!(line("exclusive twice"), "exclusive twice: locked");
    assert_eq!(line("exclusive when free"), "exclusive when free: ok ()");
}
