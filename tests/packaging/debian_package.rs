//! The Debian package: `[package.metadata.deb]` in Cargo.toml, built with cargo-deb, installed
//! with `dpkg -i`, used, upgraded in place and purged.
//!
//! - cargo-deb (pinned) is installed into `.cache/cargo-deb/` when missing, with
//!   `cargo install --locked --debug`; set `RSE_CARGO_DEB` to use another binary.
//! - The package is made from the dev-profile binary cargo already built for this test
//!   (`--no-build --profile dev --fast`: seconds instead of a release build; stripping first
//!   makes the fast compression quicker, 7 s against 33 s unstripped, measured); the
//!   documented `cargo deb` packages the release build from the same metadata.
//! - Installing needs root (CI runs as root on a throwaway machine), or password-less sudo. The
//!   package is purged at the end, also when an assertion fails. It replaces any installed
//!   package of the same name: do not run it on a machine where the exporter is installed for real.
//!
//! A missing tool or privilege fails the test; it never skips.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const PACKAGE: &str = "redis-streams-exporter";
const CARGO_DEB_VERSION: &str = "3.8.0";
const CONFIG: &str = "/etc/redis-streams-exporter/config.toml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a command with no standard input; fails the test unless it succeeds.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed:\n{}", text(&out));
    text(&out)
}

/// `sudo -n` when not root; fails when neither is possible.
fn privileged(program: &str) -> Command {
    let uid = run(Command::new("id").arg("-u"));
    if uid.trim() == "0" {
        return Command::new(program);
    }
    let sudo = Command::new("sudo")
        .args(["-n", "true"])
        .stdin(Stdio::null())
        .output();
    assert!(
        sudo.is_ok_and(|o| o.status.success()),
        "installing a Debian package needs root or password-less sudo"
    );
    let mut cmd = Command::new("sudo");
    cmd.args(["-n", program]);
    cmd
}

/// dpkg, retried while another process holds the dpkg lock (apt on a shared machine).
fn dpkg(args: &[&str]) -> String {
    for _ in 0..60 {
        let out = privileged("dpkg")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .expect("dpkg");
        let said = text(&out);
        if out.status.success() {
            return said;
        }
        assert!(
            said.contains("lock"),
            "dpkg {} failed:\n{said}",
            args.join(" ")
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    panic!(
        "dpkg {}: the dpkg lock stayed busy for 2 minutes",
        args.join(" ")
    );
}

/// Purges the package when dropped, so a failed assertion leaves nothing installed.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let out = privileged("dpkg")
            .args(["--purge", PACKAGE])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if !out.status.success() => {
                eprintln!("dpkg --purge {PACKAGE} failed:\n{}", text(&out))
            }
            Err(e) => eprintln!("cannot run dpkg --purge {PACKAGE}: {e}"),
            Ok(_) => {}
        }
    }
}

/// cargo-deb: `RSE_CARGO_DEB`, else `.cache/cargo-deb/bin/cargo-deb`, installed when missing.
fn cargo_deb() -> PathBuf {
    if let Some(path) = std::env::var_os("RSE_CARGO_DEB") {
        return PathBuf::from(path);
    }
    let prefix = root().join(".cache/cargo-deb");
    let bin = prefix.join("bin/cargo-deb");
    let installed = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_DEB_VERSION));
    if !installed {
        let started = Instant::now();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        run(Command::new(cargo).args([
            "install",
            "--locked",
            // Unoptimised: half the CPU time to build (57 s against 135 s measured), and packaging
            // is no slower (5.5 s either way).
            "--debug",
            "--version",
            CARGO_DEB_VERSION,
            "--root",
            prefix.to_str().unwrap(),
            "cargo-deb",
        ]));
        println!(
            "timing: cargo install cargo-deb {CARGO_DEB_VERSION}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    bin
}

fn mode_owner_group(path: &str) -> (u32, String, String) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let name = |db: &str, id: u32| {
        run(Command::new("getent").args([db, &id.to_string()]))
            .split(':')
            .next()
            .unwrap()
            .to_string()
    };
    (
        meta.mode() & 0o7777,
        name("passwd", meta.uid()),
        name("group", meta.gid()),
    )
}

#[test]
fn debian_package_installs_runs_keeps_its_conffile_and_purges() {
    let cargo_deb = cargo_deb();
    let exporter = env!("CARGO_BIN_EXE_redis-streams-exporter");
    let out_dir = tempfile::tempdir().unwrap();

    let started = Instant::now();
    run(Command::new(&cargo_deb)
        .args([
            "--no-build",
            "--profile",
            "dev",
            "--fast",
            "--quiet",
            "--manifest-path",
        ])
        .arg(root().join("Cargo.toml"))
        .arg("--output")
        .arg(out_dir.path()));
    println!(
        "timing: cargo-deb package build (dev binary, stripped, --fast): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let debs: Vec<PathBuf> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    let deb = debs[0].to_str().unwrap().to_string();

    // What is in the package, before installing it.
    let control = run(Command::new("dpkg-deb").args(["--field", &deb]));
    for wanted in [
        "Package: redis-streams-exporter",
        &format!("Version: {}-1", env!("CARGO_PKG_VERSION")),
        "Section: net",
    ] {
        assert!(control.contains(wanted), "{wanted} not in:\n{control}");
    }
    let depends = run(Command::new("dpkg-deb").args(["--field", &deb, "Depends"]));
    assert!(
        depends.contains("adduser") && depends.contains("libc6"),
        "Depends: {depends}"
    );
    let contents = run(Command::new("dpkg-deb").args(["--contents", &deb]));
    for path in [
        "./usr/bin/redis-streams-exporter",
        "./etc/redis-streams-exporter/config.toml",
        "./usr/lib/systemd/system/redis-streams-exporter.service",
        "./usr/share/doc/redis-streams-exporter/copyright",
        "./usr/share/redis-streams-exporter/alerts/redis-streams.rules.yml",
        "./usr/share/redis-streams-exporter/alerts/redis-streams-slo.rules.yml",
        "./usr/share/redis-streams-exporter/dashboards/redis-streams-overview.json",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(path)),
            "{path} not in:\n{contents}"
        );
    }

    let guard = Installed;
    let started = Instant::now();
    dpkg(&["-i", &deb]);
    println!("timing: dpkg -i: {:.1} s", started.elapsed().as_secs_f64());
    let status =
        run(Command::new("dpkg-query").args(["-W", "-f", "${Status} ${Version}", PACKAGE]));
    assert_eq!(
        status,
        format!("install ok installed {}-1", env!("CARGO_PKG_VERSION"))
    );

    // The installed binary is the one cargo built, and says so.
    let installed_version = run(Command::new("/usr/bin/redis-streams-exporter").arg("--version"));
    let built_version = run(Command::new(exporter).arg("--version"));
    assert_eq!(installed_version, built_version);
    assert!(
        installed_version.starts_with(&format!(
            "redis-streams-exporter {} (revision ",
            env!("CARGO_PKG_VERSION")
        )),
        "{installed_version}"
    );

    // The system user exists, cannot log in, and is the unit's User=.
    let passwd = run(Command::new("getent").args(["passwd", PACKAGE]));
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid < 1000, "not a system user: {passwd}");
    assert!(fields[6].ends_with("nologin"), "login shell: {passwd}");

    // The example configuration is the conffile, readable by that user's group only.
    let conffiles = run(Command::new("dpkg-query").args(["-W", "-f", "${Conffiles}", PACKAGE]));
    assert!(
        conffiles.lines().any(|l| l.trim().starts_with(CONFIG)),
        "conffiles: {conffiles}"
    );
    assert_eq!(
        std::fs::read_to_string(CONFIG).unwrap(),
        std::fs::read_to_string(root().join("config/example.toml")).unwrap()
    );
    assert_eq!(
        mode_owner_group(CONFIG),
        (0o640, "root".to_string(), PACKAGE.to_string())
    );
    let checked = run(privileged("runuser").args([
        "-u",
        PACKAGE,
        "--",
        "/usr/bin/redis-streams-exporter",
        "--config",
        CONFIG,
        "--check-config",
    ]));
    assert!(checked.contains("configuration is valid"), "{checked}");

    // The systemd unit from deploy/, enabled, and valid for systemd with the binary in place.
    let unit = "/usr/lib/systemd/system/redis-streams-exporter.service";
    assert_eq!(
        std::fs::read_to_string(unit).unwrap(),
        std::fs::read_to_string(root().join("deploy/redis-streams-exporter.service")).unwrap()
    );
    assert!(
        Path::new("/etc/systemd/system/multi-user.target.wants/redis-streams-exporter.service")
            .exists(),
        "the unit is not enabled"
    );
    let verify = run(Command::new("systemd-analyze").args(["verify", unit]));
    assert!(
        verify.trim().is_empty(),
        "systemd-analyze verify:\n{verify}"
    );

    // An edited conffile survives reinstalling the package.
    let edited = format!(
        "{}\n# edited by the administrator\n",
        std::fs::read_to_string(CONFIG).unwrap()
    );
    std::fs::write(CONFIG, &edited).unwrap();
    dpkg(&["-i", &deb]);
    assert_eq!(std::fs::read_to_string(CONFIG).unwrap(), edited);
    assert_eq!(mode_owner_group(CONFIG).0, 0o640);

    // Purge removes the files, the conffile and the override, and disables the unit.
    drop(guard);
    let gone = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", PACKAGE])
        .output()
        .unwrap();
    let gone = text(&gone);
    assert!(
        gone.contains("not-installed") || gone.contains("no packages found"),
        "still installed: {gone}"
    );
    for path in [
        "/usr/bin/redis-streams-exporter",
        "/etc/redis-streams-exporter",
        unit,
        "/etc/systemd/system/multi-user.target.wants/redis-streams-exporter.service",
    ] {
        assert!(!Path::new(path).exists(), "{path} left after purge");
    }
    // Exit status 1 only says that no override is listed at all.
    let overrides = Command::new("dpkg-statoverride")
        .arg("--list")
        .output()
        .expect("dpkg-statoverride");
    let overrides = text(&overrides);
    assert!(
        !overrides.contains(CONFIG),
        "statoverride left after purge: {overrides}"
    );
}
