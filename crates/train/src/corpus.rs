//! The embedded default corpus: short stories from a small grammar, generated from a seed
//! (same seed, same bytes, on any machine). The structure is learnable at several ranges:
//! word spelling and sentence templates (local), a character's name and pronoun held
//! through the story (long range), and counting (`had 3 apples … now had 4 apples`).

use crate::rng::SplitMix64;

/// The separator between documents (one token in the trained tokenizer).
pub const EOT: &str = "<|endoftext|>";

const NAMES_HE: &[&str] = &[
    "Tom", "Ben", "Sam", "Max", "Leo", "Jack", "Finn", "Oscar", "Noah", "Theo", "Hugo", "Milo",
];
const NAMES_SHE: &[&str] = &[
    "Lily", "Mia", "Anna", "Emma", "Zoe", "Lucy", "Ella", "Ruby", "Nora", "Ivy", "Rosa", "Maya",
];
const ANIMALS: &[&str] = &[
    "cat", "dog", "rabbit", "fox", "bear", "mouse", "bird", "frog", "duck", "owl", "pig", "lion",
];
const ADJS: &[&str] = &[
    "little", "big", "happy", "brave", "shy", "kind", "funny", "small", "curious", "gentle",
];
const HOMES: &[&str] = &["house", "hole", "nest", "cave", "hut", "tree"];
const PLACES: &[&str] = &[
    "forest", "river", "hill", "park", "lake", "garden", "farm", "beach",
];
const ACTIVITIES: &[&str] = &[
    "play with a ball",
    "sing songs",
    "run in the grass",
    "read books",
    "jump in puddles",
    "look at the stars",
    "dig in the sand",
    "paint pictures",
];
const THINGS: &[(&str, &str)] = &[
    ("apple", "apples"),
    ("flower", "flowers"),
    ("stone", "stones"),
    ("shell", "shells"),
    ("cookie", "cookies"),
    ("leaf", "leaves"),
    ("berry", "berries"),
    ("feather", "feathers"),
];
const FOUND: &[&str] = &[
    "a shiny key",
    "a red box",
    "an old map",
    "a tiny boat",
    "a blue hat",
    "a lost kite",
];
const FEELINGS: &[&str] = &["happy", "tired", "proud", "glad", "sleepy", "excited"];
const WEATHER: &[&str] = &["sunny", "rainy", "windy", "cold", "warm", "cloudy"];
const NUMBERS: &[&str] = &[
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

struct Character {
    name: &'static str,
    animal: &'static str,
    he: &'static str,
    his: &'static str,
}

fn character(r: &mut SplitMix64, not: Option<&str>) -> Character {
    loop {
        let she = r.chance(1, 2);
        let name = *r.pick(if she { NAMES_SHE } else { NAMES_HE });
        if Some(name) == not {
            continue;
        }
        let (he, his) = if she { ("she", "her") } else { ("he", "his") };
        return Character {
            name,
            animal: ANIMALS[r.below(ANIMALS.len() as u64) as usize],
            he,
            his,
        };
    }
}

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// One story (no separator).
pub fn story(r: &mut SplitMix64) -> String {
    let a = character(r, None);
    let b = character(r, Some(a.name));
    let place = *r.pick(PLACES);
    let mut s = format!(
        "Once upon a time, there was a {} {} named {}. {} lived in a {} near the {}. ",
        r.pick(ADJS),
        a.animal,
        a.name,
        cap(a.he),
        r.pick(HOMES),
        place
    );
    s += &format!("Every day, {} liked to {}. ", a.name, r.pick(ACTIVITIES));
    for _ in 0..1 + r.below(3) {
        match r.below(4) {
            0 => {
                let (one, many) = *r.pick(THINGS);
                let n = 1 + r.below(8) as usize;
                let k = 1 + r.below((10 - n as u64).min(3)) as usize;
                s += &format!(
                    "{} had {} {}. {} gave {} {} more. Now {} had {} {}. ",
                    a.name,
                    NUMBERS[n],
                    if n == 1 { one } else { many },
                    b.name,
                    a.name,
                    NUMBERS[k],
                    a.name,
                    NUMBERS[n + k],
                    many
                );
            }
            1 => {
                s += &format!(
                    "One {} day, {} found {} by the {}. \"Look!\" said {}. {} showed it to {} friend {} the {}. ",
                    r.pick(WEATHER),
                    a.name,
                    r.pick(FOUND),
                    place,
                    a.name,
                    cap(a.he),
                    a.his,
                    b.name,
                    b.animal
                );
            }
            2 => {
                s += &format!(
                    "{} and {} went to the {} together. They wanted to {}. ",
                    a.name,
                    b.name,
                    r.pick(PLACES),
                    r.pick(ACTIVITIES)
                );
            }
            _ => {
                s += &format!(
                    "{} was sad because {} could not find {} {}. {} helped {} look for it, and soon they found it. ",
                    a.name,
                    a.he,
                    a.his,
                    r.pick(FOUND).split(' ').skip(1).collect::<Vec<_>>().join(" "),
                    b.name,
                    a.name
                );
            }
        }
    }
    s += &format!(
        "At the end of the day, {} went home. {} was very {}. The end.",
        a.name,
        cap(a.he),
        r.pick(FEELINGS)
    );
    s
}

/// Stories from `seed` until at least `bytes` bytes: the documents, without separators.
pub fn stories(seed: u64, bytes: usize) -> Vec<String> {
    let mut r = SplitMix64::new(seed);
    let mut out = Vec::new();
    let mut n = 0;
    while n < bytes {
        let s = story(&mut r);
        n += s.len() + 1;
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_about_the_size_asked() {
        let a = stories(7, 100_000);
        assert_eq!(a, stories(7, 100_000));
        assert_ne!(a, stories(8, 100_000));
        let n: usize = a.iter().map(|s| s.len() + 1).sum();
        assert!((100_000..101_000).contains(&n), "{n}");
        // Counting is right: "had N x ... Now A had M x" with M = N + K.
        for s in &a {
            assert!(
                s.starts_with("Once upon a time") && s.ends_with("The end."),
                "{s}"
            );
            let w: Vec<&str> = s.split(' ').collect();
            for (i, t) in w.iter().enumerate() {
                if *t == "gave" {
                    let num = |x: &str| NUMBERS.iter().position(|n| *n == x).unwrap();
                    let (had, more, now) = (num(w[i - 3]), num(w[i + 2]), num(w[i + 7]));
                    assert_eq!(had + more, now, "{s}");
                }
            }
        }
    }
}
