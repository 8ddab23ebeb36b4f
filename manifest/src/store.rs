//! Where a run's, a dataset's and a campaign's files live: a local directory, or an object store (`s3://`,
//! `gs://`, `az://`, `abfss://`, `file://`) through the `object_store` crate, configured from the
//! environment as each provider's own tools are (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
//!
//! Submissions are put a file at a time under their key ([`Location::put_bytes`]) and read back to check
//! what landed ([`Location::read_back`]); a coordinator lists and fetches them ([`Location::list`],
//! [`Location::get`]).
//!
//! Episodes work on local files, so a location in a store is mirrored in a local staging directory: a
//! dataset is fetched before its tasks run; a run's files are put as soon as each is complete (a task's
//! outputs when its episode ends, the results file after every result, the summary last), so that shards
//! on many machines share one run and a stopped shard loses nothing it finished.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::TryStreamExt;
pub use object_store::PutPayload;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path as StorePath;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, ObjectStoreScheme, RetryConfig};

/// A directory: on this machine, or under a prefix of an object store.
pub struct Location {
    /// The local directory: the location itself, or its staging copy.
    local: PathBuf,
    store: Option<(Arc<dyn ObjectStore>, StorePath)>,
    /// Kept while the staging copy is in use.
    _staging: Option<tempfile::TempDir>,
}

impl Location {
    /// A local path, or an object store URL (anything with a `scheme://`), with `object_store`'s own
    /// retries (up to ten, over three minutes): a run's shards wait out a store's bad minute.
    pub fn parse(text: &str) -> Result<Location> {
        Location::parse_with_retry(text, RetryConfig::default())
    }

    /// As [`Location::parse`], with a store that gives up after two quick retries (a few seconds): for a
    /// person waiting on a submission, which waits in the outbox when the store cannot be reached.
    pub fn parse_impatient(text: &str) -> Result<Location> {
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(250),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
        };
        Location::parse_with_retry(text, retry)
    }

    fn parse_with_retry(text: &str, retry: RetryConfig) -> Result<Location> {
        if !text.contains("://") {
            return Ok(Location { local: PathBuf::from(text), store: None, _staging: None });
        }
        let url = url::Url::parse(text).with_context(|| format!("{text} is not a URL"))?;
        let (store, prefix) =
            open_store(&url, retry).with_context(|| format!("cannot reach the object store of {text}"))?;
        let staging = tempfile::tempdir().context("cannot create a staging directory")?;
        Ok(Location {
            local: staging.path().to_owned(),
            store: Some((Arc::from(store), prefix)),
            _staging: Some(staging),
        })
    }

    /// The directory on this machine to read and write.
    pub fn local(&self) -> &Path {
        &self.local
    }

    pub fn is_store(&self) -> bool {
        self.store.is_some()
    }

    fn key(prefix: &StorePath, relative: &str) -> StorePath {
        relative.split('/').filter(|part| !part.is_empty()).fold(prefix.clone(), |key, part| key.join(part))
    }

    /// Brings the files whose relative path `wanted` accepts from the store into the local directory;
    /// returns how many. A local location has them already.
    pub async fn fetch(&self, wanted: impl Fn(&str) -> bool) -> Result<usize> {
        let Some((store, prefix)) = &self.store else { return Ok(0) };
        let listed: Vec<_> = store.list(Some(prefix)).try_collect().await.context("cannot list the object store")?;
        let mut fetched = 0;
        for object in listed {
            let Some(relative) = relative_to(prefix, &object.location) else { continue };
            if !wanted(&relative) || !crate::bundle::is_safe_relative_path(&relative) {
                continue;
            }
            let bytes = store.get(&object.location).await?.bytes().await?;
            let target = self.local.join(&relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&target, &bytes).with_context(|| format!("cannot write {}", target.display()))?;
            fetched += 1;
        }
        Ok(fetched)
    }

    /// Puts the local file at `relative` (or every file under it, when it is a directory) into the store.
    pub async fn put(&self, relative: &str) -> Result<()> {
        let Some((store, prefix)) = &self.store else { return Ok(()) };
        let path = self.local.join(relative);
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(&path)?.filter_map(|entry| entry.ok()).collect();
            entries.sort_by_key(|entry| entry.file_name());
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                Box::pin(self.put(&format!("{relative}/{name}"))).await?;
            }
            return Ok(());
        }
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        put_object(store.as_ref(), prefix, relative, bytes.into()).await
    }
}

impl Location {
    /// Puts `bytes` at `relative`: under the store's prefix, or into the local directory (under a partial
    /// name, renamed when whole, so that a reader never sees half a file). A [`PutPayload`] is shared, not
    /// copied, when cloned: a retry costs no second copy of a large file.
    pub async fn put_bytes(&self, relative: &str, bytes: impl Into<PutPayload>) -> Result<()> {
        anyhow::ensure!(crate::bundle::is_safe_relative_path(relative), "{relative} is not a key under the location");
        let payload = bytes.into();
        match &self.store {
            Some((store, prefix)) => put_object(store.as_ref(), prefix, relative, payload).await?,
            None => {
                let target = self.local.join(relative);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
                }
                let partial = target.with_extension("partial");
                let write = || -> std::io::Result<()> {
                    let mut file = std::fs::File::create(&partial)?;
                    payload.iter().try_for_each(|chunk| std::io::Write::write_all(&mut file, chunk))
                };
                write().with_context(|| format!("cannot write {}", partial.display()))?;
                std::fs::rename(&partial, &target).with_context(|| format!("cannot write {}", target.display()))?;
            }
        }
        Ok(())
    }

    /// The bytes at `relative`, `None` when nothing is there.
    pub async fn get(&self, relative: &str) -> Result<Option<Vec<u8>>> {
        anyhow::ensure!(crate::bundle::is_safe_relative_path(relative), "{relative} is not a key under the location");
        match &self.store {
            Some((store, prefix)) => match store.get(&Self::key(prefix, relative)).await {
                // Its buffer taken over, not copied: a bundle is read back whole only once in memory.
                Ok(object) => Ok(Some(object.bytes().await?.into())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(error).with_context(|| format!("cannot get {relative} from the object store")),
            },
            None => match std::fs::read(self.local.join(relative)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error).with_context(|| format!("cannot read {relative}")),
            },
        }
    }

    /// What landed at `relative`, read back: its size and SHA-256 (hex); `None` when nothing did.
    /// Hashed as it streams in, never held whole: a 100 MB bundle read back costs no more memory than a chunk.
    pub async fn read_back(&self, relative: &str) -> Result<Option<(u64, String)>> {
        anyhow::ensure!(crate::bundle::is_safe_relative_path(relative), "{relative} is not a key under the location");
        let mut hashed = crate::archive::HashingWriter::new(std::io::sink());
        match &self.store {
            Some((store, prefix)) => {
                let mut stream = match store.get(&Self::key(prefix, relative)).await {
                    Ok(object) => object.into_stream(),
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(error) => {
                        return Err(error).with_context(|| format!("cannot get {relative} from the object store"));
                    }
                };
                while let Some(chunk) = stream
                    .try_next()
                    .await
                    .with_context(|| format!("cannot read {relative} back from the object store"))?
                {
                    std::io::Write::write_all(&mut hashed, &chunk)?;
                }
            }
            None => {
                let mut file = match std::fs::File::open(self.local.join(relative)) {
                    Ok(file) => file,
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(error) => return Err(error).with_context(|| format!("cannot read {relative}")),
                };
                std::io::copy(&mut file, &mut hashed).with_context(|| format!("cannot read {relative}"))?;
            }
        }
        let (_, size, sha256) = hashed.finish();
        Ok(Some((size, sha256)))
    }

    /// Every file under the location, by its `/`-separated path relative to it, sorted.
    pub async fn list(&self) -> Result<Vec<String>> {
        let mut found = match &self.store {
            Some((store, prefix)) => {
                let listed: Vec<_> =
                    store.list(Some(prefix)).try_collect().await.context("cannot list the object store")?;
                listed.iter().filter_map(|object| relative_to(prefix, &object.location)).collect()
            }
            None => {
                let mut found = Vec::new();
                list_dir(&self.local, "", &mut found)?;
                found
            }
        };
        found.sort();
        Ok(found)
    }
}

/// Puts `bytes` under `prefix` at `relative`.
async fn put_object(store: &dyn ObjectStore, prefix: &StorePath, relative: &str, payload: PutPayload) -> Result<()> {
    store
        .put(&Location::key(prefix, relative), payload)
        .await
        .with_context(|| format!("cannot put {relative} into the object store"))?;
    Ok(())
}

/// The files under `dir`, relative to the listing's root (`prefix`), partial files left out.
fn list_dir(dir: &Path, prefix: &str, found: &mut Vec<String>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("cannot list {}", dir.display())),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if entry.file_type()?.is_dir() {
            list_dir(&entry.path(), &relative, found)?;
        } else if !name.ends_with(".partial") {
            found.push(relative);
        }
    }
    Ok(())
}

/// A cloud store's builder configured from `options` (each provider's keys, lower case), with `retry`.
macro_rules! configured {
    ($builder:ty, $url:expr, $options:expr, $retry:expr) => {{
        let builder =
            $options.iter().fold(<$builder>::new().with_url($url.as_str()), |builder, (key, value)| {
                match key.parse() {
                    Ok(key) => builder.with_config(key, value.clone()),
                    Err(_) => builder,
                }
            });
        Box::new(builder.with_retry($retry).build()?) as Box<dyn ObjectStore>
    }};
}

/// The store a URL names and the prefix in it, configured as each provider's own tools are
/// (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT`, `GOOGLE_*`, `AZURE_*` from the environment).
fn open_store(url: &url::Url, retry: RetryConfig) -> Result<(Box<dyn ObjectStore>, StorePath)> {
    let options: Vec<(String, String)> = std::env::vars()
        .filter(|(name, _)| ["AWS_", "GOOGLE_", "AZURE_"].iter().any(|prefix| name.starts_with(prefix)))
        .map(|(name, value)| (name.to_ascii_lowercase(), value))
        .collect();
    let (scheme, prefix) = ObjectStoreScheme::parse(url)?;
    let store = match scheme {
        ObjectStoreScheme::AmazonS3 => configured!(AmazonS3Builder, url, options, retry),
        ObjectStoreScheme::GoogleCloudStorage => configured!(GoogleCloudStorageBuilder, url, options, retry),
        ObjectStoreScheme::MicrosoftAzure => configured!(MicrosoftAzureBuilder, url, options, retry),
        _ => return Ok(object_store::parse_url_opts(url, options)?),
    };
    Ok((store, prefix))
}

/// `key` relative to `prefix`, `/`-separated.
fn relative_to(prefix: &StorePath, key: &StorePath) -> Option<String> {
    let parts: Vec<String> = key.prefix_match(prefix)?.map(|part| part.as_ref().to_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}
