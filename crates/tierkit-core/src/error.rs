//! One error type for the whole core. Every variant that comes from user input names where the
//! problem is (file and byte offset or line, or the configuration key), so that front ends can
//! print it as a single line and exit with status 2.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A trace (native or text) that cannot be read: corrupt, truncated or unparsable.
    #[error("{}: {location}{}", elide_path(path), elide(msg, MAX_MSG_CHARS))]
    BadTrace { path: String, location: String, msg: String },

    /// A configuration value that cannot work: unknown name, ill-typed parameter, impossible
    /// capacity. `key` names what the user wrote.
    #[error("{}: {}", elide(key, MAX_KEY_CHARS), elide(msg, MAX_MSG_CHARS))]
    BadConfig { key: String, msg: String },

    /// An operating-system error on a named file.
    #[error("{}: {}", elide_path(path), elide(&source.to_string(), MAX_MSG_CHARS))]
    Io { path: String, source: std::io::Error },

    /// A refusal to overwrite a user's file.
    #[error("{}: file exists (use --force to overwrite)", elide_path(path))]
    Exists { path: String },

    /// A broken internal invariant (a bug in tierkit, not in the input).
    #[error("internal invariant violated: {}", elide(.0, MAX_MSG_CHARS))]
    Invariant(String),

    /// The run was stopped from outside (Ctrl-C from the Python front end).
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T> = std::result::Result<T, Error>;

/// Error lines stay readable whatever the input (docs/limits.md; a 1 MB token once made a 1 MB
/// line): one token (a run of non-blank characters, typically an input value quoted back) keeps
/// at most `MAX_TOKEN_CHARS`, its start and end around "…"; a message at most `MAX_MSG_CHARS`, a
/// configuration key `MAX_KEY_CHARS`, a path (and a token with a `/` in it) `MAX_PATH_CHARS`,
/// its start and its file name around "…". Line breaks become spaces, so an error is always
/// one line. The Python front end keeps the whole line, prefix included, within 480
/// characters (`one_line` in python/tierkit/cli.py, with the same limits): room for what
/// tierkit itself says after a quoted value (the known names, why a format was not detected).
pub const MAX_MSG_CHARS: usize = 400;
pub const MAX_KEY_CHARS: usize = 160;
pub const MAX_PATH_CHARS: usize = 80;
pub const MAX_TOKEN_CHARS: usize = 64;

/// Shorten `s`: each over-long token keeps its start and end around "…", then, if the whole is
/// still longer than `max` characters, its middle goes. Short text is returned as it is.
pub fn elide(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // short text passes as it is only when it holds nothing to clean: a short token quoted
    // from the input may hold a NUL or a form feed as well as a long one (found by fuzzing)
    if s.chars().count() <= max.min(MAX_TOKEN_CHARS) && !s.chars().any(needs_cleaning) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(4 * max));
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        // a token's end is what identifies it most often (a file name ends a path)
        if token.contains('/') {
            out.push_str(&elide_path(token));
        } else {
            out.push_str(&middle_out(token, MAX_TOKEN_CHARS, 1, 3));
        }
        token.clear();
    };
    for ch in s.chars() {
        if ch.is_whitespace() {
            flush(&mut token, &mut out);
            // a newline quoted from the input would break the one line
            out.push(' ');
        } else {
            token.push(if ch.is_control() { '?' } else { ch });
        }
    }
    flush(&mut token, &mut out);
    std::borrow::Cow::Owned(middle_out(&out, max, 2, 3).into_owned())
}

/// A character an error line cannot show as it is: a control character or a line break.
fn needs_cleaning(c: char) -> bool {
    c.is_control() || (c.is_whitespace() && c != ' ')
}

/// `s` with its middle replaced by "…" so that it has at most `max` characters, of which the
/// share `num/den` is its head.
fn middle_out(s: &str, max: usize, num: usize, den: usize) -> std::borrow::Cow<'_, str> {
    let n = s.chars().count();
    if n <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let head = (max - 1) * num / den;
    let tail = max - 1 - head;
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    std::borrow::Cow::Owned(format!("{h}…{t}"))
}

/// A path shortened in the middle: its start and its file name (up to two thirds of the room)
/// survive; a control character is shown as '?', so that the error stays one line.
pub fn elide_path(p: &str) -> std::borrow::Cow<'_, str> {
    let n = p.chars().count();
    if n <= MAX_PATH_CHARS && !p.chars().any(needs_cleaning) {
        return std::borrow::Cow::Borrowed(p);
    }
    let clean = |c: char| if needs_cleaning(c) { '?' } else { c };
    if n <= MAX_PATH_CHARS {
        return std::borrow::Cow::Owned(p.chars().map(clean).collect());
    }
    let room = MAX_PATH_CHARS - 1;
    let name = p.rsplit('/').next().map_or(n, |s| s.chars().count() + usize::from(s.len() < p.len()));
    let tail = name.min(room * 2 / 3);
    let h: String = p.chars().take(room - tail).map(clean).collect();
    let t: String = p.chars().skip(n - tail).map(clean).collect();
    std::borrow::Cow::Owned(format!("{h}…{t}"))
}

/// " (did you mean 'X'?)" when one of `known` is a close match of `given` (a typo: at most a
/// third of its characters edited, transposed letters counting once, the closest first), else "".
/// For the errors of unknown names (policies, parameters, platforms, formats).
pub fn did_you_mean<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let g = given.to_ascii_lowercase();
    let limit = (g.chars().count() / 3).max(1);
    known
        .into_iter()
        .map(|k| (edit_distance(&g, &k.to_ascii_lowercase()), k))
        .filter(|&(d, k)| d <= limit && d < k.chars().count())
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| format!(" (did you mean '{k}'?)"))
        .unwrap_or_default()
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions
/// of neighbours each cost one (Damerau 1964). Inputs are names, so quadratic is fine; a long
/// input is not compared at all.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 8 || a.len() > 128 || b.len() > 128 {
        return usize::MAX;
    }
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[(i - 2) * w + j - 2] + 1);
                }
                v
            };
        }
    }
    d[a.len() * w + b.len()]
}

impl Error {
    pub fn at_offset(path: &str, offset: u64, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: format!("offset {offset}: "), msg: msg.into() }
    }
    pub fn at_line(path: &str, line: u64, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: format!("line {line}: "), msg: msg.into() }
    }
    pub fn trace(path: &str, msg: impl Into<String>) -> Self {
        Error::BadTrace { path: path.to_string(), location: String::new(), msg: msg.into() }
    }
    pub fn config(key: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::BadConfig { key: key.into(), msg: msg.into() }
    }
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().display().to_string(), source }
    }
    /// True for errors caused by what the user gave (exit status 2 in the CLI).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, Error::Invariant(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/limits.md, "Error lines": an error naming a 400-character path keeps the path's
    /// start and its file name, and stays short (before, only the end survived: which
    /// directory was lost).
    #[test]
    fn a_long_path_keeps_its_start_and_file_name() {
        let p = format!("/data/run-7/{}/trace-of-gcc.tkt", vec!["d".repeat(60); 6].join("/"));
        assert!(p.chars().count() > 390);
        for e in [
            Error::Exists { path: p.clone() },
            Error::io(&p, std::io::Error::other("disk full")),
            Error::at_offset(&p, 7, "corrupt"),
            Error::config("--out", format!("cannot write {p}")),
        ] {
            let m = e.to_string();
            assert!(m.chars().count() <= MAX_MSG_CHARS, "{} chars: {m}", m.chars().count());
            assert!(m.contains("/data/run-7/") && m.contains("…") && m.contains("/trace-of-gcc.tkt"), "{m}");
        }
        // a file name longer than the room keeps its start (the directory) and its end
        let q = format!("/data/{}.tkt", "n".repeat(300));
        let m = elide_path(&q);
        assert_eq!(m.chars().count(), MAX_PATH_CHARS);
        assert!(m.starts_with("/data/") && m.ends_with("n.tkt"), "{m}");
        assert_eq!(elide_path("/short/x.tkt"), "/short/x.tkt");
    }

    #[test]
    fn a_typo_gets_the_closest_name_and_a_stranger_nothing() {
        let known = ["history", "oracle", "first-touch", "hyplacer"];
        assert_eq!(did_you_mean("histroy", known), " (did you mean 'history'?)");
        assert_eq!(did_you_mean("Orcale", known), " (did you mean 'oracle'?)");
        assert_eq!(did_you_mean("firsttouch", known), " (did you mean 'first-touch'?)");
        assert_eq!(did_you_mean("zzz", known), "");
        assert_eq!(did_you_mean("x", ["y"]), "");
        assert_eq!(did_you_mean(&"h".repeat(10_000), known), "");
    }
}
