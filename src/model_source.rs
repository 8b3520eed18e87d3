//! [`ModelSource`]: the model `--model` names, parsed once where the command line meets the
//! library.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which model a run starts from.
///
/// ```
/// use sandgym::ModelSource;
/// let tiny: ModelSource = "tiny".parse().unwrap();
/// assert!(!tiny.is_pretrained());
/// let smol: ModelSource = "smollm2-135m-instruct".parse().unwrap();
/// assert_eq!(smol.pretrained(), Some("smollm2-135m-instruct"));
/// assert_eq!(smol.to_string(), "smollm2-135m-instruct");
/// assert!("".parse::<ModelSource>().is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ModelSource {
    /// The small from-scratch model with the default tokenizer (`tiny`).
    #[default]
    Tiny,
    /// A pretrained model: a known name (`sandgym model list`), a `.gguf` file, a Hugging
    /// Face directory or a sandgym checkpoint.
    Pretrained(String),
}

impl ModelSource {
    /// The name of the small from-scratch model on the command line.
    pub const TINY: &'static str = "tiny";

    /// Whether it is a pretrained model (anything but the tiny one).
    pub fn is_pretrained(&self) -> bool {
        matches!(self, Self::Pretrained(_))
    }

    /// The pretrained model's name or path, if it is one.
    pub fn pretrained(&self) -> Option<&str> {
        match self {
            Self::Tiny => None,
            Self::Pretrained(spec) => Some(spec),
        }
    }
}

impl FromStr for ModelSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "" => Err("a model is `tiny`, a known name, a .gguf file or a directory".into()),
            Self::TINY => Ok(Self::Tiny),
            _ => Ok(Self::Pretrained(s.to_owned())),
        }
    }
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.pretrained().unwrap_or(Self::TINY))
    }
}

/// As the string the command line takes (`config.json` keeps its format).
impl Serialize for ModelSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ModelSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}
