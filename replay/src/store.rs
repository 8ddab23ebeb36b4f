//! Where a run's and a dataset's files live: a local directory, or an object store (`s3://`, `gs://`,
//! `az://`, `abfss://`, `file://`) through the `object_store` crate, configured from the environment as
//! each provider's own tools are (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
//!
//! Episodes work on local files, so a location in a store is mirrored in a local staging directory: a
//! dataset is fetched before its tasks run; a run's files are put as soon as each is complete (a task's
//! outputs when its episode ends, the results file after every result, the summary last), so that shards
//! on many machines share one run and a stopped shard loses nothing it finished.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// A directory: on this machine, or under a prefix of an object store.
pub struct Location {
    /// The local directory: the location itself, or its staging copy.
    local: PathBuf,
    store: Option<(Arc<dyn ObjectStore>, StorePath)>,
    /// Kept while the staging copy is in use.
    _staging: Option<tempfile::TempDir>,
}

impl Location {
    /// A local path, or an object store URL (anything with a `scheme://`).
    pub fn parse(text: &str) -> Result<Location> {
        if !text.contains("://") {
            return Ok(Location { local: PathBuf::from(text), store: None, _staging: None });
        }
        let url = url::Url::parse(text).with_context(|| format!("{text} is not a URL"))?;
        // Each provider's settings, as its own tools read them (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT`, ...).
        let options = std::env::vars()
            .filter(|(name, _)| ["AWS_", "GOOGLE_", "AZURE_"].iter().any(|prefix| name.starts_with(prefix)));
        let options: Vec<(String, String)> = options.map(|(name, value)| (name.to_ascii_lowercase(), value)).collect();
        let (store, prefix) = object_store::parse_url_opts(&url, options)
            .with_context(|| format!("cannot reach the object store of {text}"))?;
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
            if !wanted(&relative) || !trace_manifest::bundle::is_safe_relative_path(&relative) {
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
        store
            .put(&Self::key(prefix, relative), PutPayload::from(bytes))
            .await
            .with_context(|| format!("cannot put {relative} into the object store"))?;
        Ok(())
    }
}

/// `key` relative to `prefix`, `/`-separated.
fn relative_to(prefix: &StorePath, key: &StorePath) -> Option<String> {
    let parts: Vec<String> = key.prefix_match(prefix)?.map(|part| part.as_ref().to_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}
