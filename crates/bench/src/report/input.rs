//! A run's JSON lines as the report reads them: every line is either used or listed as
//! skipped, with file:line and why — an empty line, a line that is not JSON (a truncated
//! last line of a crashed run among them: the lines before it are still used), not a JSON
//! object, a record of no or an unknown type, or of a known type whose fields do not parse.

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub struct Lines {
    path: PathBuf,
    /// (line number, the parsed object, taken by a section yet).
    lines: Vec<(usize, Value, bool)>,
    /// (line number, why).
    skipped: Vec<(usize, String)>,
}

impl Lines {
    /// Reads `path` (given as `flag`, which a read error names).
    pub fn load(path: &Path, flag: &str) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{flag} {}: cannot read", path.display()))?;
        Ok(Self::parse(path, &text))
    }

    fn parse(path: &Path, text: &str) -> Self {
        let mut s = Self {
            path: path.to_path_buf(),
            lines: Vec::new(),
            skipped: Vec::new(),
        };
        let count = text.lines().count();
        for (i, line) in text.lines().enumerate() {
            let no = i + 1;
            if line.trim().is_empty() {
                s.skip(no, "empty line".into());
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(v) if v.is_object() => s.lines.push((no, v, false)),
                Ok(_) => s.skip(no, "not a JSON object".into()),
                Err(e) if no == count && !text.ends_with('\n') => s.skip(
                    no,
                    format!("truncated last line (the run stopped while writing it?): {e}"),
                ),
                Err(e) => s.skip(no, format!("not JSON: {e}")),
            }
        }
        s
    }

    fn skip(&mut self, line: usize, why: String) {
        self.skipped.push((line, why));
    }

    /// The records whose `key` field (`bench` in results, `mode` in the PyTorch lines) is
    /// one of `kinds` (any kind when `kinds` is empty, for lines not taken yet), parsed as
    /// `T`; those that do not parse are skipped.
    pub fn take<T: DeserializeOwned>(&mut self, key: &str, kinds: &[&str]) -> Vec<T> {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for (no, v, taken) in &mut self.lines {
            let Some(kind) = v.get(key).and_then(Value::as_str) else {
                continue;
            };
            if *taken || !(kinds.is_empty() || kinds.contains(&kind)) {
                continue;
            }
            *taken = true;
            match serde_json::from_value::<T>(v.clone()) {
                Ok(r) => out.push(r),
                Err(e) => bad.push((*no, format!("not a valid {key} {kind:?} record: {e}"))),
            }
        }
        for (no, why) in bad {
            self.skip(no, why);
        }
        out
    }

    /// Every line skipped: those above, and the objects no section took, except records
    /// of `shown_elsewhere` kinds (valid lines the report has no section for).
    pub fn finish(mut self, key: &str, shown_elsewhere: &[&str]) -> Vec<String> {
        let left: Vec<(usize, String)> = self
            .lines
            .iter()
            .filter(|l| !l.2)
            .filter_map(|(no, v, _)| match v.get(key).and_then(Value::as_str) {
                Some(k) if shown_elsewhere.contains(&k) => None,
                Some(k) => Some((*no, format!("unknown record type ({key} {k:?})"))),
                None => Some((*no, format!("no {key:?} field: not a record of this file"))),
            })
            .collect();
        for (no, why) in left {
            self.skip(no, why);
        }
        self.skipped.sort_by_key(|s| s.0);
        let path = self.path.display();
        self.skipped
            .into_iter()
            .map(|(no, why)| format!("{path}:{no}: {why}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Rec {
        world: usize,
    }

    #[test]
    fn every_unused_line_is_named_with_its_number_and_why() {
        let text = "{\"bench\":\"allreduce\",\"world\":2}\n\n\
                    garbage\n\
                    [1,2]\n\
                    {\"bench\":\"allreduce\",\"world\":\"two\"}\n\
                    {\"bench\":\"mystery\"}\n\
                    {\"bench\":\"rmsnorm\"}\n\
                    {\"x\":1}\n\
                    {\"bench\":\"allreduce\",\"wor";
        let mut l = Lines::parse(Path::new("r.jsonl"), text);
        let recs: Vec<Rec> = l.take("bench", &["allreduce"]);
        assert_eq!(recs.iter().map(|r| r.world).collect::<Vec<_>>(), [2]);
        let s = l.finish("bench", &["rmsnorm"]);
        let at = |n: usize| s.iter().find(|x| x.starts_with(&format!("r.jsonl:{n}: ")));
        assert_eq!(s.len(), 7, "{s:#?}");
        assert!(at(2).unwrap().contains("empty line"));
        assert!(at(3).unwrap().contains("not JSON"));
        assert!(at(4).unwrap().contains("not a JSON object"));
        assert!(at(5)
            .unwrap()
            .contains("not a valid bench \"allreduce\" record"));
        assert!(at(6).unwrap().contains("unknown record type"));
        assert!(at(7).is_none(), "a known record the report does not show");
        assert!(at(8).unwrap().contains("no \"bench\" field"));
        assert!(at(9).unwrap().contains("truncated last line"), "{s:#?}");
    }
}
