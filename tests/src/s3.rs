//! An S3 server on 127.0.0.1 for the tests of runs and datasets in an object store: moto's, from PyPI
//! (`target/s3-venv`, made by `.ci/install`), which speaks S3's own HTTP API, so `trace-replay` reaches it
//! through the same `object_store` client as Amazon's. The tests put and list objects with boto3.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct S3Server {
    endpoint: String,
    python: PathBuf,
    child: Child,
}

impl S3Server {
    /// Starts the server, or says why it cannot (no `target/s3-venv`: run `.ci/install`).
    pub fn start() -> anyhow::Result<S3Server> {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/s3-venv/bin");
        anyhow::ensure!(venv.join("moto_server").exists(), "no S3 server in {}: run .ci/install", venv.display());
        // A free port, given back for the server to take.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(venv.join("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = S3Server { endpoint: format!("http://127.0.0.1:{port}"), python: venv.join("python"), child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "the S3 server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Freezes the server (`SIGSTOP`): connections are still accepted by the system, and hang, as with a
    /// store that stops answering in the middle of an upload.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(signal).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// The environment that points `object_store` (and boto3) at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
        ]
    }

    /// Runs a boto3 script with `s3`, a client of this server, and `args` bound.
    fn boto3(&self, script: &str, args: &[&str]) -> Vec<u8> {
        let program = format!("import boto3, sys, os\ns3 = boto3.client('s3')\nargs = sys.argv[1:]\n{script}");
        let output = Command::new(&self.python).arg("-c").arg(program).args(args).envs(self.env()).output().unwrap();
        assert!(output.status.success(), "boto3: {}", String::from_utf8_lossy(&output.stderr));
        output.stdout
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.boto3("s3.create_bucket(Bucket=args[0])", &[bucket]);
    }

    /// Puts every file under `dir` at `s3://bucket/prefix/<its relative path>`.
    pub fn upload_dir(&self, dir: &Path, bucket: &str, prefix: &str) {
        let script = "for root, _, files in os.walk(args[0]):\n    for name in files:\n        path = os.path.join(root, name)\n        s3.upload_file(path, args[1], args[2] + '/' + os.path.relpath(path, args[0]))";
        self.boto3(script, &[dir.to_str().unwrap(), bucket, prefix]);
    }

    /// The keys under `s3://bucket/prefix/`, relative to it, sorted.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let script = "for page in s3.get_paginator('list_objects_v2').paginate(Bucket=args[0], Prefix=args[1] + '/'):\n    for item in page.get('Contents', []):\n        print(item['Key'][len(args[1]) + 1:])";
        let listed = String::from_utf8(self.boto3(script, &[bucket, prefix])).unwrap();
        let mut keys: Vec<String> = listed.lines().map(str::to_owned).collect();
        keys.sort();
        keys
    }

    /// The object at `s3://bucket/key`.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let script = "sys.stdout.buffer.write(s3.get_object(Bucket=args[0], Key=args[1])['Body'].read())";
        self.boto3(script, &[bucket, key])
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
