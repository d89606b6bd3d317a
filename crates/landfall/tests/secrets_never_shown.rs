//! No secret a configuration holds ever shows: not in the daemon's log (at debug level), its
//! metrics, health and API answers, the status page and its charts, nor in what the CLI prints
//! (`check`, `streams`, `state`, `locations`), including the errors credentials cause. The
//! secrets are distinctive strings (`LFSECRET-...`) in every place a user puts one: an S3
//! secret key and session token, one of them through `${ENV}` interpolation, an Azure account
//! key that Azurite refuses (so its errors are shown), a SAS token in the store options and in
//! a source URL, and the admin token, sent wrong and right. Every output is scanned.
//!
//! The suite's own outputs are scanned too: scripts/test.sh collects every daemon log and CLI
//! output of the run (`LANDFALL_TEST_OUTPUTS`) and fails when one carries a credential the
//! tests use (tests/deploy/scan_secrets.py).

mod common;
mod daemon;
use common::*;
use daemon::*;
use std::time::{Duration, Instant};

const S3_SECRET: &str = "LFSECRET-s3-secret-key-8c1f2e";
const S3_SESSION: &str = "LFSECRET-s3-session-token-4a9b";
const ENV_SECRET: &str = "LFSECRET-from-env-5e5e";
const SAS_SIG: &str = "LFSECRET-sas-signature-0b7d";
const ADMIN: &str = "LFSECRET-admin-token-31d0";

/// A wrong Azure account key (base64, as keys are), and the secret it encodes.
fn azure_key() -> String {
    base64(b"LFSECRET-azure-account-key-77aa-not-azurites")
}

fn secrets() -> Vec<String> {
    let mut s: Vec<String> = [S3_SECRET, S3_SESSION, ENV_SECRET, SAS_SIG, ADMIN]
        .iter()
        .map(|s| s.to_string())
        .collect();
    s.push(azure_key());
    s
}

fn assert_clean(what: &str, text: &str) {
    for s in secrets() {
        assert!(!text.contains(&s), "{what} shows the secret `{s}`:\n{text}");
    }
    // Any part of one: a secret cut or wrapped in a message still leaks.
    assert!(!text.contains("LFSECRET"), "{what} shows a secret:\n{text}");
}

fn config(root: &std::path::Path) -> std::path::PathBuf {
    let (blob, _) = azurite();
    std::fs::create_dir_all(root.join("landing")).unwrap();
    std::fs::write(
        root.join("landing/a.json"),
        (0..3).map(row).collect::<String>(),
    )
    .unwrap();
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.moto]
endpoint = "{moto}"
region = "us-east-1"
access_key_id = "AKIDLANDFALLSECRETS"
secret_access_key = "{S3_SECRET}"
session_token = "{S3_SESSION}"
allow_http = true

[stores.env]
endpoint = "{moto}"
region = "us-east-1"
access_key_id = "AKIDLANDFALLENV"
secret_access_key = "${{LF_TEST_SECRET}}"
allow_http = true

[stores.azbad]
account = "devstoreaccount1"
access_key = "{azkey}"
endpoint = "{blob}/devstoreaccount1"
allow_http = true

[stores.sas]
account = "devstoreaccount1"
endpoint = "{blob}/devstoreaccount1"
allow_http = true
options = {{ azure_storage_sas_key = "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2030-01-01T00:00:00Z&sig={SAS_SIG}" }}

[streams.local]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "200ms"
sink.path = "{root}/t_local"

[streams.s3]
source = "s3://landfall-test/secrets-{pid}/landing"
source_store = "moto"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{root}/t_s3"

[streams.s3env]
source = "s3://landfall-test/secrets-{pid}/other"
source_store = "env"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{root}/t_s3env"

[streams.azbad]
source = "az://landfall-test/secrets-{pid}/landing"
source_store = "azbad"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{root}/t_azbad"

[streams.userinfo]
source = "s3://AKIDUSERINFO:{S3_SECRET}@landfall-test/secrets-{pid}/userinfo"
source_store = "moto"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{root}/t_userinfo"

[streams.sas]
source = "az://landfall-test/secrets-{pid}/sas?sv=2022-11-02&sig={SAS_SIG}"
source_store = "sas"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{root}/t_sas"
"#,
            root = root.display(),
            moto = moto_endpoint(),
            azkey = azure_key(),
            pid = std::process::id(),
        ),
    )
}

#[test]
fn no_output_of_the_daemon_or_the_cli_carries_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config(root);
    let env = [("LF_TEST_SECRET", ENV_SECRET)];
    let c = cfg.to_str().unwrap();
    let check = landfall_env(&["check", "--config", c], &env);
    assert!(check.status.success(), "{}", text(&check));
    assert_clean("landfall check", &text(&check));

    // A file in the stream whose location carries a password: its path shows everywhere.
    let upload = root.join("upload.json");
    std::fs::write(&upload, (0..3).map(row).collect::<String>()).unwrap();
    let key = format!("secrets-{}/userinfo/a.json", std::process::id());
    aws(&["put", "landfall-test", &key, upload.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut d = Daemon::start_with(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        deadline,
        &[
            ("LANDFALL_LOG", "debug"),
            ("LANDFALL_ADMIN_TOKEN", ADMIN),
            ("LF_TEST_SECRET", ENV_SECRET),
        ],
        &[],
    );
    let addr = d.addr.clone();
    // The refused Azure key shows as the stream's error; the local stream commits.
    loop {
        let (_, ready) = get_json(&addr, "/readyz");
        let az_error = ready["streams"]["azbad"]["error"].as_str().unwrap_or("");
        let scrape = get(&addr, "/metrics").1;
        let committed = |s: &str| {
            metric(
                &scrape,
                &format!("landfall_files_committed_total{{stream=\"{s}\"}}"),
            )
        };
        if !az_error.is_empty()
            && committed("local") == Some(1.0)
            && committed("userinfo") == Some(1.0)
        {
            break;
        }
        d.process.assert_running();
        assert!(Instant::now() < deadline, "{ready}\n{}", d.process.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut shown = Vec::new();
    for path in [
        "/",
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/streams",
        "/api/v1/locations",
    ] {
        shown.push((path.to_string(), get(&addr, path).1));
    }
    for s in ["local", "s3", "s3env", "azbad", "sas", "userinfo"] {
        for tail in [
            "",
            "/progress",
            "/files",
            "/timeline",
            "/charts.svg",
            "/skipped",
            "/schemas",
        ] {
            let path = format!("/api/v1/streams/{s}{tail}");
            shown.push((path.clone(), get(&addr, &path).1));
        }
    }
    // Admin calls without, with a wrong and with the right token.
    for token in [None, Some("wrong-token"), Some(ADMIN)] {
        let (status, body) = post(&addr, "/api/v1/streams/s3/backfill", token, "");
        shown.push((
            format!("backfill with {token:?}: {status}"),
            body.to_string(),
        ));
    }
    for (what, body) in &shown {
        assert_clean(what, body);
    }
    let (_, log) = d.stop(Duration::from_secs(30));
    assert!(log.contains("azbad"), "{log}");
    assert_clean("the daemon's debug log", &log);

    for args in [
        vec!["streams", "--config", c],
        vec!["streams", "--config", c, "--format", "json"],
        vec!["state", "azbad", "--config", c],
        vec!["state", "userinfo", "--config", c],
        vec!["state", "userinfo", "--config", c, "--format", "json"],
        vec!["locations", "--config", c],
        vec!["run", "--config", c, "--available-now", "--stream", "azbad"],
    ] {
        let o = landfall_env(&args, &env);
        assert_clean(&format!("landfall {args:?}"), &text(&o));
    }
}

/// Configurations that do not validate, with secrets beside the mistakes: a misspelt key next
/// to a secret and a secret's own key given a bad value (refused while parsing); locations
/// that do not parse or name nothing, with a SAS token or a password in them (refused while
/// validating). The errors name the keys and the locations, never the secrets.
#[test]
fn configuration_errors_never_echo_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let check = |body: &str, expect: &str| {
        let cfg = write_config(root, body);
        let o = landfall(&["check", "--config", cfg.to_str().unwrap()]);
        assert!(!o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(expect), "{}", text(&o));
        assert_clean("landfall check of a bad configuration", &text(&o));
    };
    check(
        &format!(
            "[stores.moto]\nendpoint = \"http://127.0.0.1:1\"\nsecret_acess_key = \"{S3_SECRET}\"\n\
             session_token = [\"{S3_SESSION}\"]\n"
        ),
        "secret_acess_key",
    );
    let stream = |name: &str, source: &str| {
        format!(
            "[streams.{name}]\nsource = \"{source}\"\nformat = \"json\"\nschema = \"id BIGINT\"\n\
             sink.path = \"{}/t_{name}\"\n",
            root.display()
        )
    };
    check(
        &[
            stream("nocontainer", &format!("az://?sv=2022-11-02&sig={SAS_SIG}")),
            stream("nobucket", &format!("s3://AKID:{S3_SECRET}@/in")),
            stream(
                "badurl",
                &format!("s3://AKID:{S3_SECRET}@[bad/in?sig={SAS_SIG}"),
            ),
            // A secret key with `/` in it (AWS keys often have one): not a port, not a path.
            stream("slash", &format!("s3://AKID:{S3_SESSION}/x@bucket/in")),
        ]
        .concat(),
        "streams.badurl.source",
    );
    // Valid locations with secrets in an error about them: a table inside its source.
    check(
        &format!(
            "[streams.overlap]\nsource = \"az://c/in?sig={SAS_SIG}\"\nformat = \"json\"\n\
             schema = \"id BIGINT\"\nsink.path = \"az://c/in/table?sig={SAS_SIG}\"\n"
        ),
        "overlap",
    );
}
