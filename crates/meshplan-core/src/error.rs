/*!
The one error type of the core library.

Infeasible configurations (a sharding that does not divide, memory that does
not fit) are *not* errors: they are values in the analysis results. `Error` is
for input that cannot be understood: unknown names, malformed files, impossible
hyperparameters, bad units.
*/

/// Everything that can go wrong while reading or validating input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model, chip or other catalog name that does not exist.
    #[error("unknown {kind} '{name}'{}", suggest(suggestions))]
    UnknownName {
        /// "model", "chip", …
        kind: String,
        /// What the user typed.
        name: String,
        /// Closest catalog entries, best first.
        suggestions: Vec<String>,
    },
    /// A TOML/JSON document that does not parse or has wrong/missing fields.
    #[error("{file}{}: {}{message}", loc(*line, *column), field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Parse {
        /// File name (or `<input>`).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Dotted path of the offending field, when known.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A value that cannot be read (a unit, a number, a dtype…).
    #[error("cannot read {what} from '{input}': expected {expected}")]
    BadValue {
        /// Which kind of value.
        what: String,
        /// The text given.
        input: String,
        /// What would have been accepted.
        expected: String,
    },
    /// Hyperparameters that describe no real model.
    #[error("invalid model: {field}: {reason}")]
    InvalidModel {
        /// The field at fault (book symbol in brackets).
        field: String,
        /// Why.
        reason: String,
    },
    /// Hardware description that is inconsistent.
    #[error("invalid hardware: {field}: {reason}")]
    InvalidHardware {
        /// The field at fault.
        field: String,
        /// Why.
        reason: String,
    },
    /// A Hugging Face `model_type` meshplan cannot import.
    #[error("unsupported Hugging Face model_type '{model_type}'; supported: {}", supported.join(", "))]
    UnsupportedModelType {
        /// What the config said.
        model_type: String,
        /// What is supported.
        supported: Vec<String>,
    },
    /// Any other invalid input (a flag combination, a missing section…).
    #[error("{0}")]
    Invalid(String),
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            s.iter()
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Byte offset → (line, column), both 1-based.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

/// `:line:column` of a parse error; `:line` when the column is unknown (a
/// CSV row); nothing when neither is (a whole-document check).
fn loc(line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => String::new(),
        (l, 0) => format!(":{l}"),
        (l, c) => format!(":{l}:{c}"),
    }
}

/// Line and column (1-based) where `key = …` is first assigned in a TOML
/// text, for errors found after parsing (a value out of range); (0, 0) when
/// the key is not written in the text.
pub fn toml_key_position(src: &str, key: &str) -> (usize, usize) {
    for (i, l) in src.lines().enumerate() {
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                return (i + 1, l.len() - t.len() + 1);
            }
        }
    }
    (0, 0)
}

/// Deserialize TOML text into `T`, reporting file, line, column and field path.
pub fn from_toml<T: serde::de::DeserializeOwned>(src: &str, file: &str) -> Result<T> {
    let de = toml::Deserializer::new(src);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = inner
            .span()
            .map(|s| line_col(src, s.start))
            .unwrap_or((1, 1));
        Error::Parse {
            file: file.to_string(),
            line,
            column,
            field: (path != "." && !path.is_empty()).then_some(path),
            message: inner.message().to_string(),
        }
    })
}

/// Deserialize JSON text into `T`, reporting file, line, column and field path.
pub fn from_json<T: serde::de::DeserializeOwned>(src: &str, file: &str) -> Result<T> {
    let mut de = serde_json::Deserializer::from_str(src);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        Error::Parse {
            file: file.to_string(),
            line: inner.line(),
            column: inner.column(),
            field: (path != "." && !path.is_empty()).then_some(path),
            message: strip_pos(&inner.to_string()),
        }
    })
}

fn strip_pos(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}
