//! A server's skills (SEP-2640, the `io.modelcontextprotocol/skills` extension): Agent Skills
//! served as MCP resources, each a directory of files with a `SKILL.md` at its root.
//!
//! - [`McpClient::list_skills`] (`skills/list`, every page, bounded): each skill's name,
//!   description, full frontmatter and manifest (every file's URI, digest and size) — **no
//!   file is fetched**: the extension forbids reading a skill's files ahead of need.
//! - [`McpClient::get_skill`] (`skills/get`): one skill's entry by its `SKILL.md` URI, listed
//!   or not; [`McpClient::find_skill`] by name (several with one name: name one by URI) or URI.
//! - [`McpClient::load_skill`]: fetch the `SKILL.md` (`resources/read`) and verify it against
//!   the entry held — its declared size (checked before anything is hashed; a blob is decoded
//!   only up to it), its SHA-256 digest, then its YAML frontmatter field by field against the
//!   listed one (`name` and `description` required). Any failure is its own
//!   [`McpSkillError`] variant, and the content is not returned.
//! - [`McpClient::read_skill_file`]: a supporting file by path or URI, only one the entry
//!   lists, verified the same way (size, digest).
//!
//! agcore declares nothing for this extension: the SEP has servers declare it, and a client
//! only calls `skills/*` after seeing the declaration ([`McpServerInfo::has_skills`](crate::tools::mcp::McpServerInfo::has_skills)).
//! Everything a server sends here is untrusted: [`McpSkill`] keeps its texts as sent (the
//! checks compare them exactly), so show them escaped ([`crate::display`]); the errors escape
//! and cut them already. A skill without digests (`"resources": "dynamic"`) is listed but not
//! loaded ([`McpSkillError::Unverifiable`]).

use std::collections::HashSet;

use rmcp::model::{
    GetSkillRequestParams, PaginatedRequestParams, Skill, SkillResources, skill_name_from_uri,
};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::connection::Connection;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::skill_error::{McpSkillError, shown};
use crate::tools::mcp::skill_frontmatter::{self, FrontmatterProblem};
use crate::tools::mcp::skill_verify::{self, Expected, FileProblem};
use crate::tools::mcp::{MAX_LIST_PAGES, MAX_LISTED_TOOLS};

/// The largest skill file agcore fetches (1 MiB): a larger declared size is refused before the
/// read ([`McpSkillError::TooLarge`]).
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;

/// The most files one skill's manifest may list before agcore stops keeping it.
pub const MAX_SKILL_FILES: usize = 1000;

/// One file of a skill, as its entry declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpSkillFile {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// A skill a server lists (`skills/list`) or returns (`skills/get`): its entry, nothing
/// fetched. Texts are as the server sent them — escape them to show them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpSkill {
    /// The server's name (agcore's label for it, not its self-reported name).
    pub server: String,
    /// The URI of its `SKILL.md`: the skill's identity on this server.
    pub uri: String,
    /// `frontmatter.name`.
    pub name: String,
    /// `frontmatter.description`.
    pub description: String,
    /// The whole frontmatter, every field the author wrote.
    pub frontmatter: Map<String, Value>,
    /// Every file of the skill with its digest and size; `None` when the server generates the
    /// files (`"dynamic"`): such a skill cannot be verified and is not loaded.
    pub files: Option<Vec<McpSkillFile>>,
    /// The rule of the extension the entry breaks, if any (escaped, cut): such a skill is
    /// listed but not loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl McpSkill {
    /// The entry of its `SKILL.md` in the manifest.
    pub fn skill_md(&self) -> Option<&McpSkillFile> {
        self.files
            .as_ref()?
            .iter()
            .find(|file| file.uri == self.uri)
    }

    /// The URI of the skill's directory, with a trailing `/` (`skill://a/b/`).
    pub fn root(&self) -> &str {
        self.uri.strip_suffix("SKILL.md").unwrap_or(&self.uri)
    }

    fn of(server: &str, skill: Skill) -> Self {
        let problem = skill
            .validate()
            .err()
            .map(|error| shown(&error.to_string()));
        let frontmatter = match serde_json::to_value(&skill.frontmatter) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let (files, problem) = match skill.resources {
            SkillResources::Files(files) if files.len() > MAX_SKILL_FILES => (
                Some(Vec::new()),
                Some(format!(
                    "its manifest lists {} files, more than agcore keeps ({MAX_SKILL_FILES})",
                    files.len()
                )),
            ),
            SkillResources::Files(files) => (
                Some(
                    files
                        .into_iter()
                        .map(|file| McpSkillFile {
                            uri: file.uri,
                            digest: file.digest,
                            size: file.size,
                        })
                        .collect(),
                ),
                problem,
            ),
            _ => (None, problem),
        };
        McpSkill {
            server: server.to_owned(),
            uri: skill.uri,
            name: skill.frontmatter.name,
            description: skill.frontmatter.description,
            frontmatter,
            files,
            problem,
        }
    }
}

/// A skill whose `SKILL.md` was fetched and verified against its entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpLoadedSkill {
    /// The entry it was verified against.
    pub skill: McpSkill,
    /// The whole `SKILL.md`, frontmatter included. Untrusted model input: tag it with the
    /// server when it enters a model's context, escape it to show it.
    pub text: String,
}

impl McpLoadedSkill {
    /// The instructions after the frontmatter block.
    pub fn body(&self) -> &str {
        skill_frontmatter::block(&self.text).map_or(self.text.as_str(), |(_, body)| body)
    }
}

impl McpClient {
    /// The skills the server lists; see [the module](crate::tools::mcp::skills).
    ///
    /// # Errors
    /// [`McpSkillError::NotOffered`] when the server did not declare the extension (nothing is
    /// sent), [`McpSkillError::Listing`] past agcore's bounds, [`McpSkillError::Request`].
    pub async fn list_skills(&self) -> Result<Vec<McpSkill>, McpSkillError> {
        self.handle().list_skills().await
    }

    /// One skill's entry by the URI of its `SKILL.md` (`skills/get`).
    ///
    /// # Errors
    /// As [`list_skills`](Self::list_skills); the server's error for a URI it does not serve
    /// as a skill is [`McpSkillError::Request`].
    pub async fn get_skill(&self, uri: &str) -> Result<McpSkill, McpSkillError> {
        self.handle().get_skill(uri).await
    }

    /// A skill by name (as listed) or by its `SKILL.md` URI (listed or not).
    ///
    /// # Errors
    /// [`McpSkillError::NotFound`], [`McpSkillError::Ambiguous`] (several skills with the
    /// name), and those of [`list_skills`](Self::list_skills).
    pub async fn find_skill(&self, name_or_uri: &str) -> Result<McpSkill, McpSkillError> {
        self.handle().find_skill(name_or_uri).await
    }

    /// Fetch and verify a skill's `SKILL.md`.
    ///
    /// # Errors
    /// One [`McpSkillError`] variant per failed check; see [the module](crate::tools::mcp::skills).
    pub async fn load_skill(&self, skill: &McpSkill) -> Result<McpLoadedSkill, McpSkillError> {
        self.handle().load_skill(skill).await
    }

    /// Fetch and verify a file of a skill, by its path in the skill (`references/FORMS.md`) or
    /// its URI.
    ///
    /// # Errors
    /// [`McpSkillError::Unlisted`] for a file the entry does not list (nothing is sent), and the
    /// size and digest checks of [`load_skill`](Self::load_skill).
    pub async fn read_skill_file(
        &self,
        skill: &McpSkill,
        path: &str,
    ) -> Result<Vec<u8>, McpSkillError> {
        self.handle().read_skill_file(skill, path).await
    }
}

impl McpHandle {
    /// See [`McpClient::list_skills`].
    pub async fn list_skills(&self) -> Result<Vec<McpSkill>, McpSkillError> {
        let conn = self.offering_skills().await?;
        let listing = |reason: String| McpSkillError::Listing {
            server: conn.server.to_string(),
            reason,
        };
        let mut skills = Vec::new();
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let page = conn
                .request("skills/list", "", conn.peer.list_skills(Some(params)))
                .await?;
            skills.extend(page.skills);
            if skills.len() > MAX_LISTED_TOOLS {
                return Err(listing(format!(
                    "listed more than {MAX_LISTED_TOOLS} skills"
                )));
            }
            match page.next_cursor {
                Some(next) if cursors.insert(next.clone()) => cursor = Some(next),
                Some(next) => {
                    return Err(listing(format!(
                        "repeated the cursor '{}' (a paging loop)",
                        shown(&next)
                    )));
                }
                None => return Ok(entries(&conn.server, skills)),
            }
        }
        Err(listing(format!(
            "did not end after {MAX_LIST_PAGES} pages; agcore stops there"
        )))
    }

    /// See [`McpClient::get_skill`].
    pub async fn get_skill(&self, uri: &str) -> Result<McpSkill, McpSkillError> {
        let conn = self.offering_skills().await?;
        let result = conn
            .request(
                "skills/get",
                uri,
                conn.peer.get_skill(GetSkillRequestParams::new(uri)),
            )
            .await?;
        let mut skill = McpSkill::of(&conn.server, result.skill);
        if skill.uri != uri {
            skill.problem = Some(format!(
                "skills/get for {} answered with {}",
                shown(uri),
                shown(&skill.uri)
            ));
        }
        Ok(skill)
    }

    /// See [`McpClient::find_skill`].
    pub async fn find_skill(&self, name_or_uri: &str) -> Result<McpSkill, McpSkillError> {
        let skills = self.list_skills().await?;
        if let Some(skill) = skills.iter().find(|skill| skill.uri == name_or_uri) {
            return Ok(skill.clone());
        }
        let named: Vec<&McpSkill> = skills
            .iter()
            .filter(|skill| skill.name == name_or_uri)
            .collect();
        match named.as_slice() {
            [one] => Ok((*one).clone()),
            [] if skill_name_from_uri(name_or_uri).is_some() => self.get_skill(name_or_uri).await,
            [] => Err(McpSkillError::NotFound {
                server: self.server_name().to_owned(),
                name: shown(name_or_uri),
            }),
            several => Err(McpSkillError::Ambiguous {
                server: self.server_name().to_owned(),
                name: shown(name_or_uri),
                uris: several.iter().map(|skill| shown(&skill.uri)).collect(),
            }),
        }
    }

    /// See [`McpClient::load_skill`].
    pub async fn load_skill(&self, skill: &McpSkill) -> Result<McpLoadedSkill, McpSkillError> {
        let server = skill.server.clone();
        let uri = shown(&skill.uri);
        let bytes = self.verified_file(skill, &skill.uri).await?;
        let text = String::from_utf8(bytes).map_err(|_| McpSkillError::Unreadable {
            server: server.clone(),
            uri: uri.clone(),
            reason: "SKILL.md is not UTF-8 text".into(),
        })?;
        let checked = skill_frontmatter::parse(&text)
            .and_then(|found| skill_frontmatter::compare(&found, &skill.frontmatter));
        match checked {
            Ok(()) => Ok(McpLoadedSkill {
                skill: skill.clone(),
                text,
            }),
            Err(FrontmatterProblem::Malformed(reason)) => Err(McpSkillError::BadFrontmatter {
                server,
                uri,
                reason: shown(&reason),
            }),
            Err(FrontmatterProblem::Missing(field)) => Err(McpSkillError::MissingField {
                server,
                uri,
                field: field.to_owned(),
            }),
            Err(FrontmatterProblem::Name { found }) => Err(McpSkillError::NameMismatch {
                server,
                uri,
                listed: shown(&skill.name),
                found: shown(&found),
            }),
            Err(FrontmatterProblem::Field(field)) => Err(McpSkillError::FrontmatterMismatch {
                server,
                uri,
                field: shown(&field),
            }),
        }
    }

    /// See [`McpClient::read_skill_file`].
    pub async fn read_skill_file(
        &self,
        skill: &McpSkill,
        path: &str,
    ) -> Result<Vec<u8>, McpSkillError> {
        let uri = if path.contains("://") {
            path.to_owned()
        } else {
            format!("{}{}", skill.root(), path.trim_start_matches("./"))
        };
        self.verified_file(skill, &uri).await
    }

    /// The connection, when the server declared the skills extension.
    async fn offering_skills(&self) -> Result<std::sync::Arc<Connection>, McpSkillError> {
        let conn = self.live().await?;
        if !conn.info.has_skills {
            return Err(McpSkillError::NotOffered {
                server: conn.server.to_string(),
            });
        }
        Ok(conn)
    }

    /// The bytes of the file `uri` of `skill`, read and checked against its manifest entry.
    async fn verified_file(&self, skill: &McpSkill, uri: &str) -> Result<Vec<u8>, McpSkillError> {
        let server = skill.server.clone();
        if let Some(reason) = &skill.problem {
            return Err(McpSkillError::Invalid {
                server,
                uri: shown(&skill.uri),
                reason: reason.clone(),
            });
        }
        let Some(files) = &skill.files else {
            return Err(McpSkillError::Unverifiable {
                server,
                uri: shown(&skill.uri),
            });
        };
        let Some(file) = files.iter().find(|file| file.uri == uri) else {
            return Err(McpSkillError::Unlisted {
                server,
                skill: shown(&skill.uri),
                uri: shown(uri),
            });
        };
        if file.size > MAX_SKILL_FILE_BYTES {
            return Err(McpSkillError::TooLarge {
                server,
                uri: shown(uri),
                size: file.size,
                limit: MAX_SKILL_FILE_BYTES,
            });
        }
        let contents = self.read_resource(uri).await?;
        let expected = Expected {
            uri,
            size: file.size,
            digest: &file.digest,
        };
        skill_verify::verified_bytes(&contents, expected).map_err(|problem| match problem {
            FileProblem::Unreadable(reason) => McpSkillError::Unreadable {
                server,
                uri: shown(uri),
                reason,
            },
            FileProblem::Size(actual) => McpSkillError::SizeMismatch {
                server,
                uri: shown(uri),
                expected: file.size,
                actual,
            },
            FileProblem::Digest(actual) => McpSkillError::DigestMismatch {
                server,
                uri: shown(uri),
                expected: shown(&file.digest),
                actual,
            },
        })
    }
}

/// The listed skills as entries; a URI listed twice makes its later entries not loadable.
fn entries(server: &str, skills: Vec<Skill>) -> Vec<McpSkill> {
    let mut seen = HashSet::new();
    skills
        .into_iter()
        .map(|skill| {
            let mut entry = McpSkill::of(server, skill);
            if !seen.insert(entry.uri.clone()) && entry.problem.is_none() {
                entry.problem = Some("the listing names this skill twice".into());
            }
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{SkillFrontmatter, SkillResource};

    fn skill(uri: &str, name: &str) -> Skill {
        Skill::new(
            uri,
            SkillFrontmatter::new(name, "Does things").with_field("license", "MIT"),
            SkillResources::Files(vec![SkillResource::from_bytes(uri, b"x")]),
        )
    }

    #[test]
    fn an_entry_keeps_every_frontmatter_field_and_its_manifest() {
        let entry = McpSkill::of("s", skill("skill://acme/pdf/SKILL.md", "pdf"));
        assert_eq!(entry.name, "pdf");
        assert_eq!(entry.frontmatter["license"], "MIT");
        assert_eq!(entry.frontmatter["description"], "Does things");
        assert_eq!(entry.skill_md().map(|file| file.size), Some(1));
        assert_eq!(entry.root(), "skill://acme/pdf/");
        assert_eq!(entry.problem, None);
    }

    #[test]
    fn an_entry_that_breaks_a_rule_says_which() {
        let entry = McpSkill::of("s", skill("skill://acme/pdf/SKILL.md", "other"));
        assert!(
            entry
                .problem
                .unwrap()
                .contains("does not end in the frontmatter name")
        );
        let listed = entries(
            "s",
            vec![
                skill("skill://a/SKILL.md", "a"),
                skill("skill://a/SKILL.md", "a"),
            ],
        );
        assert_eq!(listed[0].problem, None);
        assert!(listed[1].problem.as_deref().unwrap().contains("twice"));
    }

    #[test]
    fn the_body_follows_the_frontmatter() {
        let loaded = McpLoadedSkill {
            skill: McpSkill::of("s", skill("skill://a/SKILL.md", "a")),
            text: "---\nname: a\ndescription: b\n---\n# Title\nText\n".into(),
        };
        assert_eq!(loaded.body(), "# Title\nText\n");
    }
}
