//! Bundles made to escape: a bundle folder holding links (as `unzip` restores them) is refused by every
//! command before anything is read or written, and a zip with two entries of one name is refused on import.
//! Nothing outside the bundle is ever touched.

use std::path::Path;

use crate::common::Scratch;
use crate::process::record_login_and_cart;

/// A copy of a recorded, finished bundle, outside the data directory.
fn bundle_copy(scratch: &Scratch) -> std::path::PathBuf {
    record_login_and_cart(scratch, "hostile");
    let zip = scratch.path("hostile.zip");
    scratch.cli_json(&["export", "hostile", "--out", zip.to_str().unwrap(), "--json"]);
    let dir = scratch.path("bundle");
    let elsewhere = Scratch::new();
    // Extracted by the host's own import, then copied out as a plain folder.
    elsewhere.cli_json(&["import", zip.to_str().unwrap(), "--json"]);
    copy_dir(&elsewhere.capture("hostile"), &dir);
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_bundle_folder_with_a_link_is_refused_and_nothing_outside_is_written() {
    let scratch = Scratch::new();
    let bundle = bundle_copy(&scratch);
    let bundle_arg = bundle.to_str().unwrap();
    let validated = scratch.cli(&["validate", bundle_arg]);
    assert!(validated.status.success(), "{}", String::from_utf8_lossy(&validated.stderr));

    // Where processing writes its partial trajectory: a dot-named link to a file outside the bundle.
    let victim = scratch.path("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    std::os::unix::fs::symlink(&victim, bundle.join(".trajectory.json.partial")).unwrap();
    for args in [&["process", bundle_arg][..], &["validate", bundle_arg], &["process", bundle_arg, "--json"]] {
        let output = scratch.cli(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("\".trajectory.json.partial\" is a symbolic link"), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
}

#[test]
fn a_zip_with_two_entries_of_one_name_is_not_imported() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "twice");
    let zip = scratch.path("twice.zip");
    scratch.cli_json(&["export", "twice", "--out", zip.to_str().unwrap(), "--json"]);
    // storage.json renamed to events.jsonl, a name of the same length, so that the zip names one file twice.
    let mut bytes = std::fs::read(&zip).unwrap();
    let (from, to) = (b"storage.json".as_slice(), b"events.jsonl".as_slice());
    assert_eq!(from.len(), to.len());
    let mut renamed = 0;
    for at in 0..bytes.len() - from.len() {
        if &bytes[at..at + from.len()] == from {
            bytes[at..at + from.len()].copy_from_slice(to);
            renamed += 1;
        }
    }
    assert!(renamed >= 2, "the entry's local and central names");
    std::fs::write(&zip, &bytes).unwrap();
    let elsewhere = Scratch::new();
    let output = elsewhere.cli(&["import", zip.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("two entries named \"events.jsonl\""), "{stderr}");
    assert!(!elsewhere.capture("twice").exists());
}
