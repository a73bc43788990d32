//! The Redis store (design §4): immutable snapshots under their own ids, a `current`
//! pointer moved and announced in one MULTI/EXEC, and the refresh lock.
//!
//! Keys, under a configurable prefix `P`: `P:snapshot:<id>` (JSON), `P:current` (the
//! id), `P:lock:refresh` (holder token); channel `P:updates` (new ids).

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::refresh::StoredSnapshot;

/// A superseded snapshot lives this long, for replicas still loading it.
const SUPERSEDED_TTL_SECONDS: i64 = 86_400;

/// A handle to the store; cheap to clone. The connection is made on first use and
/// remade after failures, so a replica starts (and serves) while Redis is down.
#[derive(Clone)]
pub struct Store {
    client: redis::Client,
    prefix: String,
    connection: std::sync::Arc<tokio::sync::Mutex<Option<ConnectionManager>>>,
}

fn text(error: redis::RedisError) -> String {
    error.to_string()
}

/// Runs one command; a failed one drops the cached connection so that the next call
/// connects afresh (after a Redis restart, say).
macro_rules! with_connection {
    ($store:expr, |$c:ident| $body:expr) => {{
        let mut $c = $store.connection().await?;
        let result = $body.await.map_err(text);
        if result.is_err() {
            $store.connection.lock().await.take();
        }
        result
    }};
}

impl Store {
    pub fn new(url: &str, prefix: &str) -> Result<Self, String> {
        Ok(Self {
            client: redis::Client::open(url).map_err(text)?,
            prefix: prefix.to_string(),
            connection: Default::default(),
        })
    }

    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.prefix)
    }

    pub fn channel(&self) -> String {
        self.key("updates")
    }

    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    async fn connection(&self) -> Result<ConnectionManager, String> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(1);
        let connection = ConnectionManager::new_with_config(self.client.clone(), config)
            .await
            .map_err(text)?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Id of the current snapshot, if any.
    pub async fn current_id(&self) -> Result<Option<String>, String> {
        with_connection!(self, |c| c.get(self.key("current")))
    }

    pub async fn load(&self, id: &str) -> Result<Option<StoredSnapshot>, String> {
        let mut c = self.connection().await?;
        let json: Option<String> = c
            .get(self.key(&format!("snapshot:{id}")))
            .await
            .map_err(text)?;
        json.map(|j| serde_json::from_str(&j).map_err(|e| format!("snapshot {id}: {e}")))
            .transpose()
    }

    pub async fn load_current(&self) -> Result<Option<StoredSnapshot>, String> {
        match self.current_id().await? {
            Some(id) => self.load(&id).await,
            None => Ok(None),
        }
    }

    /// Writes the snapshot, moves `current`, lets the previous one expire and announces
    /// the new id, all in one MULTI/EXEC.
    pub async fn publish(
        &self,
        snapshot: &StoredSnapshot,
        previous: Option<&str>,
    ) -> Result<(), String> {
        let json = serde_json::to_string(snapshot).map_err(|e| e.to_string())?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .set(self.key(&format!("snapshot:{}", snapshot.id)), json)
            .set(self.key("current"), &snapshot.id);
        if let Some(old) = previous.filter(|old| !old.is_empty() && *old != snapshot.id) {
            pipe.expire(self.key(&format!("snapshot:{old}")), SUPERSEDED_TTL_SECONDS);
        }
        pipe.publish(self.channel(), &snapshot.id);
        with_connection!(self, |c| pipe.query_async::<()>(&mut c))
    }

    /// `SET lock token NX PX ttl`: true when this caller now holds the lock.
    pub async fn try_lock(&self, token: &str, ttl: Duration) -> Result<bool, String> {
        let mut command = redis::cmd("SET");
        command
            .arg(self.key("lock:refresh"))
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64);
        let set: Option<String> = with_connection!(self, |c| command.query_async(&mut c))?;
        Ok(set.is_some())
    }

    /// Extends the lock if this caller still holds it.
    pub async fn renew(&self, token: &str, ttl: Duration) -> Result<bool, String> {
        let script = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
        );
        let mut invocation = script.key(self.key("lock:refresh"));
        invocation.arg(token).arg(ttl.as_millis() as u64);
        let renewed: i64 = with_connection!(self, |c| invocation.invoke_async(&mut c))?;
        Ok(renewed == 1)
    }

    /// Releases the lock if this caller still holds it.
    pub async fn unlock(&self, token: &str) -> Result<(), String> {
        let script = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let mut invocation = script.key(self.key("lock:refresh"));
        invocation.arg(token);
        with_connection!(self, |c| invocation.invoke_async::<i64>(&mut c)).map(|_| ())
    }
}
