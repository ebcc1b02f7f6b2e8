//! The fixtures' manifests (`tests/fixtures/*MANIFEST.txt`, one case a line: its name, its
//! operation and `key=value` parameters) and their `.npy` data files.

use std::path::{Path, PathBuf};

use ndarray::ArrayD;

use super::npy::{Npy, read_npy};

/// `tests/fixtures`.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One line of a manifest.
pub struct Case {
    pub name: String,
    pub op: String,
    pub params: Vec<(String, String)>,
}

impl Case {
    /// The parameter `key`, if the case has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The parameter `key`, which the case must have.
    pub fn req(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| panic!("{}: no {key}", self.name))
    }

    /// The parameter `key` parsed, if the case has it.
    pub fn num<T: std::str::FromStr>(&self, key: &str) -> Option<T> {
        self.get(key)
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{}: bad {key}", self.name)))
    }

    /// The integer parameter `key`, which the case must have.
    pub fn int(&self, key: &str) -> isize {
        self.num(key).unwrap_or_else(|| panic!("{}: no {key}", self.name))
    }
}

/// The cases of the manifest `file` in `tests/fixtures`.
pub fn cases(file: &str) -> Vec<Case> {
    let text =
        std::fs::read_to_string(dir().join(file)).unwrap_or_else(|e| panic!("tests/fixtures/{file}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap().to_string();
            let op = words.next().unwrap().to_string();
            let params = words
                .map(|w| {
                    let (k, v) = w.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            Case { name, op, params }
        })
        .collect()
}

/// The data file `file` as an array of `T`; `None` if it holds another type.
pub fn read<T: Npy>(file: &str) -> Option<ArrayD<T>> {
    read_npy(dir().join("data").join(file))
}
