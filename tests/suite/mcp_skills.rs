//! Skills (SEP-2640) against a real rmcp 3.11 server that serves them
//! (`examples/mcp_mrtr_server.rs --skills`, stdio, protocol 2026-07-28; it logs every
//! `resources/read` URI and counts `skills/list` and `skills/get`): listing fetches no file, a
//! good skill verifies (and only its `SKILL.md` is read), a supporting file is read only when
//! the entry lists it, and each tampered skill — wrong digest, lying size, frontmatter that is
//! not the listed one, another name — fails with its own typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use agcore::tools::mcp::{McpClient, McpSkillError, McpTransport};

fn client(state: &Path, skills: bool) -> McpClient {
    let mut args = vec!["--state".into(), state.display().to_string()];
    if skills {
        args.push("--skills".into());
    }
    McpClient::new(
        "skills",
        McpTransport::Stdio {
            command: support::mcp::mrtr_server().display().to_string(),
            args,
        },
    )
    .with_protocol_version("2026-07-28")
    .with_timeout(30)
}

async fn connected(state: &Path) -> McpClient {
    let mut client = client(state, true);
    support::mcp::before_10s(client.connect()).await.unwrap();
    assert!(client.server_info().unwrap().has_skills);
    client
}

/// The URIs the server was asked to read, in order.
fn reads(state: &Path) -> Vec<String> {
    std::fs::read_to_string(state.join("reads"))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn count(state: &Path, name: &str) -> usize {
    std::fs::read_to_string(state.join(name))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_gives_every_entry_and_fetches_no_file() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let skills = client.list_skills().await.unwrap();
    let names: Vec<&str> = skills.iter().map(|skill| skill.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "greeting",
            "broken-digest",
            "lying-size",
            "wrong-frontmatter",
            "renamed",
            "refunds",
            "refunds"
        ]
    );
    let greeting = &skills[0];
    assert_eq!(greeting.uri, "skill://greeting/SKILL.md");
    assert_eq!(greeting.description, "Greet people warmly");
    assert_eq!(greeting.frontmatter["license"], "MIT");
    assert_eq!(greeting.frontmatter["metadata"]["version"], "1.0");
    let files = greeting.files.as_ref().unwrap();
    assert_eq!(files.len(), 2);
    let skill_md = greeting.skill_md().unwrap();
    assert!(skill_md.digest.starts_with("sha256:") && skill_md.digest.len() == 71);
    assert!(skill_md.size > 100, "{skill_md:?}");
    assert!(skills.iter().all(|skill| skill.problem.is_none()));

    assert_eq!(count(state.path(), "skills.list"), 1);
    assert_eq!(
        reads(state.path()),
        Vec::<String>::new(),
        "listing read files"
    );
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_skill_verifies_and_only_what_is_needed_is_read() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let skill = client.find_skill("greeting").await.unwrap();
    assert_eq!(reads(state.path()), Vec::<String>::new());

    let loaded = client.load_skill(&skill).await.unwrap();
    assert!(
        loaded.text.starts_with("---\nname: greeting\n"),
        "{}",
        loaded.text
    );
    assert!(
        loaded.body().starts_with("# greeting\n"),
        "{}",
        loaded.body()
    );
    assert_eq!(reads(state.path()), ["skill://greeting/SKILL.md"]);

    // The supporting file, sent as a base64 blob, verified against the same entry.
    let style = client
        .read_skill_file(&skill, "references/STYLE.md")
        .await
        .unwrap();
    assert_eq!(style, b"Be brief and kind.\n");
    assert_eq!(
        reads(state.path()),
        [
            "skill://greeting/SKILL.md",
            "skill://greeting/references/STYLE.md"
        ]
    );

    // A file the entry does not list is refused without asking the server.
    let error = client
        .read_skill_file(&skill, "scripts/run.sh")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, McpSkillError::Unlisted { uri, .. } if uri == "skill://greeting/scripts/run.sh"),
        "{error}"
    );
    assert_eq!(reads(state.path()).len(), 2);
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_digest_fails_the_digest_check() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let skill = client.find_skill("broken-digest").await.unwrap();
    let error = client.load_skill(&skill).await.unwrap_err();
    match &error {
        McpSkillError::DigestMismatch {
            uri,
            expected,
            actual,
            ..
        } => {
            assert_eq!(uri, "skill://acme/broken-digest/SKILL.md");
            assert_eq!(expected, &skill.skill_md().unwrap().digest);
            assert_ne!(expected, actual);
            assert!(actual.starts_with("sha256:"));
        }
        other => panic!("not a digest mismatch: {other:?}"),
    }
    assert!(error.to_string().contains("digest check"), "{error}");
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_that_lies_fails_the_size_check() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let skill = client.find_skill("lying-size").await.unwrap();
    let declared = skill.skill_md().unwrap().size;
    let error = client.load_skill(&skill).await.unwrap_err();
    assert!(
        matches!(
            &error,
            McpSkillError::SizeMismatch { expected, actual: Some(actual), .. }
                if *expected == declared && *actual == declared + 5
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("size check"), "{error}");
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontmatter_that_is_not_the_listed_one_fails_the_frontmatter_check() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let skill = client.find_skill("wrong-frontmatter").await.unwrap();
    let error = client.load_skill(&skill).await.unwrap_err();
    assert!(
        matches!(&error, McpSkillError::FrontmatterMismatch { field, .. } if field == "description"),
        "{error:?}"
    );

    let skill = client.find_skill("renamed").await.unwrap();
    let error = client.load_skill(&skill).await.unwrap_err();
    assert!(
        matches!(&error, McpSkillError::NameMismatch { listed, found, .. }
            if listed == "renamed" && found == "other"),
        "{error:?}"
    );
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_name_for_two_skills_asks_for_the_uri_and_an_unlisted_uri_is_got() {
    let state = tempfile::tempdir().unwrap();
    let mut client = connected(state.path()).await;
    let error = client.find_skill("refunds").await.unwrap_err();
    match &error {
        McpSkillError::Ambiguous { uris, .. } => assert_eq!(
            uris,
            &[
                "skill://acme/billing/refunds/SKILL.md",
                "skill://acme/support/refunds/SKILL.md"
            ]
        ),
        other => panic!("not ambiguous: {other:?}"),
    }
    let skill = client
        .find_skill("skill://acme/support/refunds/SKILL.md")
        .await
        .unwrap();
    assert_eq!(skill.uri, "skill://acme/support/refunds/SKILL.md");
    assert_eq!(count(state.path(), "skills.get"), 0);

    // Not listed: skills/get gives its entry, which verifies like a listed one.
    let hidden = client.find_skill("skill://hidden/SKILL.md").await.unwrap();
    assert_eq!(count(state.path(), "skills.get"), 1);
    let loaded = client.load_skill(&hidden).await.unwrap();
    assert!(loaded.text.contains("name: hidden"));

    let error = client.find_skill("nothing-here").await.unwrap_err();
    assert!(matches!(error, McpSkillError::NotFound { .. }), "{error:?}");
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_extension_is_not_asked() {
    let state = tempfile::tempdir().unwrap();
    let mut client = client(state.path(), false);
    support::mcp::before_10s(client.connect()).await.unwrap();
    assert!(!client.server_info().unwrap().has_skills);
    let error = client.list_skills().await.unwrap_err();
    assert!(
        matches!(error, McpSkillError::NotOffered { .. }),
        "{error:?}"
    );
    assert_eq!(count(state.path(), "skills.list"), 0);
    let _ = client.close().await;
}
