//! An organisation's own price sheet (negotiated rates, yuan quotes) in the snapshot's
//! column format, from a URL or a file.

use super::{ParseError, Parsed, Stamp};
use crate::pricing::quote::read_csv;

pub fn parse(bytes: &[u8], stamp: &Stamp) -> Result<Parsed, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError(format!("not UTF-8: {e}")))?;
    let (quotes, rejected) = read_csv(text);
    if quotes.is_empty() && !rejected.is_empty() {
        return Err(ParseError(format!("no readable row: {}", rejected[0])));
    }
    Ok(Parsed {
        quotes: quotes
            .into_iter()
            .map(|mut q| {
                q.feed = Some(stamp.feed.clone());
                q.fetched_at = Some(stamp.fetched_at.clone());
                q
            })
            .collect(),
        rejected,
        next_page: None,
    })
}
