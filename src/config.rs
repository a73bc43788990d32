//! Configuration: built-in defaults < optional file < `TRAINPLAN_*` environment variables.

use serde::Deserialize;

const DEFAULTS: &str = include_str!("defaults.toml");

/// The items of a comma-separated list (settings, query values), trimmed, empties dropped.
pub fn comma_list(text: Option<&str>) -> Vec<String> {
    text.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    })
    .unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub listen: String,
    pub log_format: LogFormat,
    pub log_level: String,
    pub body_limit_bytes: usize,
    pub fx_cny_per_usd: f64,
    pub fx_as_of: String,
    pub fx_source: String,
    /// Redis for shared, live prices; absent: the embedded snapshot only.
    #[serde(default)]
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    /// A feeds file replacing the built-in `pricing-feeds/feeds.toml`.
    #[serde(default)]
    pub feeds_file: Option<String>,
    /// Token for `POST /v1/pricing/refresh`; absent: refresh over HTTP is disabled.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// How often a replica checks Redis for a newer snapshot (pub/sub can miss one).
    pub poll_interval_seconds: u64,
    /// `name:sha256hex,…`: when set, `/v1/` requests need one of these keys.
    #[serde(default)]
    pub api_keys: Option<String>,
    /// Host names `/mcp` accepts besides loopback, comma-separated.
    #[serde(default)]
    pub mcp_allowed_hosts: Option<String>,
    /// Requests a second per API key (or client address); 0 turns the limit off.
    pub rate_limit_per_second: u64,
    pub rate_limit_burst: u32,
    /// Origins browsers may call from, comma-separated (none by default).
    #[serde(default)]
    pub cors_origins: Option<String>,
    /// How long an estimate answer is reused for an identical request; 0 turns reuse off.
    pub answer_cache_seconds: u64,
    /// Bytes of answers kept for reuse.
    pub answer_cache_bytes: u64,
}

impl Settings {
    /// An empty variable (`TRAINPLAN_ADMIN_TOKEN=` from a template) means "not set": an
    /// empty admin token must never authorise anything.
    fn without_empty_values(mut self) -> Self {
        for value in [
            &mut self.redis_url,
            &mut self.feeds_file,
            &mut self.admin_token,
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                *value = None;
            }
        }
        self
    }

    /// The configured exchange rate.
    pub fn fx(&self) -> crate::pricing::Fx {
        crate::pricing::Fx {
            cny_per_usd: self.fx_cny_per_usd,
            as_of: self.fx_as_of.clone(),
            source: self.fx_source.clone(),
        }
    }

    /// Loads the layers; `file` is the optional config file.
    pub fn load(file: Option<&str>) -> Result<Self, config::ConfigError> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        if let Some(path) = file {
            builder = builder.add_source(config::File::with_name(path).required(true));
        }
        builder
            .add_source(config::Environment::with_prefix("TRAINPLAN").try_parsing(true))
            .build()?
            .try_deserialize()
            .map(Self::without_empty_values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_defaults_serve_on_localhost_8080() {
        let settings: Settings = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml))
            .build()
            .unwrap()
            .try_deserialize()
            .unwrap();
        assert_eq!(settings.listen, "127.0.0.1:8080");
        assert_eq!(settings.body_limit_bytes, 65_536);
        assert_eq!(settings.log_format, LogFormat::Human);
        assert_eq!(settings.redis_url, None);
        assert_eq!(settings.admin_token, None);
    }

    #[test]
    fn an_empty_admin_token_is_no_token() {
        let settings: Settings = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml))
            .set_override("admin_token", "  ")
            .unwrap()
            .set_override("redis_url", "")
            .unwrap()
            .build()
            .unwrap()
            .try_deserialize()
            .map(Settings::without_empty_values)
            .unwrap();
        assert_eq!(settings.admin_token, None);
        assert_eq!(settings.redis_url, None);
    }
}
