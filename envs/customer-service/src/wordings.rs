//! [`TrainWordings`]: which of a request's train wordings the train split says it in.

use serde::{Deserialize, Deserializer, Serialize, de::Error as _};

/// How many wordings of each request the train split can rotate through (the test split's
/// wording, the eleventh, is never among them).
pub const TRAIN_WORDINGS: usize = 10;

/// The train wordings the train split rotates through, in order (indices `0..TRAIN_WORDINGS`,
/// each at most once; all ten by default). Training on some and then on the others measures
/// what a stage learns from wordings the previous one never saw; the test split keeps its
/// held-out wording whatever this holds. Written in a configuration as
/// `"train_wordings": [0, 1, 2]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "Vec<usize>")]
pub struct TrainWordings(Vec<usize>);

impl TrainWordings {
    /// The given wordings, checked: none empty, each below [`TRAIN_WORDINGS`], none twice.
    pub fn new(wordings: Vec<usize>) -> Result<Self, String> {
        if wordings.is_empty() {
            return Err("train_wordings: at least one wording".into());
        }
        let mut seen = [false; TRAIN_WORDINGS];
        for &w in &wordings {
            let slot = seen.get_mut(w).ok_or_else(|| {
                format!(
                    "train_wordings: wording {w} does not exist (0 to {})",
                    TRAIN_WORDINGS - 1
                )
            })?;
            if std::mem::replace(slot, true) {
                return Err(format!("train_wordings: wording {w} given twice"));
            }
        }
        Ok(Self(wordings))
    }

    /// Whether these are all ten, in order (the bundled tasks).
    pub fn is_all(&self) -> bool {
        self.0.iter().copied().eq(0..TRAIN_WORDINGS)
    }

    /// The wording of the train split's `block`-th block of tasks.
    pub fn of_block(&self, block: usize) -> usize {
        self.0[block % self.0.len()]
    }
}

impl Default for TrainWordings {
    fn default() -> Self {
        Self((0..TRAIN_WORDINGS).collect())
    }
}

/// Checked as [`TrainWordings::new`] checks; every error names the setting (serde's own type
/// errors do not name the field they come from).
impl<'de> Deserialize<'de> for TrainWordings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wordings = Vec::<usize>::deserialize(deserializer).map_err(|e| {
            D::Error::custom(format!(
                "train_wordings: {e} (a list of wordings, 0 to {})",
                TRAIN_WORDINGS - 1
            ))
        })?;
        Self::new(wordings).map_err(D::Error::custom)
    }
}

impl From<TrainWordings> for Vec<usize> {
    fn from(wordings: TrainWordings) -> Self {
        wordings.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_wordings_are_refused_with_the_reason() {
        assert!(
            TrainWordings::new(vec![])
                .unwrap_err()
                .contains("at least one")
        );
        assert!(
            TrainWordings::new(vec![3, 10])
                .unwrap_err()
                .contains("10 does not exist")
        );
        assert!(
            TrainWordings::new(vec![3, 3])
                .unwrap_err()
                .contains("3 given twice")
        );
        assert!(TrainWordings::default().is_all());
        let some = TrainWordings::new(vec![7, 8, 9]).unwrap();
        assert!(!some.is_all());
        assert_eq!(
            (0..4).map(|b| some.of_block(b)).collect::<Vec<_>>(),
            [7, 8, 9, 7]
        );
    }
}
