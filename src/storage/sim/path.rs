//! Paths inside the simulator: one root, names as UTF-8 strings, `..` applied lexically.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A path resolved against the simulator's single root.
///
/// `a/b`, `/a/b` and `/a/./c/../b` all name the same file: the simulator has no working
/// directory and no symbolic links, so resolution is purely lexical.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SimPath {
    names: Vec<String>,
}

impl SimPath {
    /// The root directory.
    pub(super) fn root() -> Self {
        SimPath { names: Vec::new() }
    }

    /// Resolves a caller's path. Names that are not UTF-8 are rejected: partlog's and Kafka's
    /// file names are ASCII, and the snapshots report names as strings.
    pub(super) fn parse(path: &Path) -> io::Result<Self> {
        let mut names: Vec<String> = Vec::new();
        for component in path.components() {
            match component {
                Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
                Component::ParentDir => {
                    // `/..` is `/`, as in POSIX.
                    names.pop();
                }
                Component::Normal(name) => match name.to_str() {
                    Some(name) => names.push(name.to_owned()),
                    None => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "the simulator supports only UTF-8 file names",
                        ));
                    }
                },
            }
        }
        Ok(SimPath { names })
    }

    /// The names from the root down.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    /// The parent's names and the last name, or `None` for the root.
    pub(super) fn split_last(&self) -> Option<(&[String], &str)> {
        self.names
            .split_last()
            .map(|(last, parents)| (parents, last.as_str()))
    }

    /// The child `name` of this directory.
    pub(super) fn join(&self, name: &str) -> Self {
        let mut names = self.names.clone();
        names.push(name.to_owned());
        SimPath { names }
    }

    /// The absolute form (`/a/b`) that snapshots, statistics and events report.
    pub(super) fn to_path_buf(&self) -> PathBuf {
        let mut path = PathBuf::from("/");
        path.extend(&self.names);
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_absolute_and_dotted_paths_name_the_same_file() {
        let want = SimPath::parse(Path::new("/a/b")).unwrap();
        for spelling in ["a/b", "/a/./b", "/a/c/../b", "./a/b/", "/../a/b"] {
            assert_eq!(
                SimPath::parse(Path::new(spelling)).unwrap(),
                want,
                "{spelling}"
            );
        }
        assert_eq!(want.to_path_buf(), PathBuf::from("/a/b"));
        assert_eq!(SimPath::parse(Path::new("/")).unwrap(), SimPath::root());
        assert_eq!(SimPath::root().to_path_buf(), PathBuf::from("/"));
    }

    #[test]
    fn non_utf8_names_are_invalid_input() {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(b"/a/\xff"));
        let err = SimPath::parse(path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
