//! Background session ids: two-word slugs as OpenClaw names them (`nova-cloud`).

const FIRST: &[&str] = &[
    "amber", "brisk", "calm", "clear", "crisp", "dawn", "deep", "ember", "fair", "fern", "glad",
    "gold", "keen", "kind", "lucky", "mild", "nova", "oak", "pale", "quick", "quiet", "rapid",
    "silver", "soft", "swift", "tidy", "true", "vivid", "warm", "wild", "young", "zesty",
];
const SECOND: &[&str] = &[
    "bay", "brook", "cedar", "cliff", "cloud", "coast", "cove", "creek", "dune", "field", "fjord",
    "glade", "grove", "harbor", "hill", "lake", "leaf", "marsh", "meadow", "mesa", "moss", "peak",
    "pine", "reef", "ridge", "river", "shore", "sky", "stone", "trail", "valley", "wave",
];

/// A slug none of `taken` has: two words, then a number after them if all pairs are used.
pub fn fresh(taken: impl Fn(&str) -> bool) -> String {
    let seed = uuid::Uuid::new_v4().as_u128();
    let n = FIRST.len() * SECOND.len();
    for step in 0..n {
        let i = (seed as usize).wrapping_add(step.wrapping_mul(7919)) % n;
        let slug = format!("{}-{}", FIRST[i / SECOND.len()], SECOND[i % SECOND.len()]);
        if !taken(&slug) {
            return slug;
        }
    }
    let mut k = 2;
    loop {
        let slug = format!("{}-{}-{k}", FIRST[0], SECOND[0]);
        if !taken(&slug) {
            return slug;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_two_words_and_never_taken() {
        let s = fresh(|_| false);
        assert_eq!(s.split('-').count(), 2, "{s}");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(FIRST.len() * SECOND.len()) {
            let s = fresh(|t| seen.contains(t));
            assert!(seen.insert(s));
        }
        assert_eq!(fresh(|t| seen.contains(t)), "amber-bay-2");
    }
}
