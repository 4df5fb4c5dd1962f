//! Configuration checks that must not pass what fails later: every file the
//! configuration names (CA, client certificate and key, password files) is read and checked
//! by `--check-config` and at start, and every startup failure exits 2 with the file and the
//! key path, so systemd's `RestartPreventExitStatus=2` stops instead of restarting in a loop.
//! Each case runs the real binary twice, with `--check-config` and as the daemon, and both
//! must fail the same way.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::pki::{make_ca, make_cert};

const EXE: &str = env!("CARGO_BIN_EXE_redis-streams-exporter");

/// Runs the binary on `config` (written to `dir/config.toml`), with `--check-config` or as the
/// daemon (on a free loopback port unless `extra` says otherwise); returns its exit code and
/// stderr. A daemon still running after 20 s fails the test: it accepted the configuration.
fn run(dir: &Path, config: &str, check: bool, extra: &[&str]) -> (i32, String) {
    let file = dir.join("config.toml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = Command::new(EXE);
    cmd.arg("--config").arg(&file);
    if check {
        cmd.arg("--check-config");
    } else if !extra.iter().any(|a| a.starts_with("--web.listen-address")) {
        cmd.arg(format!(
            "--web.listen-address=127.0.0.1:{}",
            common::free_port()
        ));
    }
    let mut child = cmd
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running: the configuration was accepted\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both `--check-config` and the daemon exit 2 with a line `<file>: <key>: ...` holding every
/// one of `needles`.
fn fails_with(dir: &Path, config: &str, key: &str, needles: &[&str]) {
    let prefix = format!("{}: {key}: ", dir.join("config.toml").display());
    for check in [true, false] {
        let (code, stderr) = run(dir, config, check, &[]);
        let mode = if check { "--check-config" } else { "daemon" };
        assert_eq!(code, 2, "{mode}: exit {code}\n{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{mode}: no line starting {prefix:?}:\n{stderr}"));
        for n in needles {
            assert!(line.contains(n), "{mode}: {line:?} lacks {n:?}");
        }
        if check {
            println!("{key}: {line}");
        }
    }
}

/// A CA, a server certificate and a client certificate with its key, and a second client
/// identity from another CA.
fn certificates(dir: &Path) {
    make_ca(dir, "ca");
    make_cert(dir, "ca", "client", "DNS:exporter.test");
    make_ca(dir, "other");
    make_cert(dir, "other", "stranger", "DNS:stranger.test");
}

fn target(tls: &str) -> String {
    format!("[[targets]]\nname = \"t\"\nurl = \"rediss://127.0.0.1:6390\"\n{tls}\n")
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn a_missing_ca_file_is_refused_naming_the_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = path(d, "no-such-ca.pem");
    fails_with(
        d,
        &target(&format!("tls_ca_file = \"{missing}\"")),
        "targets[0].tls_ca_file",
        &["cannot read", &missing],
    );
}

#[test]
fn a_ca_file_that_is_not_pem_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    // Text, and the same CA in DER: neither holds a PEM certificate.
    std::fs::write(d.join("text.pem"), "this is not a certificate\n").unwrap();
    let der = Command::new(common::which("openssl"))
        .args(["x509", "-outform", "DER", "-in"])
        .arg(d.join("ca.crt"))
        .output()
        .unwrap();
    assert!(der.status.success());
    std::fs::write(d.join("ca.der"), &der.stdout).unwrap();
    for file in ["text.pem", "ca.der"] {
        let p = path(d, file);
        fails_with(
            d,
            &target(&format!("tls_ca_file = \"{p}\"")),
            "targets[0].tls_ca_file",
            &[&p, "holds no PEM certificate"],
        );
    }
    // A PEM block that is not a certificate inside.
    std::fs::write(
        d.join("garbage.pem"),
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let p = path(d, "garbage.pem");
    fails_with(
        d,
        &target(&format!("tls_ca_file = \"{p}\"")),
        "targets[0].tls_ca_file",
        &[&p, "not a valid X.509 certificate"],
    );
}

#[test]
fn client_certificate_and_key_are_checked_together() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let (ca, cert, key) = (
        path(d, "ca.crt"),
        path(d, "client.crt"),
        path(d, "client.key"),
    );
    fails_with(
        d,
        &target(&format!(
            "tls_ca_file = \"{ca}\"\ntls_cert_file = \"{cert}\""
        )),
        "targets[0].tls_key_file",
        &["is required with tls_cert_file"],
    );
    fails_with(
        d,
        &target(&format!("tls_key_file = \"{key}\"")),
        "targets[0].tls_cert_file",
        &["is required with tls_key_file"],
    );
    let stranger_key = path(d, "stranger.key");
    fails_with(
        d,
        &target(&format!(
            "tls_cert_file = \"{cert}\"\ntls_key_file = \"{stranger_key}\""
        )),
        "targets[0].tls_key_file",
        &[
            &stranger_key,
            "does not belong to the client certificate",
            &cert,
        ],
    );
    // The certificate where the key should be, and a missing certificate.
    fails_with(
        d,
        &target(&format!(
            "tls_cert_file = \"{cert}\"\ntls_key_file = \"{cert}\""
        )),
        "targets[0].tls_key_file",
        &["holds no PEM private key"],
    );
    let missing = path(d, "missing.crt");
    fails_with(
        d,
        &target(&format!(
            "tls_cert_file = \"{missing}\"\ntls_key_file = \"{key}\""
        )),
        "targets[0].tls_cert_file",
        &["cannot read", &missing],
    );
    // And a good pair passes both.
    let good = target(&format!(
        "tls_ca_file = \"{ca}\"\ntls_cert_file = \"{cert}\"\ntls_key_file = \"{key}\"\ntls_server_name = \"redis.test\""
    ));
    let (code, stderr) = run(d, &good, true, &[]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn tls_keys_need_rediss_and_a_valid_server_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fails_with(
        d,
        "[[targets]]\nurl = \"redis://127.0.0.1:6379\"\ntls_server_name = \"redis.test\"\n",
        "targets[0].url",
        &["need a rediss:// URL"],
    );
    fails_with(
        d,
        &target("tls_server_name = \"not a name!\""),
        "targets[0].tls_server_name",
        &["is not a DNS name or an IP address"],
    );
}

#[test]
fn password_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = path(d, "no-password");
    fails_with(
        d,
        &format!("[[targets]]\nurl = \"redis://127.0.0.1:6379\"\npassword_file = \"{missing}\"\n"),
        "targets[0].password_file",
        &["cannot read", &missing],
    );
}

#[test]
fn auth_module_files_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let probe = "[probe]\nallowed_targets = [\"rediss://*\"]\n";
    let missing = path(d, "missing.pem");
    fails_with(
        d,
        &format!("{probe}[auth_modules.fleet]\ntls_ca_file = \"{missing}\"\n"),
        "auth_modules.fleet.tls_ca_file",
        &["cannot read", &missing],
    );
    fails_with(
        d,
        &format!("{probe}[auth_modules.fleet]\npassword_file = \"{missing}\"\n"),
        "auth_modules.fleet.password_file",
        &["cannot read", &missing],
    );
    let (cert, key) = (path(d, "client.crt"), path(d, "stranger.key"));
    fails_with(
        d,
        &format!(
            "{probe}[auth_modules.fleet]\ntls_cert_file = \"{cert}\"\ntls_key_file = \"{key}\"\n"
        ),
        "auth_modules.fleet.tls_key_file",
        &["does not belong to the client certificate"],
    );
    fails_with(
        d,
        "[probe]\nallowed_targets = [\"10.0.0.*:6379\"]\n",
        "probe.allowed_targets[0]",
        &["never matches"],
    );
    fails_with(
        d,
        "[auth_modules.fleet]\nusername = \"x\"\n[probe]\nallowed_targets = [\"redis://*\"]\ntarget_ttl = \"0s\"\n",
        "probe.target_ttl",
        &["must be greater than zero"],
    );
}

#[test]
fn an_address_in_use_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, stderr) = run(
        d,
        "[[targets]]\nurl = \"redis://127.0.0.1:6379\"\n",
        false,
        &[&format!("--web.listen-address={address}")],
    );
    assert_eq!(code, 2, "{stderr}");
    let expected = format!(
        "{}: web.listen_address: cannot listen on {address}",
        d.join("config.toml").display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
}
