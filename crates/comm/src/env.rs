//! Rank discovery from the launcher's environment, torchrun or Slurm conventions.
//!
//! torchrun: `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`.
//! Slurm (srun): `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, master = first host of
//! `SLURM_JOB_NODELIST` (or `MASTER_ADDR` if set), port = `MASTER_PORT` or 29500.

use crate::error::{CommError, Result};

/// Where this process sits in the job, and where rank 0's store listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistEnv {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
}

pub const DEFAULT_PORT: u16 = 29500;

/// Whether this process prints what every rank would print alike (the device a run chose):
/// rank 0 of a launch, or a process no launcher started (RANK unset).
pub fn prints_for_all_ranks() -> bool {
    std::env::var("RANK").map_or(true, |r| r == "0")
}

impl DistEnv {
    /// Reads the process environment (torchrun first, then Slurm).
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Same as [`DistEnv::from_env`] over any variable source (tests use a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let env = if get("RANK").is_some() || get("WORLD_SIZE").is_some() {
            DistEnv {
                rank: parse(&get, "RANK")?,
                world_size: parse(&get, "WORLD_SIZE")?,
                local_rank: match get("LOCAL_RANK") {
                    Some(_) => parse(&get, "LOCAL_RANK")?,
                    None => 0,
                },
                master_addr: get("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into()),
                master_port: port(&get)?,
            }
        } else if get("SLURM_PROCID").is_some() {
            let master_addr = match get("MASTER_ADDR") {
                Some(a) => a,
                None => {
                    let list = get("SLURM_JOB_NODELIST")
                        .or_else(|| get("SLURM_NODELIST"))
                        .ok_or_else(|| {
                            env_err(
                                "SLURM_JOB_NODELIST",
                                "not set (needed to find the master node)",
                            )
                        })?;
                    first_host(&list).map_err(|m| env_err("SLURM_JOB_NODELIST", &m))?
                }
            };
            DistEnv {
                rank: parse(&get, "SLURM_PROCID")?,
                world_size: parse(&get, "SLURM_NTASKS")?,
                local_rank: match get("SLURM_LOCALID") {
                    Some(_) => parse(&get, "SLURM_LOCALID")?,
                    None => 0,
                },
                master_addr,
                master_port: port(&get)?,
            }
        } else {
            return Err(env_err(
                "RANK",
                "not set: launch with `comm-launch`, torchrun or srun (or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
            ));
        };
        if env.world_size == 0 {
            return Err(env_err("WORLD_SIZE", "must be at least 1"));
        }
        if env.rank >= env.world_size {
            return Err(env_err(
                "RANK",
                &format!("{} is not below WORLD_SIZE {}", env.rank, env.world_size),
            ));
        }
        Ok(env)
    }
}

fn env_err(name: &str, msg: &str) -> CommError {
    CommError::Env {
        name: name.into(),
        msg: msg.into(),
    }
}

fn parse(get: &impl Fn(&str) -> Option<String>, name: &str) -> Result<usize> {
    let v = get(name).ok_or_else(|| env_err(name, "not set"))?;
    v.trim()
        .parse()
        .map_err(|_| env_err(name, &format!("{v:?} is not a non-negative integer")))
}

fn port(get: &impl Fn(&str) -> Option<String>) -> Result<u16> {
    match get("MASTER_PORT") {
        None => Ok(DEFAULT_PORT),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| env_err("MASTER_PORT", &format!("{v:?} is not a port number"))),
    }
}

/// First host of a Slurm node list: `node[01-04,07],gpu2` → `node01`.
pub fn first_host(list: &str) -> std::result::Result<String, String> {
    let list = list.trim();
    if list.is_empty() {
        return Err("empty node list".into());
    }
    // The first entry ends at the first comma outside brackets.
    let mut depth = 0usize;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let entry = &list[..end];
    match entry.find('[') {
        None => Ok(entry.to_string()),
        Some(open) => {
            let close = entry
                .find(']')
                .ok_or_else(|| format!("unbalanced '[' in {list:?}"))?;
            let prefix = &entry[..open];
            let first = entry[open + 1..close]
                .split([',', '-'])
                .next()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("empty range in {list:?}"))?;
            Ok(format!("{prefix}{first}{}", &entry[close + 1..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<DistEnv> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DistEnv::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn torchrun_variables() {
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "1234"),
        ])
        .unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (3, 8, 1));
        assert_eq!((e.master_addr.as_str(), e.master_port), ("10.0.0.1", 1234));
    }

    #[test]
    fn slurm_variables_and_nodelist() {
        let e = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_NODELIST", "gpu[07-08,11],login1"),
        ])
        .unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (5, 16, 1));
        assert_eq!(e.master_addr, "gpu07");
        assert_eq!(e.master_port, DEFAULT_PORT);
        assert_eq!(first_host("a1,b2").unwrap(), "a1");
        assert_eq!(first_host("n[3]-ib").unwrap(), "n3-ib");
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = env(&[("RANK", "x"), ("WORLD_SIZE", "2")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("RANK") && err.contains("\"x\""), "{err}");
        let err = env(&[("RANK", "2"), ("WORLD_SIZE", "2")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not below WORLD_SIZE 2"), "{err}");
        let err = env(&[]).unwrap_err().to_string();
        assert!(err.contains("RANK"), "{err}");
        let err = env(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_PORT", "99999")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("MASTER_PORT"), "{err}");
    }
}
