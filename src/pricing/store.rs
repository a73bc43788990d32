//! The Redis store (design §4): immutable snapshots under their own ids, a `current`
//! pointer moved and announced in one MULTI/EXEC, and the refresh lock.
//!
//! Keys, under a configurable prefix `P`: `P:snapshot:<id>` (JSON), `P:current` (the
//! id), `P:lock:refresh` (holder token); channel `P:updates` (new ids). On a Redis Cluster
//! the prefix is a hash tag, `{P}:current`, so that every key lives in one slot and the
//! MULTI/EXEC and the lock scripts run on one node.
//!
//! Where Redis lives (`TRAINPLAN_REDIS_URL`):
//! - `redis://`, `rediss://`, `unix://`: one server;
//! - `redis+sentinel://[user:password@]host:port[,host:port…]/service[/db]`: the master
//!   that Redis Sentinel names for `service`, asked again after every failure, so a
//!   failover is followed on the next call;
//! - `redis+cluster://[user:password@]host:port[,host:port…]`: a Redis Cluster, from any
//!   of its nodes.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{AsyncCommands, Cmd, Pipeline, RedisFuture, Value};

use super::refresh::StoredSnapshot;

/// A superseded snapshot lives this long, for replicas still loading it.
const SUPERSEDED_TTL_SECONDS: i64 = 86_400;
/// How long connecting, and waiting for one answer, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the store's Redis lives.
#[derive(Clone)]
enum Target {
    Single(redis::Client),
    Sentinel {
        sentinel: Arc<tokio::sync::Mutex<Sentinel>>,
        service: String,
        node: SentinelNodeConnectionInfo,
    },
    Cluster {
        client: Box<ClusterClient>,
        /// One node, for the updates channel: a cluster forwards PUBLISH to every node.
        first_node: redis::Client,
    },
}

/// An open connection to whichever target.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A handle to the store; cheap to clone. The connection is made on first use and
/// remade after failures, so a replica starts (and serves) while Redis is down.
#[derive(Clone)]
pub struct Store {
    target: Target,
    prefix: String,
    connection: Arc<tokio::sync::Mutex<Option<Connection>>>,
}

fn text(error: redis::RedisError) -> String {
    error.to_string()
}

/// Runs one command; a failed one drops the cached connection so that the next call
/// connects afresh (after a Redis restart or a Sentinel failover, say).
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

/// `[user[:password]@]host:port[,host:port…]` and the path after it, for the
/// `redis+sentinel://` and `redis+cluster://` forms.
struct Nodes<'a> {
    username: Option<&'a str>,
    password: Option<&'a str>,
    hosts: Vec<&'a str>,
    path: Vec<&'a str>,
}

fn nodes<'a>(scheme: &str, rest: &'a str) -> Result<Nodes<'a>, String> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (Some(credentials), hosts),
        None => (None, authority),
    };
    let (username, password) = match credentials.map(|c| c.split_once(':')) {
        Some(Some((user, password))) => ((!user.is_empty()).then_some(user), Some(password)),
        Some(None) => (None, credentials),
        None => (None, None),
    };
    let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    if hosts.is_empty() || hosts.iter().any(|h| !h.contains(':')) {
        return Err(format!("{scheme}:// needs host:port[,host:port…]"));
    }
    Ok(Nodes {
        username,
        password,
        hosts,
        path: path.split('/').filter(|p| !p.is_empty()).collect(),
    })
}

impl Nodes<'_> {
    /// The database and the credentials of the servers behind these nodes.
    fn redis_info(&self, db: i64) -> redis::RedisConnectionInfo {
        let mut info = redis::RedisConnectionInfo::default().set_db(db);
        if let Some(user) = self.username {
            info = info.set_username(user);
        }
        if let Some(password) = self.password {
            info = info.set_password(password);
        }
        info
    }

    /// Each node as a connection address, carrying `redis_info(0)`.
    fn addresses(&self) -> Result<Vec<redis::ConnectionInfo>, String> {
        self.hosts
            .iter()
            .map(|host| {
                redis::IntoConnectionInfo::into_connection_info(format!("redis://{host}"))
                    .map(|address| address.set_redis_settings(self.redis_info(0)))
                    .map_err(text)
            })
            .collect()
    }
}

impl Target {
    fn parse(url: &str) -> Result<Self, String> {
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            let n = nodes("redis+sentinel", rest)?;
            let service = n
                .path
                .first()
                .ok_or("redis+sentinel:// needs the master's service name as its path")?;
            let db = match n.path.get(1) {
                Some(db) => db
                    .parse::<i64>()
                    .map_err(|_| format!("redis+sentinel:// database {db:?} is not a number"))?,
                None => 0,
            };
            // The credentials and database are the master's; the sentinels are asked
            // without them.
            let master = n.redis_info(db);
            let sentinels: Vec<String> = n.hosts.iter().map(|h| format!("redis://{h}")).collect();
            Ok(Target::Sentinel {
                sentinel: Arc::new(tokio::sync::Mutex::new(
                    Sentinel::build(sentinels).map_err(text)?,
                )),
                service: service.to_string(),
                node: SentinelNodeConnectionInfo::default().set_redis_connection_info(master),
            })
        } else if let Some(rest) = url.strip_prefix("redis+cluster://") {
            let addresses = nodes("redis+cluster", rest)?.addresses()?;
            // `nodes` guarantees at least one host.
            let first_node = redis::Client::open(addresses[0].clone()).map_err(text)?;
            // The builder takes the credentials from the first address.
            let client = ClusterClient::builder(addresses)
                .connection_timeout(CONNECT_TIMEOUT)
                .response_timeout(RESPONSE_TIMEOUT)
                .retries(1)
                .build()
                .map_err(text)?;
            Ok(Target::Cluster {
                client: Box::new(client),
                first_node,
            })
        } else {
            Ok(Target::Single(redis::Client::open(url).map_err(text)?))
        }
    }
}

impl Store {
    pub fn new(url: &str, prefix: &str) -> Result<Self, String> {
        Ok(Self {
            target: Target::parse(url)?,
            prefix: prefix.to_string(),
            connection: Default::default(),
        })
    }

    fn key(&self, name: &str) -> String {
        match self.target {
            Target::Cluster { .. } => format!("{{{}}}:{name}", self.prefix),
            _ => format!("{}:{name}", self.prefix),
        }
    }

    pub fn channel(&self) -> String {
        self.key("updates")
    }

    /// A client for one server that carries the updates channel: the server itself, the
    /// master Sentinel names now, or one cluster node.
    pub async fn channel_client(&self) -> Result<redis::Client, String> {
        match &self.target {
            Target::Single(client) => Ok(client.clone()),
            Target::Sentinel {
                sentinel,
                service,
                node,
            } => {
                let mut sentinel = sentinel.lock().await;
                let master = sentinel.async_master_for(service, Some(node));
                tokio::time::timeout(CONNECT_TIMEOUT, master)
                    .await
                    .map_err(|_| {
                        format!("Sentinel did not name the master of {service:?} in time")
                    })?
                    .map_err(text)
            }
            Target::Cluster { first_node, .. } => Ok(first_node.clone()),
        }
    }

    async fn connection(&self) -> Result<Connection, String> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let connection = match &self.target {
            Target::Cluster { client, .. } => {
                Connection::Cluster(client.get_async_connection().await.map_err(text)?)
            }
            _ => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(1);
                let client = self.channel_client().await?;
                Connection::Single(
                    ConnectionManager::new_with_config(client, config)
                        .await
                        .map_err(text)?,
                )
            }
        };
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
