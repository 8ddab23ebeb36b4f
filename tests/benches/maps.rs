//! How good environment maps are: leave-one-out coverage (`trace-host map --coverage`) of a site's map,
//! on recordings made through the extension and the host:
//! - the demo shop: purchases that differ in the search, the product and the quantity;
//! - Django's admin site ([`trace_e2e::apps::django_admin`]): groups created with different names and
//!   permission filters.
//!
//! For each recording held out, the share of its actions on pages whose context the map of the others has,
//! whose action that context has, and whose parameter value it has seen. Also the time `trace-host map`
//! takes to build each map.
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench maps`. Recordings and maps
//! are left in `target/bench-maps/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use trace_e2e::apps::{self, django_admin::DjangoAdmin};
use trace_e2e::browser::Build;
use trace_e2e::demo::{self, Purchase};
use trace_e2e::site::DemoSite;

const PURCHASES: [Purchase; 5] = [
    Purchase { search: "mug", product: "blue-mug", quantity: 2 },
    Purchase { search: "tea", product: "teapot", quantity: 1 },
    Purchase { search: "red", product: "red-mug", quantity: 3 },
    Purchase { search: "mug", product: "red-mug", quantity: 1 },
    Purchase { search: "pot", product: "teapot", quantity: 4 },
];

/// Groups created in Django's admin: name and the permission filter typed.
const GROUPS: [(&str, &str); 4] =
    [("Editors", "can view"), ("Authors", "can add"), ("Reviewers", "can change"), ("Cleaners", "can delete")];

#[tokio::main]
async fn main() -> Result<()> {
    let build = Build::from_workspace()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-maps");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;

    let site = DemoSite::start(0)?;
    let mut shop = Vec::new();
    for (index, purchase) in PURCHASES.iter().enumerate() {
        let data = root.join(format!("shop-data-{index}"));
        shop.push(demo::record_purchase(&build, &site, &data, purchase).await?);
    }
    report(&build, "demo shop", &shop, &root.join("shop-map"))?;

    let python = apps::python()?;
    let admin = DjangoAdmin::start(&python)?;
    let mut django = Vec::new();
    for (index, (group, filter)) in GROUPS.iter().enumerate() {
        let data = root.join(format!("django-data-{index}"));
        let description = format!("Create a group {group} with two permissions matching {filter}");
        django.push(admin.record_group(&build, &data, &description, group, filter).await?);
    }
    report(&build, "Django admin", &django, &root.join("django-map"))?;
    Ok(())
}

/// Builds the map of `bundles` into `out`, timed, and prints its coverage table.
fn report(build: &Build, site: &str, bundles: &[PathBuf], out: &Path) -> Result<()> {
    let paths: Vec<&str> = bundles.iter().map(|bundle| bundle.to_str().unwrap_or_default()).collect();
    let started = Instant::now();
    let built = host(build, &[&["map"], paths.as_slice(), &["--out", out.to_str().unwrap_or_default()]].concat())?;
    let took = started.elapsed();
    let coverage = host(build, &[&["map"], paths.as_slice(), &["--coverage"]].concat())?;
    println!("\n{site}: {} ({:.2} s)", built.trim(), took.as_secs_f64());
    println!("{coverage}");
    Ok(())
}

fn host(build: &Build, args: &[&str]) -> Result<String> {
    let output = Command::new(&build.trace_host).args(args).output().context("cannot run trace-host")?;
    ensure!(output.status.success(), "trace-host {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8(output.stdout)?)
}
