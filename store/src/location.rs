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

use std::io::Write as _;
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
use trace_bundle::archive::{self, BoundedCopyError, BoundedWriter};
use trace_manifest::bundle::is_safe_relative_path;

use crate::atomic;

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
            if !wanted(&relative) || !is_safe_relative_path(&relative) {
                continue;
            }
            let bytes = store.get(&object.location).await?.bytes().await?;
            let target = self.local.join(&relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            atomic::write(&target, |out| Ok(out.write_all(&bytes)?))?;
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
    /// Puts `bytes` at `relative`: under the store's prefix, or into the local directory ([`atomic::write`]:
    /// under a partial name, renamed when whole, so that a reader never sees half a file). A [`PutPayload`]
    /// is shared, not copied, when cloned: a retry costs no second copy of a large file.
    pub async fn put_bytes(&self, relative: &str, bytes: impl Into<PutPayload>) -> Result<()> {
        anyhow::ensure!(is_safe_relative_path(relative), "{relative} is not a key under the location");
        let payload = bytes.into();
        match &self.store {
            Some((store, prefix)) => put_object(store.as_ref(), prefix, relative, payload).await?,
            None => {
                let target = self.local.join(relative);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
                }
                atomic::write(&target, |out| Ok(payload.iter().try_for_each(|chunk| out.write_all(chunk))?))?;
            }
        }
        Ok(())
    }

    /// The bytes at `relative`, at most `limit` of them ([`Location::copy_bounded`]); `None` when nothing is
    /// there.
    pub async fn get(&self, relative: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let mut bytes = Vec::new();
        Ok(self.copy_bounded(relative, limit, &mut bytes).await?.map(|_| bytes))
    }

    /// Copies the file at `relative` into `sink` and returns its size; `None` when nothing is there. What
    /// others wrote is not trusted: a file larger than `limit` is refused by its size before a byte of it
    /// is read, and the copy stops past `limit` whatever the size said (a file that grows, a store that
    /// sends more than it announced). In a directory only a regular file is read: a symbolic link (the
    /// file's or a folder's on its path), a FIFO, a socket or a device is refused, as the open file is,
    /// so that nothing swapped in after the listing is followed.
    pub async fn copy_bounded(
        &self,
        relative: &str,
        limit: u64,
        sink: &mut (dyn std::io::Write + Send),
    ) -> Result<Option<u64>> {
        anyhow::ensure!(is_safe_relative_path(relative), "{relative} is not a key under the location");
        let too_large = |size: u64| anyhow::anyhow!("{}", BoundedCopyError::TooLarge { size, limit });
        match &self.store {
            Some((store, prefix)) => {
                let key = Self::key(prefix, relative);
                let object = match store.head(&key).await {
                    Ok(object) => object,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(error) => {
                        return Err(error).with_context(|| format!("cannot get {relative} from the object store"));
                    }
                };
                if object.size > limit {
                    return Err(too_large(object.size));
                }
                let object = match store.get(&key).await {
                    Ok(object) => object,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(error) => {
                        return Err(error).with_context(|| format!("cannot get {relative} from the object store"));
                    }
                };
                // Replaced since it was looked at: its new size is checked as well.
                if object.meta.size > limit {
                    return Err(too_large(object.meta.size));
                }
                let mut stream = object.into_stream();
                let mut bounded = BoundedWriter::new(sink, limit);
                while let Some(chunk) =
                    stream.try_next().await.with_context(|| format!("cannot read {relative} from the object store"))?
                {
                    match bounded.write_all(&chunk) {
                        Ok(()) => {}
                        Err(_) if bounded.refused() => anyhow::bail!("{}", BoundedCopyError::Grew { limit }),
                        Err(error) => return Err(error).with_context(|| format!("cannot keep {relative}")),
                    }
                }
                Ok(Some(bounded.written()))
            }
            None => {
                let Some(mut file) = open_regular(&self.local, relative)? else { return Ok(None) };
                match archive::copy_file_bounded(&mut file, limit, sink) {
                    Ok(copied) => Ok(Some(copied)),
                    Err(BoundedCopyError::Io(error)) => Err(error).with_context(|| format!("cannot read {relative}")),
                    Err(refused) => anyhow::bail!("{refused}"),
                }
            }
        }
    }

    /// What landed at `relative`, read back: its size and SHA-256 (hex); `None` when nothing did.
    /// Hashed as it streams in, never held whole: a 100 MB bundle read back costs no more memory than a chunk.
    pub async fn read_back(&self, relative: &str) -> Result<Option<(u64, String)>> {
        anyhow::ensure!(is_safe_relative_path(relative), "{relative} is not a key under the location");
        let mut hashed = archive::HashingWriter::new(std::io::sink());
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
                    hashed.write_all(&chunk)?;
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

/// The regular file at `relative` under `root`, opened for reading as [`archive::open_beneath`] opens a
/// bundle's (following no link, waiting on no FIFO, checked as opened); `None` when nothing is there.
fn open_regular(root: &Path, relative: &str) -> Result<Option<std::fs::File>> {
    match archive::open_beneath(root, relative) {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) if archive::is_link_refused(&error) => {
            anyhow::bail!("it or a folder on its path is a symbolic link; only regular files are read")
        }
        Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => anyhow::bail!("{error}"),
        Err(error) => Err(error).with_context(|| format!("cannot open {relative}")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `copy_bounded` of `relative` under `location` gave: its bytes, or why it refused them.
    fn read(location: &Location, relative: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
        futures::executor::block_on(location.get(relative, limit)).map_err(|error| format!("{error:#}"))
    }

    #[test]
    fn a_file_larger_than_the_limit_is_refused_by_its_size_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        // 3 GiB, sparse: read whole it would take 3 GiB of memory.
        std::fs::File::create(dir.path().join("huge.zip")).unwrap().set_len(3 << 30).unwrap();
        std::fs::write(dir.path().join("small.json"), b"{}").unwrap();
        let in_a_directory = Location::parse(dir.path().to_str().unwrap()).unwrap();
        // The same files through the object store's interface (its local file system).
        let in_a_store = Location::parse(&format!("file://{}", dir.path().display())).unwrap();
        for location in [&in_a_directory, &in_a_store] {
            let refused = read(location, "huge.zip", 1 << 20).unwrap_err();
            assert_eq!(refused, "it is 3221225472 bytes, more than the limit of 1048576");
            assert_eq!(read(location, "small.json", 2).unwrap(), Some(b"{}".to_vec()));
            assert_eq!(read(location, "absent.json", 2).unwrap(), None);
        }
    }

    /// A file whose size says nothing of what it holds (the kernel's files say 0 bytes) is read no further
    /// than the limit.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_is_read_no_further_than_the_limit_whatever_its_size_says() {
        let process = Location::parse("/proc/self").unwrap();
        assert_eq!(std::fs::metadata("/proc/self/status").unwrap().len(), 0);
        assert_eq!(read(&process, "status", 16).unwrap_err(), "it grew past the limit of 16 bytes while it was read");
        assert!(read(&process, "status", 1 << 20).unwrap().is_some_and(|bytes| bytes.starts_with(b"Name:")));
    }

    #[cfg(unix)]
    #[test]
    fn in_a_directory_only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir_all(root.join("folder")).unwrap();
        std::fs::write(root.join("folder/file.json"), b"{}").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.json"), b"{\"secret\": 1}").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.json"), root.join("folder/linked.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("folder/zero.json")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked-folder")).unwrap();
        let fifo = root.join("folder/fifo.json");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0).unwrap();

        let location = Location::parse(root.to_str().unwrap()).unwrap();
        assert_eq!(read(&location, "folder/file.json", 1024).unwrap(), Some(b"{}".to_vec()));
        let link = "it or a folder on its path is a symbolic link; only regular files are read";
        assert_eq!(read(&location, "folder/linked.json", 1024).unwrap_err(), link);
        assert_eq!(read(&location, "folder/zero.json", 1024).unwrap_err(), link);
        assert_eq!(read(&location, "linked-folder/secret.json", 1024).unwrap_err(), link);
        // Opened without waiting for a writer, then refused.
        assert_eq!(read(&location, "folder/fifo.json", 1024).unwrap_err(), "it is a FIFO, not a regular file");
        assert_eq!(read(&location, "folder", 1024).unwrap_err(), "it is a folder, not a regular file");
        assert_eq!(read(&location, "folder/absent.json", 1024).unwrap(), None);
        assert_eq!(read(&location, "absent/file.json", 1024).unwrap(), None);
    }
}
